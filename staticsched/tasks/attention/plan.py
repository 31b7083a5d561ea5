"""The ``attention`` plan: Q blocks balanced over cores, and the lowering of each to micro-ops
(FlashAttention-2's loop over KV blocks with the online softmax)."""

from __future__ import annotations

from collections import Counter

import attrs

from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.attention.task import AttentionTask, AttentionTiling
from staticsched.tasks.attention.tiling import check_tiling, derive_tiling
from staticsched.tasks.base import (
    TilingInfo,
    checked_or_derived,
    hardware_needs,
    spans,
)
from staticsched.tasks.builder import FP16, FP32, Builder, balance_cores


@attrs.frozen
class AttentionPlan:
    task: AttentionTask
    tiling: AttentionTiling

    @property
    def q_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.sq, self.tiling.block_q)

    @property
    def kv_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.sk, self.tiling.block_kv)

    def visible(self, q0: int, q1: int) -> list[tuple[int, tuple[int, int]]]:
        """The K/V blocks a Q block attends to: all, or with the causal mask those not wholly
        after its last query."""
        return [(j, (k0, k1)) for j, (k0, k1) in enumerate(self.kv_spans)
                if not self.task.causal or k0 <= q1 - 1]

    @property
    def blocks(self) -> int:
        return self.task.heads * len(self.q_spans)

    @property
    def pairs(self) -> int:
        """(Q block, K/V block) pairs computed, per (batch, head)."""
        return sum(len(self.visible(q0, q1)) for q0, q1 in self.q_spans)

    @property
    def op_count(self) -> int:
        per_q = 2 + 2  # load and move Q; normalise and store O
        per_pair = 2 + 4 + 2 + 2 + 6  # loads K V; moves K P P V; mmads; fixpipes; vec always
        later = 5  # vec of every block after the first: alpha (sub, exp), l rescale, O rescale, add
        masked = 0
        for q0, q1 in self.q_spans:
            vis = self.visible(q0, q1)
            masked += sum(1 for _, (k0, k1) in vis if self.task.causal and k1 - 1 > q0)
        n_q = len(self.q_spans)
        return self.task.heads * (n_q * per_q + self.pairs * per_pair + (self.pairs - n_q) * later + masked)

    @property
    def work(self) -> list[int]:
        """Query rows times visible keys of each Q block, in block order: a causal Q block's
        work grows with its position and tail blocks are smaller, so cores are balanced by it
        (:meth:`Builder.balance`)."""
        per = [(q1 - q0) * sum(k1 - k0 for _, (k0, k1) in self.visible(q0, q1)) for q0, q1 in self.q_spans]
        return per * self.task.heads

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        counts = Counter(balance_cores(self.work, hw.cores))
        per = (min(counts.get(c, 0) for c in range(hw.cores)), max(counts.values()))
        return TilingInfo(self.task.id, "attention", (t.block_q, t.block_kv), 2, self.task.tiling is None,
                          self.blocks, per, what="block q x kv", combine="online")

    def lower(self, em: Builder) -> None:
        """Q blocks go to cores balanced by their work; each core's (Q block, K/V block) pairs
        are emitted software-pipelined. Program order is the order in which the list
        scheduler allocates tiles, so it follows the steady state: V of pair t, the softmax
        of pair t, ``S = Q Kᵀ`` of pair t + 1 (the Cube computes it while the Vector unit
        works on pair t), the update of O by ``P V`` of pair t - 1 (which the Cube finished
        meanwhile), then P of pair t to the Cube and its ``P V``."""
        task = self.task
        q_spans = self.q_spans
        rows = [(h * task.sq + q0, h * task.sq + q1) for h in range(task.heads) for q0, q1 in q_spans]
        em.output(task.out, rows, [(0, task.dv)])
        cores = em.balance(self.work)
        blocks: dict[int, list[_QBlock]] = {}
        for h in range(task.heads):
            for i, qs in enumerate(q_spans):
                b = h * len(q_spans) + i
                blocks.setdefault(cores[b], []).append(_QBlock(self, em, cores[b], f"{task.id}.b{b}", h, qs))
        for core in sorted(blocks):
            pairs = [(qb, j, ks) for qb in blocks[core] for j, ks in self.visible(*qb.qs)]
            self._emit_core(pairs)

    @staticmethod
    def _emit_core(pairs: list[tuple[_QBlock, int, tuple[int, int]]]) -> None:
        """One core's pairs in program order, software-pipelined (see :meth:`lower`)."""

        def qk(t: int) -> None:
            qb, j, ks = pairs[t]
            if not t or pairs[t - 1][0] is not qb:
                qb.start()
            qb.qk(j, ks)

        def update(t: int) -> None:
            qb, j, _ = pairs[t]
            qb.update(j)
            if t + 1 == len(pairs) or pairs[t + 1][0] is not qb:
                qb.finish()

        qk(0)
        for t, (qb, j, ks) in enumerate(pairs):
            qb.load_v(j, ks)
            qb.softmax(j, ks)
            if t + 1 < len(pairs):
                qk(t + 1)
            if t:
                update(t - 1)
            qb.pv(j, ks)
        update(len(pairs) - 1)


class _QBlock:
    """The ops of one Q block of one (batch, head), in stages (see :meth:`AttentionPlan.lower`)."""

    def __init__(
        self, plan: AttentionPlan, em: Builder, core: int, p: str, h: int, qs: tuple[int, int]
    ) -> None:
        task = plan.task
        assert em.hw.cube is not None  # needs() checked it
        fm, fn, fk = em.hw.cube.fractal
        self.task, self.em, self.core, self.p, self.qs = task, em, core, p, qs
        self.fn = fn
        self.pd, self.pdv = round_up(task.d, fk), round_up(task.dv, fn)
        # every tile has its block's full (padded) size, tails included: tiles of one size never
        # fragment a space, and cube_b holds exactly one K and one V tile
        self.rows, self.pq = qs[1] - qs[0], round_up(plan.tiling.block_q, fm)
        self.pk = round_up(plan.tiling.block_kv, fn)
        self.qrow, self.krow = h * task.sq, h * task.sk
        self.m = self.lsum = self.o = self.l0q = ""
        # per K/V block in flight: S, V in cube_b, P V in the accumulator, alpha (not the first)
        self.s: dict[int, str] = {}
        self.v: dict[int, str] = {}
        self.acc: dict[int, str] = {}
        self.alpha: dict[int, str] = {}

    def start(self) -> None:
        """Q: GM -> operand buffer -> cube_a, where it stays for every K/V block."""
        em, task, p = self.em, self.task, self.p
        q0, q1 = self.qs
        l1q = em.item(f"{p}.l1q", "operand", FP16, (self.pq, self.pd))
        self.l0q = em.item(f"{p}.l0q", "cube_a", FP16, (self.pq, self.pd))
        em.load(f"{p}.load_q", self.core, l1q, task.q, ((self.qrow + q0, self.qrow + q1), (0, task.d)))
        em.move(f"{p}.move_q", self.core, l1q, self.l0q, self.rows, task.d)

    def qk(self, j: int, ks: tuple[int, int]) -> None:
        """S = Q Kᵀ on the Cube (K loaded transposed into [d, cols]), drained as fp32."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        cols, pk = k1 - k0, self.pk
        l1k = em.item(f"{s}.l1k", "operand", FP16, (self.pd, pk))
        l0k = em.item(f"{s}.l0k", "cube_b", FP16, (self.pd, pk))
        acc_s = em.item(f"{s}.l0s", "accumulator", FP32, (self.pq, pk))
        self.s[j] = em.item(f"{s}.s", "vector", FP32, (self.pq, pk))
        region = ((self.krow + k0, self.krow + k1), (0, task.d))
        em.load(f"{s}.load_k", core, l1k, task.k, region, transpose=True)
        em.move(f"{s}.move_k", core, l1k, l0k, task.d, cols)
        em.mmad(f"{s}.qk", core, self.l0q, l0k, acc_s, self.rows, cols, task.d, True)
        em.fixpipe(f"{s}.fix_s", core, acc_s, self.s[j], self.rows, cols)

    def load_v(self, j: int, ks: tuple[int, int]) -> None:
        """V: GM -> operand buffer -> cube_b."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        pk = self.pk
        l1v = em.item(f"{s}.l1v", "operand", FP16, (pk, self.pdv))
        self.v[j] = em.item(f"{s}.l0v", "cube_b", FP16, (pk, self.pdv))
        em.load(f"{s}.load_v", core, l1v, task.v, ((self.krow + k0, self.krow + k1), (0, task.dv)))
        em.move(f"{s}.move_v", core, l1v, self.v[j], k1 - k0, task.dv)

    def softmax(self, j: int, ks: tuple[int, int]) -> None:
        """The online softmax of block j on the Vector unit: scale, causal mask, the running
        maximum and its rescale factor, ``exp(S - m)`` and the running sum."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        (q0, _), (k0, k1) = self.qs, ks
        rows, pq, cols = self.rows, self.pq, k1 - k0
        ub_s = self.s[j]
        em.vec(f"{s}.scale", core, "scale", (ub_s,), ub_s, (rows, cols), scalar=task.softmax_scale)
        if task.causal and k1 - 1 > q0:
            em.vec(f"{s}.mask", core, "mask_causal", (ub_s,), ub_s, (rows, cols), row0=q0, col0=k0)
        m_new = em.item(f"{s}.m", "vector", FP32, (pq, 1))
        em.vec(f"{s}.rowmax", core, "rowmax", (ub_s, self.m) if self.m else (ub_s,), m_new, (rows, cols))
        if self.m:
            alpha = self.alpha[j] = em.item(f"{s}.alpha", "vector", FP32, (pq, 1))
            em.vec(f"{s}.dmax", core, "sub", (self.m, m_new), alpha, (rows, 1))
            em.vec(f"{s}.alpha", core, "exp", (alpha,), alpha, (rows, 1))
            em.vec(f"{s}.rescale_l", core, "mul", (self.lsum, alpha), self.lsum, (rows, 1))
        em.vec(f"{s}.sub", core, "sub_row", (ub_s, m_new), ub_s, (rows, cols))
        em.vec(f"{s}.exp", core, "exp", (ub_s,), ub_s, (rows, cols))
        if not self.m:
            self.lsum = em.item(f"{self.p}.l", "vector", FP32, (pq, 1))
        reads = (ub_s, self.lsum) if self.m else (ub_s,)
        em.vec(f"{s}.rowsum", core, "rowsum", reads, self.lsum, (rows, cols))
        self.m = m_new

    def pv(self, j: int, ks: tuple[int, int]) -> None:
        """P (cast to fp16) to the Cube's input path — vector buffer -> operand buffer ->
        cube_a — and ``P V`` on the Cube."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        rows, pq = self.rows, self.pq
        cols, pk = k1 - k0, self.pk
        ub_p = em.item(f"{s}.p", "vector", FP16, (pq, pk))
        em.vec(f"{s}.cast", core, "cast", (self.s.pop(j),), ub_p, (rows, cols))
        l1p = em.item(f"{s}.l1p", "operand", FP16, (pq, pk))
        l0p = em.item(f"{s}.l0p", "cube_a", FP16, (pq, pk))
        em.move(f"{s}.move_p", core, ub_p, l1p, rows, cols)
        em.move(f"{s}.move_p0", core, l1p, l0p, rows, cols)
        self.acc[j] = em.item(f"{s}.l0o", "accumulator", FP32, (pq, self.pdv))
        em.mmad(f"{s}.pv", core, l0p, self.v.pop(j), self.acc[j], rows, task.dv, cols, True)

    def update(self, j: int) -> None:
        """``P V`` drained as fp32; the running output rescaled and accumulated."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        rows = self.rows
        ub_o = em.item(f"{s}.pv", "vector", FP32, (self.pq, self.pdv))
        em.fixpipe(f"{s}.fix_o", core, self.acc.pop(j), ub_o, rows, task.dv)
        if self.o:
            alpha = self.alpha.pop(j)
            em.vec(f"{s}.rescale_o", core, "mul_row", (self.o, alpha), self.o, (rows, task.dv))
            em.vec(f"{s}.acc_o", core, "add", (self.o, ub_o), self.o, (rows, task.dv))
        else:
            self.o = ub_o

    def finish(self) -> None:
        """O / l as fp16, stored."""
        em, task, p = self.em, self.task, self.p
        q0, q1 = self.qs
        out16 = em.item(f"{p}.o", "vector", FP16, (self.pq, self.pdv))
        em.vec(f"{p}.norm", self.core, "div_row", (self.o, self.lsum), out16, (self.rows, task.dv))
        em.store(f"{p}.store", self.core, out16, task.out, ((self.qrow + q0, self.qrow + q1), (0, task.dv)))


def plan(task: AttentionTask, hw: Hardware) -> AttentionPlan:
    return checked_or_derived(task, hw, check_tiling, derive_tiling, AttentionPlan)


def needs(task: AttentionTask, hw: Hardware) -> list[str]:
    if hw.split:
        return [f"hardware '{hw.name}' cannot run task '{task.id}': attention is not lowered onto split "
                "cores yet (S and P through a GM ring between the AIC and the AIVs)"]
    paths = [("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"), ("accumulator", "vector"),
             ("vector", "operand"), ("vector", "global")]
    return hardware_needs(task.id, hw, roles=("operand", "cube_a", "cube_b", "accumulator", "vector"),
                          paths=paths, cube=True, vector=True)
