"""JSON text that stays readable and diffable at 10^5 records: one record per line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Path = tuple[str | int, ...]

#: compact JSON of one value; one shared encoder (json.dumps with options builds one per call)
encode = json.JSONEncoder(allow_nan=False).encode


def _top_level(path: Path) -> bool:
    return len(path) <= 1


def dumps_json(obj: Any, expand: Callable[[Path], bool] = _top_level) -> str:
    """``obj`` as JSON with the containers ``expand`` selects written one entry per line.

    ``expand`` gets the path of a container (keys and list indices from the top, ``()`` for
    the top); the default expands the top object and its direct members, so a list of records
    becomes one record per line. The entries of one list are treated alike (``expand`` is asked
    about the first). Other containers are written compactly on one line. Key order is kept
    as given (callers build dicts in a fixed order), so the output is deterministic.
    Non-ASCII text is escaped, so any Python string (even a lone surrogate) survives a UTF-8
    file.
    """
    out: list[str] = []
    _write(obj, expand, (), out)
    out.append("\n")
    return "".join(out)


def _write(obj: Any, expand: Callable[[Path], bool], path: Path, out: list[str]) -> None:
    if not isinstance(obj, dict | list) or not obj or not expand(path):
        out.append(encode(obj))
        return
    pad = "\n" + " " * (len(path) + 1)
    close = "\n" + " " * len(path)
    if isinstance(obj, list):
        if not expand((*path, 0)):
            # the common case, a list of records: one tight loop, no recursion per record
            out.append("[" + pad + ("," + pad).join(map(encode, obj)) + close + "]")
            return
        out.append("[")
        for n, value in enumerate(obj):
            out.append(pad if n == 0 else "," + pad)
            _write(value, expand, (*path, n), out)
        out.append(close + "]")
        return
    out.append("{")
    for n, (key, value) in enumerate(obj.items()):
        out.append((pad if n == 0 else "," + pad) + encode(key) + ": ")
        _write(value, expand, (*path, key), out)
    out.append(close + "}")
