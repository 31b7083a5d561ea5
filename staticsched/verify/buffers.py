"""The numeric replay's memory: poisoned byte buffers, typed item views into them, and GM
writes deferred to an op's end (shared by the per-op replay, :mod:`staticsched.verify.numeric`,
and the lockstep one, :mod:`staticsched.verify.lockstep`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from staticsched.model.dtypes import numpy_dtype
from staticsched.verify.index import ProgramIndex

#: exceptions an op's semantics raise on bad operands (the per-op replay reports them)
ERRORS = (ValueError, IndexError, KeyError, TypeError, AttributeError, FloatingPointError)


def poison(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An array of all-ones bytes: NaN for floats, -1 for signed ints."""
    arr = np.empty(shape, dtype=numpy_dtype(dtype))
    arr.view(np.uint8)[...] = 0xFF
    return arr


def views(
    ix: ProgramIndex, used: Iterable[str], lanes: tuple[int, ...] | None = None
) -> dict[str, np.ndarray]:
    """Typed views of the ``used`` typed items into fresh poisoned buffers: one per bounded
    ``(core, space)``, as long as its capacity or its furthest item, and one per item of an
    unbounded space. With ``lanes`` (the cores of a lockstep class, whose items lie alike),
    a bounded space's buffer has a row per lane, as long as the longest of theirs, and every
    view a leading lanes axis. Every bounded item's offset must suit its dtype
    (``numeric._placeable``)."""
    rows = () if lanes is None else (len(lanes),)
    by_core = ix.bounded_items()
    # a lockstep class's cores only: a chip declares ~10^5 items
    chosen = list(by_core.values()) if lanes is None else [by_core.get(c, []) for c in sorted(set(lanes))]
    spans: dict[tuple[int, str], int] = {}
    for items in chosen:
        for it in items:
            key = (it.core if lanes is None else -1, it.space)
            need = math.prod(it.shape) * numpy_dtype(it.dtype).itemsize if it.dtype and it.shape else 0
            spans[key] = max(spans.get(key, ix.hw.space(it.space).capacity), it.offset + max(it.bytes, need))
    bufs = {key: poison((*rows, size), "uint8") for key, size in sorted(spans.items())}
    out: dict[str, np.ndarray] = {}
    for name in sorted(used):
        it = ix.items.get(name)
        if it is None or not it.dtype or not it.shape:
            continue
        dtype = numpy_dtype(it.dtype)
        nbytes = math.prod(it.shape) * dtype.itemsize
        if ix.is_bounded(name):
            raw = bufs[(it.core if lanes is None else -1, it.space)][..., it.offset : it.offset + nbytes]
        else:
            raw = poison((*rows, max(nbytes, it.bytes)), "uint8")[..., :nbytes]
        out[name] = raw.view(dtype).reshape((*rows, *it.shape))
    return out


def commit(targets: list[np.ndarray], copies: list[np.ndarray], log: list) -> None:
    """An op's end: its results into its items' views, its deferred GM writes into GM."""
    for view, value in zip(targets, copies, strict=True):
        view[...] = value
    for array, key, value in log:
        if key is _CALL:
            value(array)
        else:
            array[key] = value


#: a deferred write made by a function of the tensor (:meth:`_DeferredTensor.defer`)
_CALL = object()


class _DeferredTensor:
    """A GM tensor as the semantics see it: reads go to the array now, writes are recorded."""

    def __init__(self, array: np.ndarray, log: list) -> None:
        self._array = array
        self._log = log

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._array[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._log.append((self._array, key, np.array(value, copy=True)))

    @property
    def target(self) -> Any:
        """The tensor itself (for reads that need its storage: :func:`staticsched.model.
        layouts.read`)."""
        return self._array

    def defer(self, write: Any) -> None:
        """Record ``write(tensor)``, to run at the op's end (a write through a layout)."""
        self._log.append((self._array, _CALL, write))


class DeferredGM(Mapping):
    """GM for a kind that writes it: its writes go to ``log``, to be committed at its end."""

    def __init__(self, gm: dict[str, np.ndarray], log: list) -> None:
        self._gm = gm
        self._log = log

    def __getitem__(self, name: str) -> _DeferredTensor:
        return _DeferredTensor(self._gm[name], self._log)

    def __iter__(self) -> Iterator[str]:
        return iter(self._gm)

    def __len__(self) -> int:
        return len(self._gm)
