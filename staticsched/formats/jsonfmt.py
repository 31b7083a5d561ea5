"""JSON text that stays readable and diffable at 10^5 records: one record per line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

Path = tuple[str | int, ...]

#: compact JSON of one value; one shared encoder (json.dumps with options builds one per call)
encode = json.JSONEncoder(allow_nan=False).encode


def _top_level(path: Path) -> bool:
    return len(path) <= 1


#: records joined into one chunk of streamed JSON
BATCH = 4096


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
    return "".join(iter_json(obj, expand))


def iter_json(obj: Any, expand: Callable[[Path], bool] = _top_level) -> Iterator[str]:
    """:func:`dumps_json`'s text in chunks of at most :data:`BATCH` records (for writing a
    large file without holding it)."""
    yield from _chunks(obj, expand, ())
    yield "\n"


class RawList(list):
    """A list of JSON texts, one encoded value each (exactly what :data:`encode` would give):
    written as they are. A caller that has its records' texts at hand saves the encoder."""


class RawDict(dict):
    """A dict of JSON texts by key, as :class:`RawList`."""


def _compact(obj: Any) -> str:
    if type(obj) is RawList:
        return "[" + ", ".join(obj) + "]"
    if type(obj) is RawDict:
        return "{" + ", ".join(f"{encode(k)}: {v}" for k, v in obj.items()) + "}"
    return encode(obj)


def _chunks(obj: Any, expand: Callable[[Path], bool], path: Path) -> Iterator[str]:
    if not isinstance(obj, dict | list) or not obj or not expand(path):
        yield _compact(obj)
        return
    pad = "\n" + " " * (len(path) + 1)
    close = "\n" + " " * len(path)
    sep = "," + pad
    if isinstance(obj, list):
        if not expand((*path, 0)):
            # the common case, a list of records: one tight loop per batch, no recursion
            texts = (lambda part: part) if type(obj) is RawList else (lambda part: map(encode, part))
            for k in range(0, len(obj), BATCH):
                yield ("[" + pad if k == 0 else sep) + sep.join(texts(obj[k : k + BATCH]))
            yield close + "]"
            return
        yield "["
        for n, value in enumerate(obj):
            yield pad if n == 0 else sep
            yield from _chunks(value, expand, (*path, n))
        yield close + "]"
        return
    yield "{"
    if type(obj) is RawDict and not expand((*path, next(iter(obj)))):
        keys = list(obj)
        for k in range(0, len(keys), BATCH):
            part = keys[k : k + BATCH]
            yield (pad if k == 0 else sep) + sep.join(f"{encode(key)}: {obj[key]}" for key in part)
        yield close + "}"
        return
    for n, (key, value) in enumerate(obj.items()):
        yield (pad if n == 0 else sep) + encode(key) + ": "
        yield from _chunks(value, expand, (*path, key))
    yield close + "}"
