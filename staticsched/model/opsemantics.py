"""What each micro-op kind does to its operands: its NumPy semantics and its extent checks.

Both follow the extents an op states in its attributes, never the shapes of the tiles it is
given (:mod:`staticsched.model.opkinds`, "Extents"): the semantics work on exactly those
extents and raise on one that does not fit an operand, the extent checks say so before any
replay, one line each. The kind table (:data:`staticsched.model.opkinds.KINDS`) names these
functions as each kind's ``semantics`` and ``extents``; nothing else calls them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from staticsched.model import layouts, vecops
from staticsched.model.dtypes import as_float32
from staticsched.model.vecops import VECOPS

#: a GM region, ``((r0, r1), (c0, c1))``: half-open rows and columns of its tensor
Region = tuple[tuple[int, int], tuple[int, int]]


class Operand(Protocol):
    """What the extent checks read of an operand (an :class:`~staticsched.model.opkinds.ItemShape`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def typed(self) -> bool: ...


def region_shape(region: Region) -> tuple[int, int]:
    """The ``(rows, cols)`` a region spans."""
    (r0, r1), (c0, c1) = region
    return (r1 - r0, c1 - c0)


# --------------------------------------------------------------------------- semantics


def _corner(array: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The top-left ``rows x cols`` of a 2-D operand (of each, with a leading lanes axis:
    :attr:`~staticsched.model.opkinds.OpKind.lanes`); an extent that does not fit is an error
    (NumPy would silently clip it)."""
    if array.ndim not in (2, 3) or rows > array.shape[-2] or cols > array.shape[-1] or rows < 1 or cols < 1:
        raise ValueError(f"extent {rows}x{cols} does not fit an operand of shape {list(array.shape)}")
    return array[..., :rows, :cols]


def load_semantics(a: Mapping[str, Any], reads: Sequence[np.ndarray], writes: Sequence[np.ndarray],
                   gm: Mapping[str, Any]) -> None:
    """Copy the region of ``tensor`` (in the layout the load claims), transposed if asked, into
    the top-left of the destination."""
    # the region in the layout the load claims: the tensor's own, or scrambled bytes
    block = layouts.read(gm[a["tensor"]], a["region"], a.get("nz", False))
    transpose = a.get("transpose", False)
    if transpose:
        block = block.T
    dst = writes[0]
    # the assignment copies: a copy first only to transpose, which NumPy does 5x faster as an
    # F-ordered copy (astype keeps the view's layout) than as a strided assignment
    _corner(dst, *block.shape)[...] = block.astype(dst.dtype, copy=bool(transpose))


def move_semantics(a: Mapping[str, Any], reads: Sequence[np.ndarray], writes: Sequence[np.ndarray],
                   gm: Mapping[str, Any]) -> None:
    """Copy the top-left ``rows x cols`` of the source into the destination's, converting the
    dtype."""
    r, c = a["rows"], a["cols"]
    # no copy when the dtypes match: the assignment copies (NumPy buffers overlapping operands)
    _corner(writes[0], r, c)[...] = _corner(reads[0], r, c).astype(writes[0].dtype, copy=False)


def mmad_semantics(a: Mapping[str, Any], reads: Sequence[np.ndarray], writes: Sequence[np.ndarray],
                   gm: Mapping[str, Any]) -> None:
    """``C[:m, :n] = A[:m, :k] @ B[:k, :n]`` in float32, or ``+=`` without ``init``."""
    m, n, k = a["m"], a["n"], a["k"]
    acc = as_float32(_corner(reads[0], m, k)) @ as_float32(_corner(reads[1], k, n))
    c = _corner(writes[0], m, n)
    if a.get("init", True):
        c[...] = acc
    else:
        c += acc


def vec_semantics(a: Mapping[str, Any], reads: Sequence[np.ndarray], writes: Sequence[np.ndarray],
                  gm: Mapping[str, Any]) -> None:
    """The Vector op ``op`` on the top-left extents its operand forms give
    (:mod:`staticsched.model.vecops`)."""
    vop = VECOPS[a["op"]]
    r, c = a["rows"], a["cols"]
    # the op fixes its operands' extents from their forms (full, row, col)
    forms = vop.forms(len(reads))
    args = [as_float32(_corner(x, *vecops.extent(f, r, c))) for x, f in zip(reads, forms, strict=True)]
    out = vop.apply(args, a)
    _corner(writes[0], *vecops.extent(vop.out, r, c))[...] = out.astype(writes[0].dtype)


def store_semantics(a: Mapping[str, Any], reads: Sequence[np.ndarray], writes: Sequence[np.ndarray],
                    gm: Mapping[str, Any]) -> None:
    """Write the top-left of the source into the region of ``tensor``, in the layout the store
    claims."""
    (r0, r1), (c0, c1) = a["region"]
    src = _corner(reads[0], r1 - r0, c1 - c0)
    target = gm[a["tensor"]]
    layouts.write(target, a["region"], src.astype(target.dtype), a.get("nz", False))


# --------------------------------------------------------------------------- extents


def _fits(what: str, shape: Operand, rows: int, cols: int) -> list[str]:
    if not shape.typed:
        return []
    if rows > shape.shape[0] or cols > shape.shape[1]:
        return [f"{what} {rows}x{cols} does not fit its {shape.shape[0]}x{shape.shape[1]} tile"]
    return []


def _positive(a: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    return [f"'{x}' must be >= 1, got {a[x]}" for x in names if x in a and a[x] < 1]


def load_extents(a: Mapping[str, Any], reads: Sequence[Operand], writes: Sequence[Operand]) -> list[str]:
    """Why the loaded region (transposed if asked) does not fit the destination (empty: it does)."""
    if "region" not in a or not writes:
        return []
    h, w = region_shape(a["region"])
    if a.get("transpose", False):
        h, w = w, h
    return _fits("the loaded region", writes[0], h, w)


def rc_extents(a: Mapping[str, Any], reads: Sequence[Operand], writes: Sequence[Operand]) -> list[str]:
    """Why ``rows x cols`` is not positive or does not fit the source and the destination."""
    out = _positive(a, ("rows", "cols"))
    if out or "rows" not in a or "cols" not in a:
        return out
    for role, sh in (("source", reads[:1]), ("destination", writes[:1])):
        for x in sh:
            out += _fits(f"the {role} extent", x, a["rows"], a["cols"])
    return out


def vec_extents(a: Mapping[str, Any], reads: Sequence[Operand], writes: Sequence[Operand]) -> list[str]:
    """Why the op does not take this many operands, or an extent its form gives does not fit."""
    out = _positive(a, ("rows", "cols"))
    vop = VECOPS.get(a.get("op", ""))
    if out or "rows" not in a or "cols" not in a or vop is None:
        return out
    lo, hi = vop.arity, vop.max_reads()
    if not lo <= len(reads) <= hi:
        want = f"{lo}" if lo == hi else f"{lo} or {hi}"
        return [f"vec op '{vop.name}' takes {want} operand(s), got {len(reads)}"]
    r, c = a["rows"], a["cols"]
    forms = vop.forms(len(reads))
    for x in reads[:1]:
        out += _fits("the source extent", x, *vecops.extent(forms[0], r, c))
    for x in writes[:1]:
        out += _fits("the destination extent", x, *vecops.extent(vop.out, r, c))
    if not out:
        for x, form, nth in zip(reads[1:], forms[1:], ("second", "third"), strict=False):
            out += _fits(f"the {nth} operand's extent", x, *vecops.extent(form, r, c))
    return out


def mmad_extents(a: Mapping[str, Any], reads: Sequence[Operand], writes: Sequence[Operand]) -> list[str]:
    """Why ``m``, ``n``, ``k`` are not positive or do not fit A (m x k), B (k x n), C (m x n)."""
    out = _positive(a, ("m", "n", "k"))
    if out or not all(x in a for x in ("m", "n", "k")):
        return out
    m, n, k = a["m"], a["n"], a["k"]
    for what, sh, rows, cols in (
        ("A extent", reads[:1], m, k),
        ("B extent", reads[1:2], k, n),
        ("C extent", writes[:1], m, n),
    ):
        for x in sh:
            out += _fits(f"the {what}", x, rows, cols)
    return out


def store_extents(a: Mapping[str, Any], reads: Sequence[Operand], writes: Sequence[Operand]) -> list[str]:
    """Why the stored region does not fit the source (empty: it does)."""
    if "region" not in a or not reads:
        return []
    return _fits("the stored region", reads[0], *region_shape(a["region"]))

