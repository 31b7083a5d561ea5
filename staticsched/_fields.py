"""Strict readers for decoded JSON/TOML mappings that collect every problem.

Loaders call these instead of indexing dicts directly so that every bad key,
wrong type or out-of-range number becomes one line naming where it is.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_MISSING = object()


class Problems:
    """Collects problem lines; ``raise_if_any`` raises the given error type with all of them."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def raise_if_any(self, error: type[Exception]) -> None:
        if self.lines:
            raise error(self.lines)


def is_int(x: object) -> bool:
    """An ``int`` that is not a ``bool`` (JSON and TOML give both)."""
    return isinstance(x, int) and not isinstance(x, bool)


def positive_ints(xs: Iterable[object], count: int | None = None) -> bool:
    """Whether ``xs`` are all positive integers (and, with ``count``, exactly that many)."""
    xs = list(xs)
    return (count is None or len(xs) == count) and all(is_int(x) and x > 0 for x in xs)  # type: ignore[operator]


_NAME_RE = re.compile(r"[A-Za-z0-9_.:/+\-\[\]#@]+")


def check_name(name: object, what: str, where: str, problems: Problems) -> bool:
    """Names (ops, items, units, spaces, tensors) are non-empty and free of spaces, quotes and
    control characters, so every text format can carry them unquoted."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        problems.add(f"{where}: {what} name {name!r} must be non-empty and use only letters, digits "
                     "and _ . : / + - [ ] # @")
        return False
    return True


def check_keys(obj: Mapping[str, Any], allowed: Iterable[str], where: str, problems: Problems) -> None:
    """Report every key of ``obj`` that is not in ``allowed``."""
    allowed = set(allowed)
    for key in sorted(obj):
        if key not in allowed:
            problems.add(f"{where}: unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")


def get_mapping(
    obj: Mapping[str, Any], key: str, where: str, problems: Problems, *, required: bool = False
) -> dict[str, Any]:
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        if required:
            problems.add(f"{where}: missing required key '{key}'")
        return {}
    if not isinstance(value, Mapping):
        problems.add(f"{where}: '{key}' must be a table/object, got {type(value).__name__}")
        return {}
    return dict(value)


def get_int(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    problems: Problems,
    *,
    default: Any = _MISSING,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    value = obj.get(key, default)
    if value is _MISSING:
        problems.add(f"{where}: missing required key '{key}'")
        return minimum if minimum is not None else 0
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(f"{where}: '{key}' must be an integer, got {value!r}")
        return minimum if minimum is not None else 0
    if minimum is not None and value < minimum:
        problems.add(f"{where}: '{key}' = {value} is below the minimum {minimum}")
        return minimum
    if maximum is not None and value > maximum:
        problems.add(f"{where}: '{key}' = {value} is above the maximum {maximum}")
        return maximum
    return value


def get_number(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    problems: Problems,
    *,
    default: Any = _MISSING,
    positive: bool = False,
) -> float:
    value = obj.get(key, default)
    if value is _MISSING:
        problems.add(f"{where}: missing required key '{key}'")
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(f"{where}: '{key}' must be a number, got {value!r}")
        return 1.0
    if not math.isfinite(value):
        problems.add(f"{where}: '{key}' must be finite, got {value!r}")
        return 1.0
    if positive and value <= 0:
        problems.add(f"{where}: '{key}' must be > 0, got {value!r}")
        return 1.0
    return float(value)


def get_str(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    problems: Problems,
    *,
    default: Any = _MISSING,
    choices: Iterable[str] | None = None,
) -> str:
    value = obj.get(key, default)
    if value is _MISSING:
        problems.add(f"{where}: missing required key '{key}'")
        return ""
    if not isinstance(value, str):
        problems.add(f"{where}: '{key}' must be a string, got {value!r}")
        return ""
    if choices is not None:
        choices = list(choices)
        if value not in choices:
            problems.add(f"{where}: '{key}' = {value!r} is not one of {', '.join(choices)}")
    return value


def get_bool(
    obj: Mapping[str, Any], key: str, where: str, problems: Problems, *, default: bool = False
) -> bool:
    value = obj.get(key, default)
    if not isinstance(value, bool):
        problems.add(f"{where}: '{key}' must be true or false, got {value!r}")
        return default
    return value


def get_list(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    problems: Problems,
    *,
    default: Any = _MISSING,
) -> list[Any]:
    value = obj.get(key, default)
    if value is _MISSING:
        problems.add(f"{where}: missing required key '{key}'")
        return []
    if not isinstance(value, list | tuple):
        problems.add(f"{where}: '{key}' must be a list, got {type(value).__name__}")
        return []
    return list(value)


def get_str_list(obj: Mapping[str, Any], key: str, where: str, problems: Problems) -> list[str]:
    out = []
    for i, v in enumerate(get_list(obj, key, where, problems, default=[])):
        if isinstance(v, str):
            out.append(v)
        else:
            problems.add(f"{where}: '{key}'[{i}] must be a string, got {v!r}")
    return out


def read_text_file(path: str | Path, error: type[Exception]) -> str:
    """The UTF-8 text of a user's file, gunzipped when it is gzip data (``.gz`` outputs); a
    missing, unreadable or corrupt file raises ``error`` with one line naming the path."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise error(f"{path}: not a valid gzip file: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read: {exc}") from None
