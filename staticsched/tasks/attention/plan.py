"""The ``attention`` plan: Q blocks balanced over cores, and the lowering of each to micro-ops
(FlashAttention-2's loop over KV blocks with the online softmax)."""

from __future__ import annotations

from collections import Counter

import attrs

from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.attention.qblock import QBlock
from staticsched.tasks.attention.split import PV_LAG, QK_LEAD, SplitQBlock, SplitRings, half_rows
from staticsched.tasks.attention.task import AttentionTask, AttentionTiling
from staticsched.tasks.attention.tiling import check_tiling, derive_tiling
from staticsched.tasks.base import (
    TilingInfo,
    checked_or_derived,
    hardware_needs,
    spans,
)
from staticsched.tasks.builder import Builder, balance_cores


@attrs.frozen
class AttentionPlan:
    task: AttentionTask
    tiling: AttentionTiling
    #: on a split chip, a Q block's padded rows (its slot's rows, halved between the AIVs);
    #: 0 on a coupled chip
    split_rows: int = 0

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
        per_pair += 2 if self.task.mask else 0  # the additive mask: its load and add
        later = 5  # vec of every block after the first: alpha (sub, exp), l rescale, O rescale, add
        masked = 0
        for q0, q1 in self.q_spans:
            vis = self.visible(q0, q1)
            masked += sum(1 for _, (k0, k1) in vis if self.task.causal and k1 - 1 > q0)
        n_q = len(self.q_spans)
        if self.split_rows:
            return self.task.heads * self._split_ops()
        return self.task.heads * (n_q * per_q + self.pairs * per_pair + (self.pairs - n_q) * later + masked)

    def _split_ops(self) -> int:
        """Per Q block on a split chip: on the AIC, Q's load and move and per pair ten ops (K,
        V and P loads and moves, two mmads, the S and P V stores); per AIV half, per pair nine
        (S load, scale, row max, sub, exp, row sum, cast, P store, P V load), two more with an
        additive mask (its load and add) and a causal mask where it applies, five more after
        the first pair, and the final normalise and store."""
        ops = 0
        per_pair = 9 + (2 if self.task.mask else 0)
        for q0, q1 in self.q_spans:
            vis = self.visible(q0, q1)
            ops += 2 + 10 * len(vis)
            for a0, _ in half_rows(self.split_rows, q1 - q0):
                masked = sum(1 for _, (k0, k1) in vis if self.task.causal and k1 - 1 > q0 + a0)
                ops += per_pair * len(vis) + masked + 5 * (len(vis) - 1) + 2
        return ops

    @property
    def work(self) -> list[int]:
        """Query rows times visible keys of each Q block, in block order: a causal Q block's
        work grows with its position and tail blocks are smaller, so cores are balanced by it
        (:meth:`Builder.balance`)."""
        per = [(q1 - q0) * sum(k1 - k0 for _, (k0, k1) in self.visible(q0, q1)) for q0, q1 in self.q_spans]
        return per * self.task.heads

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        ncores = len(hw.engine_cores("cube"))
        counts = Counter(balance_cores(self.work, ncores))
        per = (min(counts.get(c, 0) for c in range(ncores)), max(counts.values()))
        return TilingInfo(self.task.id, "attention", (t.block_q, t.block_kv), 2, self.task.tiling is None,
                          self.blocks, per, what="block q x kv", combine="online")

    def lower(self, em: Builder) -> None:
        """Q blocks go to cores balanced by their work; each core's (Q block, K/V block) pairs
        are emitted software-pipelined. Program order is the order in which the list
        scheduler allocates tiles, so it follows the steady state: V of pair t, the softmax
        of pair t, ``S = Q Kᵀ`` of pair t + 1 (the Cube computes it while the Vector unit
        works on pair t), the update of O by ``P V`` of pair t - 1 (which the Cube finished
        meanwhile), then P of pair t to the Cube and its ``P V``. A split chip's pairs cross
        between AIC and AIVs, and are pipelined deeper (:meth:`_emit_split_core`)."""
        task = self.task
        q_spans = self.q_spans
        if em.hw.split:  # each AIV of the cluster stores its rows
            stored = [(q0 + a0, q0 + a1) for q0, q1 in q_spans
                      for a0, a1 in half_rows(self.split_rows, q1 - q0)]
        else:
            stored = list(q_spans)
        regions = [task.region("out", h, r0, r1) for h in range(task.heads) for r0, r1 in stored]
        em.output(task.out, sorted(dict.fromkeys(r for r, _ in regions)),
                  sorted(dict.fromkeys(c for _, c in regions)))
        cores = em.balance(self.work, "cube")
        rings = SplitRings(self, em) if em.hw.split else None
        blocks: dict[int, list[QBlock | SplitQBlock]] = {}
        for h in range(task.heads):
            for i, qs in enumerate(q_spans):
                b = h * len(q_spans) + i
                p = f"{task.id}.b{b}"
                qb = (SplitQBlock(self, em, rings, cores[b], p, h, qs) if rings is not None
                      else QBlock(self, em, cores[b], p, h, qs))
                blocks.setdefault(cores[b], []).append(qb)
        for core in sorted(blocks):
            pairs = [(qb, j, ks) for qb in blocks[core] for j, ks in self.visible(*qb.qs)]
            if rings is None:
                self._emit_core(pairs)
            else:
                self._emit_split_core(pairs)

    @staticmethod
    def _emit_core(pairs: Pairs) -> None:
        """One core's pairs in program order, software-pipelined (see :meth:`lower`)."""
        _qk(pairs, 0)
        for t, (qb, j, ks) in enumerate(pairs):
            qb.load_v(j, ks)
            qb.softmax(j, ks)
            if t + 1 < len(pairs):
                _qk(pairs, t + 1)
            if t:
                _update(pairs, t - 1)
            qb.pv(j, ks)
        _update(pairs, len(pairs) - 1)

    @staticmethod
    def _emit_split_core(pairs: Pairs) -> None:
        """One AIC's pairs (and its AIVs') in program order on a split chip, pipelined deeper
        than on a coupled core (:data:`~.split.QK_LEAD`): ``S = Q Kᵀ`` of pair t + QK_LEAD,
        the AIVs' load of S of pair t + 1, P of pair t to the AIC and its ``P V``, then the
        AIVs' update of O by ``P V`` of pair t - PV_LAG."""
        n = len(pairs)
        for t in range(min(QK_LEAD, n)):
            _qk(pairs, t)
        for t, (qb, j, ks) in enumerate(pairs):
            qb.load_v(j, ks)
            qb.softmax(j, ks)
            if t + QK_LEAD < n:
                _qk(pairs, t + QK_LEAD)
            if t + 1 < n:
                nb, nj, nks = pairs[t + 1]
                assert isinstance(nb, SplitQBlock)
                nb.load_s(nj, nks)
            qb.pv(j, ks)
            if t >= PV_LAG:
                _update(pairs, t - PV_LAG)
        for t in range(max(0, n - PV_LAG), n):
            _update(pairs, t)


#: one core's (Q block, K/V block index, K/V rows) pairs, in program order
Pairs = list[tuple[QBlock | SplitQBlock, int, tuple[int, int]]]


def _qk(pairs: Pairs, t: int) -> None:
    """``S = Q Kᵀ`` of pair ``t``, after Q's load when it is its Q block's first."""
    qb, j, ks = pairs[t]
    if not t or pairs[t - 1][0] is not qb:
        qb.start()
    qb.qk(j, ks)


def _update(pairs: Pairs, t: int) -> None:
    """O updated by ``P V`` of pair ``t``; normalised and stored after its Q block's last."""
    qb, j, _ = pairs[t]
    qb.update(j)
    if t + 1 == len(pairs) or pairs[t + 1][0] is not qb:
        qb.finish()


def plan(task: AttentionTask, hw: Hardware) -> AttentionPlan:
    def make(task: AttentionTask, tiling: AttentionTiling) -> AttentionPlan:
        rows = round_up(tiling.block_q, hw.cube.fractal[0]) if hw.split and hw.cube is not None else 0
        return AttentionPlan(task, tiling, rows)

    return checked_or_derived(task, hw, check_tiling, derive_tiling, make)


def needs(task: AttentionTask, hw: Hardware) -> list[str]:
    paths = [("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"), ("accumulator", "vector"),
             ("vector", "operand"), ("vector", "global")]
    if task.mask:  # the additive mask's rows
        paths.append(("global", "vector"))
    if hw.split:  # S, P and P V through GM rings (tasks/attention/split.py)
        paths = [("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"),
                 ("accumulator", "global"), ("global", "vector"), ("vector", "global")]
    return hardware_needs(task.id, hw, roles=("operand", "cube_a", "cube_b", "accumulator", "vector"),
                          paths=paths, cube=True, vector=True)
