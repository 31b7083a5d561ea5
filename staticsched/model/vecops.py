"""The one table of Vector ops: what the ``op`` attribute of a ``vec`` micro-op means.

Every op says, once:

- **operands**: the form of each tensor operand, in order. ``full`` is the op's whole
  ``rows x cols`` extent; ``row`` is ``rows x 1`` (one value per row, broadcast along the row,
  e.g. a row maximum); ``col`` is ``1 x cols`` (one value per column, broadcast down the
  columns, e.g. a bias). A scalar comes from the op's ``scalar`` attribute (``scalar``:
  ``"required"``, or ``"ignored"`` for ops that accept and ignore one).
- **out**: the form of the result. An op whose result is a ``row`` while its first operand is
  ``full`` **reduces** over the columns.
- **combine**: a reduction may take one more ``row`` operand, the running value of earlier
  column blocks of the same rows, and combines its result with it (``max`` or ``add``). That is
  how a row spanning several blocks is reduced block by block.
- **passes**: its cost in passes over the full extent, the default of the hardware's
  ``[vector].passes`` (cycles = overhead + ceil(bytes * passes / bytes_per_cycle), bytes of the
  widest full-extent operand).
- **UB working set**: the operand tiles it needs besides the tile it works on
  (:meth:`VecOp.operand_elems`), plus ``scratch`` full tiles of temporary space.
- **fn**: its NumPy semantics in float32 (results are rounded to the destination's dtype).

``user`` ops may appear in TaskGraphs (elementwise tasks, matmul epilogues); the others are
emitted by lowering only (the causal mask, with its block offsets ``row0``/``col0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

_F32 = np.float32

#: semantics: (float32 operands cut to their forms' extents, the op's attributes) -> result
VecFn = Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray]


def gelu(x: np.ndarray) -> np.ndarray:
    """tanh-form GELU in float32 (what the Vector unit computes)."""
    x = x.astype(_F32)
    c = _F32(math.sqrt(2.0 / math.pi))
    # x * x * x, not x**3: NumPy's float32 power takes a slow path for negative bases (1 s per
    # 4096^2 tensor against 20 ms), and rounds no closer where it matters (a 0.044715 term)
    return _F32(0.5) * x * (_F32(1.0) + np.tanh(c * (x + _F32(0.044715) * (x * x * x))))


def _scalar(a: Mapping[str, Any]) -> np.float32:
    return _F32(a.get("scalar", 0.0))


def _causal_mask(x: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    """``-inf`` where the key index ``col0 + j`` is past the query index ``row0 + i``."""
    rows, cols = x.shape
    q = a.get("row0", 0) + np.arange(rows)[:, None]
    k = a.get("col0", 0) + np.arange(cols)[None, :]
    return np.where(k > q, _F32(-np.inf), x)


@attrs.frozen
class VecOp:
    """One Vector op; see the module docstring."""

    name: str
    operands: tuple[str, ...] = attrs.field(converter=tuple)
    out: str
    passes: float
    fn: VecFn = attrs.field(eq=False, repr=False)
    formula: str
    scalar: str = "ignored"
    combine: str = ""
    attrs_: tuple[str, ...] = attrs.field(converter=tuple, default=())
    scratch: int = 0
    user: bool = True

    @property
    def arity(self) -> int:
        """Tensor operands (without the optional running value of a reduction)."""
        return len(self.operands)

    @property
    def reduces(self) -> bool:
        return self.out == "row" and self.operands[0] == "full"

    def forms(self, n_reads: int) -> tuple[str, ...]:
        """The forms of ``n_reads`` operands (a reduction's extra one is its running ``row``)."""
        if n_reads > self.arity and self.combine:
            return (*self.operands, "row")
        return self.operands[:n_reads]

    def max_reads(self) -> int:
        return self.arity + (1 if self.combine else 0)

    def operand_elems(self, rows: int, cols: int) -> int:
        """Elements of the operands besides the first (the tile the op works on)."""
        return sum(extent(f, rows, cols)[0] * extent(f, rows, cols)[1] for f in self.operands[1:])

    def apply(self, args: Sequence[np.ndarray], a: Mapping[str, Any]) -> np.ndarray:
        """The result, float32, of ``args`` cut to their extents (a running value last)."""
        out = self.fn(args[: self.arity], a)
        if len(args) > self.arity:
            acc = args[self.arity]
            out = np.maximum(acc, out) if self.combine == "max" else acc + out
        return out


def extent(form: str, rows: int, cols: int) -> tuple[int, int]:
    """The ``(rows, cols)`` an operand of ``form`` covers in a ``rows x cols`` op."""
    if form == "row":
        return (rows, 1)
    if form == "col":
        return (1, cols)
    return (rows, cols)


def _op(name, operands, out, passes, fn, formula, **kw) -> VecOp:
    return VecOp(name, operands, out, passes, fn, formula, **kw)


_FULL = ("full",)
_TWO = ("full", "full")
_ROW = ("full", "row")
_COL = ("full", "col")

#: the table, in documentation order
VECOPS: dict[str, VecOp] = {
    op.name: op
    for op in (
        # elementwise on full tiles
        _op("add", _TWO, "full", 1.0, lambda x, a: x[0] + x[1], "x + y"),
        _op("sub", _TWO, "full", 1.0, lambda x, a: x[0] - x[1], "x - y"),
        _op("mul", _TWO, "full", 1.0, lambda x, a: x[0] * x[1], "x * y"),
        # [assumption] division iterates a reciprocal: twice the passes of a multiply
        _op("div", _TWO, "full", 2.0, lambda x, a: x[0] / x[1], "x / y"),
        _op("max", _TWO, "full", 1.0, lambda x, a: np.maximum(x[0], x[1]), "max(x, y)"),
        _op("scale", _FULL, "full", 1.0, lambda x, a: x[0] * _scalar(a), "x * value", scalar="required"),
        _op("adds", _FULL, "full", 1.0, lambda x, a: x[0] + _scalar(a), "x + value", scalar="required"),
        _op("relu", _FULL, "full", 1.0, lambda x, a: np.maximum(x[0], _F32(0)), "max(x, 0)"),
        # [assumption] tanh-form GELU is ~8 vector instructions
        _op("gelu", _FULL, "full", 8.0, lambda x, a: gelu(x[0]), "tanh-form GELU"),
        _op("cast", _FULL, "full", 1.0, lambda x, a: x[0], "x, rounded to the destination's dtype"),
        # [assumption] transcendental functions take two passes (range reduction + polynomial)
        _op("exp", _FULL, "full", 2.0, lambda x, a: np.exp(x[0]), "exp(x)"),
        _op("rsqrt", _FULL, "full", 2.0, lambda x, a: _F32(1.0) / np.sqrt(x[0]), "1 / sqrt(x)"),
        # a column operand [1, N]: one value per column
        _op("bias", _COL, "full", 1.0, lambda x, a: x[0] + x[1], "x + b (b of shape [N])"),
        _op("mul_col", _COL, "full", 1.0, lambda x, a: x[0] * x[1], "x * g (g of shape [N])"),
        # a row operand [M, 1]: one value per row
        _op("add_row", _ROW, "full", 1.0, lambda x, a: x[0] + x[1], "x + r (r of shape [M, 1])"),
        _op("sub_row", _ROW, "full", 1.0, lambda x, a: x[0] - x[1], "x - r (r of shape [M, 1])"),
        _op("mul_row", _ROW, "full", 1.0, lambda x, a: x[0] * x[1], "x * r (r of shape [M, 1])"),
        _op("div_row", _ROW, "full", 2.0, lambda x, a: x[0] / x[1], "x / r (r of shape [M, 1])"),
        # reductions over each row, [M, N] -> [M, 1], optionally combined with a running value
        _op("rowmax", _FULL, "row", 1.0, lambda x, a: x[0].max(axis=1, keepdims=True),
            "max over the row", combine="max"),
        _op("rowsum", _FULL, "row", 1.0, lambda x, a: x[0].sum(axis=1, keepdims=True, dtype=_F32),
            "sum over the row", combine="add"),
        # [assumption] a multiply and a sum: two passes
        _op("rowsumsq", _FULL, "row", 2.0,
            lambda x, a: (x[0] * x[0]).sum(axis=1, keepdims=True, dtype=_F32),
            "sum of squares over the row", combine="add"),
        # lowering only: attention's causal mask on a diagonal block
        _op("mask_causal", _FULL, "full", 1.0, lambda x, a: _causal_mask(x[0], a),
            "-inf where col0 + j > row0 + i", attrs_=("row0", "col0"), user=False),
    )
}

#: ops TaskGraphs may name
USER_OPS = tuple(name for name, op in VECOPS.items() if op.user)
