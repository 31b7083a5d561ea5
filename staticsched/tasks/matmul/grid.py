"""A matmul's block grid under a tiling: its spans, its groups of blocks, and each unit of
work's estimated cycles, by which the lowering balances the Cube cores and from which the
tiling's cheap bound (:mod:`.workbound`) deals them as the lowering does."""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.base import spans
from staticsched.tasks.matmul.splitk import chunks
from staticsched.tasks.matmul.task import SpanGrid, Tiling


@attrs.frozen
class BlockGrid(SpanGrid):
    """How a matmul is cut by its tiling: spans along M, N and K, and groups of blocks."""

    tiling: Tiling

    @property
    def m_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.m, self.tiling.base_m)

    @property
    def panels(self) -> int:
        """Row panels (batch element x M span)."""
        return self.task.batches * len(self.m_spans)

    @property
    def groups(self) -> tuple[tuple[int, int], ...]:
        """Per batch element, the ``(first M span, first N span)`` of each group of
        ``step_m x step_n`` blocks (clipped at the grid's edges), row-major."""
        t = self.tiling
        return tuple((mi, ni) for mi in range(0, len(self.m_spans), t.step_m)
                     for ni in range(0, len(self.n_spans), self.step_n))

    @property
    def step_n(self) -> int:
        """Blocks along N in a group: the tiling's, or with a row reduction in the epilogue
        and a resident A panel, the whole row panel (the reduction's unit of work)."""
        if self.task.reduces and self.tiling.resident_a:
            return len(self.n_spans)
        return self.tiling.step_n

    def work(self, hw: Hardware) -> list[int]:
        """The estimated cycles of each unit of work (group of blocks, or row panel), in block
        order, by which cores are balanced: the Cube's cycles or the loads' at the rate a core
        can count on (its path's, derated for an ND operand the load converts, or its even
        share of a link the path crosses), whichever is larger. Tail blocks cost less, and on
        a link-bound chip it is the bytes that must be even: round-robin blocks of an unequal
        grid left the cores with the most bytes moving alone at the end
        (``unequal_mm1000_hbm.json``)."""
        task, t = self.task, self.tiling
        cube = hw.cube
        assert cube is not None  # needs() checked it
        fm, fn, fk = cube.fractal
        src = hw.role("global")
        dst = hw.role("operand")
        path = hw.path(src, dst)
        ncores = len(hw.engine_cores("cube"))
        shares = [lk.bytes_per_cycle / ncores for lk in hw.links_of(src, dst)]
        rate = min([path.bytes_per_cycle, *shares])
        # an ND operand converted by its load moves at the derated rate of its tile's shape (NZ
        # ones at the full one)
        ratio_a = task.load_ratio(hw, "a", t.base_m, t.base_k)
        ratio_b = task.load_ratio(hw, "b", t.base_k, t.base_n)
        rate_a = min([path.bytes_per_cycle / ratio_a, *shares])
        rate_b = min([path.bytes_per_cycle / ratio_b, *shares])
        k_pad = sum(round_up(k1 - k0, fk) for k0, k1 in self.k_spans)
        macs_per_cycle = dict(cube.macs_per_cycle).get(task.dtype, 1)
        elem = task.elem_bytes
        # the spans once: they are properties, and cost() runs per group (tuning asks for
        # thousands of tilings' work)
        m_spans, n_spans = self.m_spans, self.n_spans
        nm, nn = len(m_spans), len(n_spans)

        def cost(rows: Sequence[int], cols: Sequence[int]) -> int:
            ms = [m_spans[i] for i in rows]
            ns = [n_spans[j] for j in cols]
            area = sum(round_up(m1 - m0, fm) * round_up(n1 - n0, fn) for m0, m1 in ms for n0, n1 in ns)
            macs = area * k_pad
            cycles = -(-macs // macs_per_cycle)
            a_bytes = sum(m1 - m0 for m0, m1 in ms) * task.k * elem
            b_bytes = sum(n1 - n0 for n0, n1 in ns) * task.k * elem
            if rate_a == rate_b == rate:
                return max(cycles, math.ceil((a_bytes + b_bytes) / rate))
            return max(cycles, math.ceil(a_bytes / rate_a + b_bytes / rate_b))

        if task.reduces:
            per_panel = [cost([mi], range(nn)) for mi in range(nm)]
            return per_panel * task.batches
        per_group = [cost(range(mi, min(mi + t.step_m, nm)), range(ni, min(ni + self.step_n, nn)))
                     for mi, ni in self.groups]
        if t.split_k > 1:  # a unit per (block, K chunk): the block's cost by its chunk's K steps
            steps = [len(c) for c in chunks(list(self.k_spans), t.split_k)]
            total = sum(steps)
            per_group = [-(-g * n // total) for g in per_group for n in steps]
        return per_group * task.batches
