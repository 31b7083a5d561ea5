"""The ``attention`` task as read: its tiling and the task value."""

from __future__ import annotations

import math
from typing import ClassVar

import attrs

#: a GM region: (rows r0:r1, columns c0:c1) of a tensor's 2-D view
Region = tuple[tuple[int, int], tuple[int, int]]


@attrs.frozen
class AttentionTiling:
    """Rows of a Q block and of a K/V block."""

    block_q: int
    block_kv: int


@attrs.frozen(kw_only=True)
class AttentionTask:
    """Fused attention over ``heads`` (batch x head) matrices of ``sq x d`` queries and ``sk``
    keys/values (``dv`` wide).

    ``packed`` (the JSON key ``"heads"``, P) heads sit side by side in the last dim of each
    operand (BSHD, what a projection writes): matrix ``i`` is head ``i % P`` of batch element
    ``i // P``, the column block ``h*d:(h+1)*d`` of the rows ``b*sq:(b+1)*sq`` of q's 2-D view
    (:meth:`region`). ``heads`` counts matrices: the product of the leading dims times P.

    ``mask`` names an additive mask added to the scaled scores, one row of ``sk`` values per
    batch element (``mask_rows`` = ``heads / packed``), or one row shared by all
    (``mask_rows`` = 1)."""

    type: ClassVar[str] = "attention"

    id: str
    q: str
    k: str
    v: str
    out: str
    heads: int
    sq: int
    sk: int
    d: int
    dv: int
    causal: bool = False
    scale: float | None = None
    tiling: AttentionTiling | None = None
    packed: int = 1
    mask: str = ""
    mask_rows: int = 0

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.q, self.k, self.v, self.mask) if self.mask else (self.q, self.k, self.v)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.d) if self.scale is None else self.scale

    def region(self, operand: str, i: int, r0: int, r1: int) -> Region:
        """The GM region of rows ``r0:r1`` of matrix ``i`` of ``operand`` (``"q"``, ``"k"``,
        ``"v"`` or ``"out"``) in the tensor's 2-D view: head ``i % packed`` of batch element
        ``i // packed``, its rows of that element and its column block (with one head per
        matrix, rows ``i*seq + r0 : i*seq + r1`` and every column)."""
        b, h = divmod(i, self.packed)
        seq = self.sq if operand in ("q", "out") else self.sk
        width = self.d if operand in ("q", "k") else self.dv
        return ((b * seq + r0, b * seq + r1), (h * width, (h + 1) * width))

    def mask_region(self, i: int, k0: int, k1: int) -> Region:
        """The GM region of the mask values of keys ``k0:k1`` for matrix ``i``: its batch
        element's row (or the one shared row)."""
        row = 0 if self.mask_rows == 1 else i // self.packed
        return ((row, row + 1), (k0, k1))
