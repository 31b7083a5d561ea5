"""The ``attention`` task kind: fused attention in the style of FlashAttention-2.

``out = softmax(scale * q kᵀ [+ mask] [+ causal mask]) v`` per (batch, head): ``q`` is
``[..., Sq, d]``, ``k`` is ``[..., Sk, d]``, ``v`` is ``[..., Sk, dv]`` and ``out`` is
``[..., Sq, dv]``, with the same leading (batch, head) dims. ``scale`` defaults to
``1 / sqrt(d)``; ``causal`` masks key positions after the query's (it needs ``Sq = Sk``).

``"heads": P`` packs P heads side by side in the last dim (BSHD, ``[..., S, P*d]``): head ``h``
of batch element ``b`` is a column block of that element's rows
(:meth:`~.task.AttentionTask.region` gives every lowering's GM regions). ``"mask"`` is an
additive mask, one row of ``Sk`` values per batch element (or one shared row), added to the
scaled scores: per K/V block its row slice is loaded into the vector buffer and added by the
``bias`` Vector op.

Lowering (``shared/reference/memory-attention-sweeps.md`` §3): each Q block of one (batch,
head) is one unit of work on one core. Q is loaded once (GM -> operand buffer -> cube_a) and
stays there. For each K/V block — skipping blocks wholly above the diagonal when causal:

1. ``S = Q Kᵀ`` on the Cube (K loaded transposed), FixPipe drains it as fp32 into the vector
   buffer;
2. on the Vector unit: ``S *= scale``, the additive mask, the causal mask on a diagonal
   block, the running row maximum ``m' = max(m, rowmax(S))``, ``P = exp(S - m')``, the
   rescale ``alpha = exp(m - m')``, the running row sum ``l = alpha l + rowsum(P)``, and ``P``
   cast to fp16;
3. ``P`` goes to the Cube's input path (vector buffer -> operand buffer -> cube_a), V is
   loaded (-> cube_b), ``P V`` on the Cube, FixPipe drains it as fp32;
4. the running output is rescaled and accumulated: ``O = alpha O + P V`` (the first block's
   ``P V`` is ``O``).

Finally ``O / l`` is written as fp16 and stored. S, P, the statistics and O never touch GM.
Tails (a last Q or K/V block shorter than the block) are smaller extents in tiles of the full
block size; padding is never read, so masked and padded keys contribute nothing.

The kind is split by job: :mod:`.task` (values), :mod:`.read`, :mod:`.tiling`, :mod:`.plan`
and :mod:`.reference`.
"""

from staticsched.tasks.attention.plan import AttentionPlan, needs, plan
from staticsched.tasks.attention.read import read, to_dict
from staticsched.tasks.attention.reference import reference
from staticsched.tasks.attention.task import AttentionTask, AttentionTiling
from staticsched.tasks.base import TaskKind

__all__ = ["KIND", "AttentionPlan", "AttentionTask", "AttentionTiling"]

KIND = TaskKind(
    name="attention",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
    cube_operands=lambda task: (task.q, task.k, task.v),
)
