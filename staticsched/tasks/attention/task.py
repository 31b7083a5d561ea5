"""The ``attention`` task as read: its tiling and the task value."""

from __future__ import annotations

import math
from typing import ClassVar

import attrs


@attrs.frozen
class AttentionTiling:
    """Rows of a Q block and of a K/V block."""

    block_q: int
    block_kv: int


@attrs.frozen(kw_only=True)
class AttentionTask:
    """Fused attention over ``heads`` (batch x head) matrices of ``sq x d`` queries and ``sk``
    keys/values (``dv`` wide)."""

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

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.q, self.k, self.v)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.d) if self.scale is None else self.scale
