"""The ``attention`` tiling: what a Q block and a KV block need on chip, checked and derived."""

from __future__ import annotations

from staticsched._fields import Problems
from staticsched.errors import TilingError
from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.attention.task import AttentionTask, AttentionTiling
from staticsched.tasks.matmul.split import halves

#: per-row statistics a Q block keeps in the vector buffer (m, l, alpha and their successors)
STATS = 6


def requirements(task: AttentionTask, bq: int, bkv: int, hw: Hardware) -> list[tuple[str, str, int]]:
    """(role, arithmetic, bytes) a tiling needs per role. Tiles that change with every K/V
    block are double buffered so that the Cube computes block j+1 while the Vector unit
    works on block j; K and V alternate in cube_b (one each); O and its fp16 result are one
    per Q block; an additive mask adds its ``1 x block_kv`` fp16 row per K/V block to the
    vector buffer, double buffered like S.

    On a split chip (:mod:`.split`) the AIC's accumulator is drained to GM rings rather than
    read by its own Vector unit: one S and one P V tile suffice, since FixPipe drains each
    while the Cube computes the other (the AIC alternates ``S = Q Kᵀ`` and ``P V``); P is
    single buffered in cube_a, its move overlapping the ``S = Q Kᵀ`` between two ``P V``,
    while Q stays double buffered so that the next Q block's Q is moved ahead; and each AIV
    holds half the block's rows (:func:`~.split.half_rows`)."""
    f = hw.cube.fractal if hw.cube is not None else (16, 16, 16)
    pq, pkv = round_up(bq, f[0]), round_up(bkv, f[1])
    pd, pdv = round_up(task.d, f[2]), round_up(task.dv, f[1])
    vq = halves(pq)[0][1] if hw.split else pq  # the vector buffer's rows: an AIV's larger half
    stat = round_up(vq * 4, 32)
    vector = (f"(S {vq}x{pkv}*4 B + P {vq}x{pkv}*2 B + PV {vq}x{pdv}*4 B)*2 buffers + O {vq}x{pdv}*4 B "
              f"+ O {vq}x{pdv}*2 B + {STATS} row statistics {stat} B",
              (vq * pkv * 6 + vq * pdv * 4) * 2 + vq * pdv * 6 + STATS * stat)
    if task.mask:  # the additive mask's row of each K/V block, double buffered with S
        row = round_up(pkv * 2, 32)
        vector = (f"{vector[0]} + mask 1x{pkv} {row} B*2 buffers", vector[1] + row * 2)
    if hw.split:
        cube_a = (f"Q {pq}x{pd}*2 B*2 buffers + P {pq}x{pkv}*2 B", (pq * pd * 2 + pq * pkv) * 2)
        acc = (f"(S {pq}x{pkv} + PV {pq}x{pdv})*4 B", (pq * pkv + pq * pdv) * 4)
    else:
        cube_a = (f"(Q {pq}x{pd} + P {pq}x{pkv})*2 B*2 buffers", (pq * pd + pq * pkv) * 2 * 2)
        acc = (f"(S {pq}x{pkv} + PV {pq}x{pdv})*4 B*2 buffers", (pq * pkv + pq * pdv) * 4 * 2)
    return [
        ("operand", f"(Q {pq}x{pd} + K {pd}x{pkv} + V {pkv}x{pdv} + P {pq}x{pkv})*2 B*2 buffers",
         (pq * pd + pd * pkv + pkv * pdv + pq * pkv) * 2 * 2),
        ("cube_a", *cube_a),
        ("cube_b", f"(K {pd}x{pkv} + V {pkv}x{pdv})*2 B", (pd * pkv + pkv * pdv) * 2),
        ("accumulator", *acc),
        ("vector", *vector),
    ]


def _misfits(task: AttentionTask, bq: int, bkv: int, hw: Hardware) -> list[str]:
    out = []
    for role, text, need in requirements(task, bq, bkv, hw):
        space = hw.role(role)
        cap = hw.space(space).capacity
        if cap and need > cap:
            out.append(f"task '{task.id}': block_q {bq}, block_kv {bkv}: {text} = {need} B > {space} {cap} B")
    return out


def check_tiling(task: AttentionTask, tiling: AttentionTiling, hw: Hardware) -> None:
    pr = Problems()
    f = hw.cube.fractal if hw.cube is not None else (16, 16, 16)
    for key, value, q in (("block_q", tiling.block_q, f[0]), ("block_kv", tiling.block_kv, f[1])):
        if value % q:
            pr.add(f"task '{task.id}': tiling {key} = {value} must be a multiple of {q} (the Cube's fractal)")
    pr.raise_if_any(TilingError)
    for line in _misfits(task, tiling.block_q, tiling.block_kv, hw):
        pr.add(line)
    pr.raise_if_any(TilingError)


def derive_tiling(task: AttentionTask, hw: Hardware) -> AttentionTiling:
    """Block sizes that are the fractal times a power of two, no larger than the padded
    sequence, and fit every role; the largest smaller of the two wins, then the larger
    ``block_kv`` (more keys per pass amortise the rescale of O), then the larger ``block_q``.
    With d = 128 on ``seed-davinci`` that is 64 x 128.

    Raises
    ------
    TilingError
        When not even one fractal fits, with the arithmetic.
    """
    f = hw.cube.fractal if hw.cube is not None else (16, 16, 16)

    def sizes(q: int, limit: int) -> list[int]:
        out, x = [], q
        while x <= max(q, round_up(limit, q)):
            out.append(x)
            x *= 2
        return out

    best = None
    for bq in sizes(f[0], task.sq):
        for bkv in sizes(f[1], task.sk):
            if not _misfits(task, bq, bkv, hw):
                key = (min(bq, bkv), bkv, bq)
                if best is None or key > best[0]:
                    best = (key, AttentionTiling(bq, bkv))
    if best is None:
        raise TilingError(_misfits(task, f[0], f[1], hw))
    return best[1]
