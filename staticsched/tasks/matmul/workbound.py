"""Cheap lower bounds of a tiling, from its block grid, without lowering it.

Tuning orders thousands of candidate tilings by their lower bound, but lowering a fine tiling
of a large task and bounding the result takes seconds (a 16x16x16 tiling of the awkward GEMM
is 333,000 ops). A :class:`Work` is computed from the block shapes alone, with the durations
of the hardware's cost model (the micro-op table's own duration functions, on the same item
shapes the kind's lowering creates), and never exceeds the bound the solver computes for the
lowered graph (:func:`staticsched.solver.bounds.chip_lower_bound`):

* **per core**, for each pipe: blocks (or the row panels of a row-reducing epilogue) are units
  of work that each live on one core. The kind deals them by their estimated cycles
  (:meth:`~staticsched.tasks.matmul.grid.BlockGrid.work`, :func:`~staticsched.tasks.builder.
  balance_cores`), so each core's share is summed exactly; with L1 reuse steps, whose order
  the bound does not assume, of the ``k * cores + 1`` costliest units some core gets ``k + 1``.
  For the Cube, the shortest chain of loads and moves before any ``mmad`` (its head) and the shortest chain of
  FixPipe, epilogue and store after one (its tail) are added; for MTE2 the shortest tail after
  a load; and the longest single block's chain is a critical path.
* **memory**, per space: a tile taking more than half of a bounded space cannot be live next to
  another such tile, so on each core the lives of those tiles (at least their writer and
  reader) follow one another. This is what a single-buffered tiling pays, and what the
  solver's bound, which ignores memory, misses
  (:func:`staticsched.explore.bounds.memory_bound` is the same argument on a lowered graph).
* **chip-wide**, for each pipe: the cycles all units need together, which some core must do at
  least a ``1 / cores`` share of (this adds up over the tasks of a graph); per shared link,
  the bytes of every GM load and store at its whole bandwidth.

With L1 reuse steps, one A load (and its move) serves ``step_n`` blocks and one B load serves
``step_m``: each block is charged that share, which is no more than what any lowering that
reuses a load at most that many times costs. Work the bound does not model (row-reduction
ops, their parameter loads) is left out, which keeps it a lower bound. The tests check it
against the solver's bound of the lowered graphs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from staticsched.model.hardware import DTYPE_BYTES, Hardware, round_up
from staticsched.model.opkinds import KINDS as OPKINDS
from staticsched.model.opkinds import ItemShape, item_shape
from staticsched.model.vecops import VECOPS
from staticsched.tasks.bounds import Work, link_cycles
from staticsched.tasks.builder import balance_cores
from staticsched.tasks.matmul.grid import BlockGrid

FP32 = "float32"


class _Ops:
    """Units and durations of single ops, from the micro-op table, on ``hw``."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw

    def item(self, role: str, dtype: str, rows: int, cols: int) -> ItemShape:
        return item_shape(self.hw.role(role), rows * cols * DTYPE_BYTES[dtype], dtype, (rows, cols))

    def __call__(self, kind: str, a: dict[str, Any], reads: Sequence[ItemShape],
                 writes: Sequence[ItemShape]) -> tuple[str, int]:
        k = OPKINDS[kind]
        return k.unit(self.hw, a, reads, writes), k.duration(self.hw, a, reads, writes)


@attrs.frozen
class _Block:
    """One ``r x c`` output block over all K steps: cycles per pipe (times ``scale``, so that
    a step's share of a load stays an integer), the least head and tail per pipe of its ops,
    and its own chain from the first load to the store."""

    work: dict[str, int]
    heads: dict[str, int]
    tails: dict[str, int]
    chain: int


class MatmulBounds:
    """:class:`Work` of the tilings of one matmul task on one hardware model."""

    def __init__(self, task: Any, hw: Hardware) -> None:
        assert hw.cube is not None  # a legal tiling implies a Cube
        self.task, self.hw = task, hw
        self.op = _Ops(hw)
        self.fractal = hw.cube.fractal
        self._memo: dict[tuple, Any] = {}
        # units live on the cores the lowering deals them to: on a split chip the AICs only
        # (dealt over every core, a GEMM's per-core bound on ascend-a2 was a third of the AICs')
        self._cube_cores = len(hw.engine_cores("cube"))

    def _epilogue(self, r: int, c: int) -> tuple[dict[str, int], int, int, int]:
        """Cycles per pipe from FixPipe to the store, the chain FixPipe -> epilogue -> store,
        the least tail after one of its operand loads, and FixPipe's cycles."""
        got = self._memo.get((r, c))
        if got is None:
            got = self._memo[(r, c)] = self._epilogue_of(r, c)
        return got

    def _epilogue_of(self, r: int, c: int) -> tuple[dict[str, int], int, int, int]:
        task, op = self.task, self.op
        pm, pn = round_up(r, self.fractal[0]), round_up(c, self.fractal[1])
        ub = op.item("vector", task.out_dtype, pm, pn)
        fix = op("fixpipe", {"rows": r, "cols": c}, (op.item("accumulator", FP32, pm, pn),), (ub,))
        store = op("store", {"tensor": task.out, "region": ((0, r), (0, c))}, (ub,), ())
        ops, vecs, loaded = [fix, store], [], []
        for step in task.epilogue:
            if step.reduces:
                continue
            reads = [ub]
            if step.tensor:
                shape, region = {
                    "col": ((1, pn), ((0, 1), (0, c))),
                    "row": ((pm, 1), ((0, r), (0, 1))),
                    "full": ((pm, pn), ((0, r), (0, c))),
                }[VECOPS[step.op].operands[1]]
                tile = op.item("vector", task.dtype, *shape)
                ops.append(op("load", {"tensor": step.tensor, "region": region}, (), (tile,)))
                reads.append(tile)
                loaded.append(len(vecs))
            vecs.append(op("vec", {"op": step.op, "rows": r, "cols": c}, tuple(reads), (ub,)))
        work: dict[str, int] = {}
        for unit, dur in ops + vecs:
            work[unit] = work.get(unit, 0) + dur
        after = fix[1] + sum(d for _, d in vecs) + store[1]
        # an operand load is followed by its step, the later ones and the store; the gamma/beta
        # loads of a row reduction (not modelled) at least by the store
        tails = [sum(d for _, d in vecs[i:]) + store[1] for i in loaded]
        if task.reduces:
            tails.append(store[1])
        return work, after, min(tails, default=after), fix[1]

    def _kstep(self, r: int, c: int, d: int) -> tuple[tuple[str, int], ...]:
        """(unit, cycles) of the A load, B load, A move, B move and mmad of one K step."""
        la, ma = self._operand("a", r, d)
        lb, mb = self._operand("b", d, c)
        mm = self._memo.get(("mmad", r, c, d))
        if mm is None:
            fm, fn, fk = self.fractal
            pm, pn, pk = round_up(r, fm), round_up(c, fn), round_up(d, fk)
            dt = self.task.dtype
            l0a, l0b = self.op.item("cube_a", dt, pm, pk), self.op.item("cube_b", dt, pk, pn)
            l0c = self.op.item("accumulator", FP32, pm, pn)
            mm = self._memo[("mmad", r, c, d)] = self.op(
                "mmad", {"m": r, "n": c, "k": d, "init": True}, (l0a, l0b), (l0c,))
        return la, lb, ma, mb, mm

    def _operand(self, which: str, rows: int, cols: int) -> tuple[tuple[str, int], tuple[str, int]]:
        """The load into the operand buffer and the move to the Cube of an A (``rows = r``,
        ``cols = depth``) or B (``rows = depth``, ``cols = c``) tile."""
        got = self._memo.get((which, rows, cols))
        if got is not None:
            return got
        task, op = self.task, self.op
        prow, pcol = round_up(rows, self.fractal[0 if which == "a" else 2]), round_up(
            cols, self.fractal[2 if which == "a" else 1])
        l1 = op.item("operand", task.dtype, prow, pcol)
        l0 = op.item("cube_a" if which == "a" else "cube_b", task.dtype, prow, pcol)
        transpose = task.transpose_a if which == "a" else task.transpose_b
        a: dict[str, Any] = {"tensor": task.a if which == "a" else task.b,
                             "region": ((0, cols), (0, rows)) if transpose else ((0, rows), (0, cols))}
        if transpose:
            a["transpose"] = True
        nz = task.a_nz if which == "a" else task.b_nz
        if nz:
            a["nz"] = True
        elif self.hw.cube is not None and self.hw.cube.models_layouts:
            # an ND operand's load converts it at its shape's derated rate, as the lowering's
            # does: left out, the bound sat under every candidate on ascend-a2 and pruned none
            a["nd2nz"] = True
            a["stride"] = task.stored_tile(which, rows, cols)[2]
        got = self._memo[(which, rows, cols)] = (
            op("load", a, (), (l1,)), op("move", {"rows": rows, "cols": cols}, (l1,), (l0,)))
        return got

    def _bare(self, r: int, c: int) -> tuple[dict[str, int], int, int, int]:
        """A block's end on its Cube core when the rest runs elsewhere (a split-K chunk; any
        block on a split chip): FixPipe only."""
        op = self.op
        pm, pn = round_up(r, self.fractal[0]), round_up(c, self.fractal[1])
        acc = op.item("accumulator", FP32, pm, pn)
        if self.hw.split:  # FixPipe's store from the accumulator to global memory
            unit, fix = op("store", {"tensor": self.task.out, "region": ((0, r), (0, c))}, (acc,), ())
        else:
            unit, fix = op("fixpipe", {"rows": r, "cols": c}, (acc,),
                           (op.item("vector", self.task.out_dtype, pm, pn),))
        return {unit: fix}, fix, fix, fix

    def _block(self, r: int, c: int, depths: Counter, steps: tuple[int, int], bare: bool = False,
               resident_a: bool = False) -> _Block:
        step_m, step_n = steps
        scale = step_m * step_n
        # a resident A panel is loaded once per group but moved to L0A for every block
        moves_a = scale if resident_a else step_m
        # on a split chip the epilogue runs on the AIVs, whose pipes share names with the AIC's:
        # only the AIC's FixPipe store is counted there
        bare = bare or self.hw.split
        epi, after, epi_tail, fix = self._bare(r, c) if bare else self._epilogue(r, c)
        work = {u: v * scale for u, v in epi.items()}
        head = tail_load = None
        mmads = 0
        fm, fn, fk = self.fractal
        pm, pn = round_up(r, fm), round_up(c, fn)
        for d, count in sorted(depths.items()):
            la, lb, ma, mb, mm = self._kstep(r, c, d)
            # an A load (and move) serves step_n blocks, a B load step_m: this block's share
            for (unit, dur), times in ((la, count * step_m), (ma, count * moves_a), (lb, count * step_n),
                                       (mb, count * step_n), (mm, count * scale)):
                work[unit] = work.get(unit, 0) + dur * times
            pk, e = round_up(d, fk), self.task.elem_bytes
            for role, nbytes, life, times in (("cube_a", pm * pk * e, ma[1] + mm[1], step_m),
                                              ("cube_b", pk * pn * e, mb[1] + mm[1], step_n),
                                              ("operand", pm * pk * e, la[1] + ma[1], step_m),
                                              ("operand", pk * pn * e, lb[1] + mb[1], step_n)):
                self._hold(work, role, nbytes, life * count * times)
            mmads += mm[1] * count
            first = max(la[1] + ma[1], lb[1] + mb[1])
            head = first if head is None else min(head, first)
            t = min(ma[1], mb[1]) + mm[1] + after
            tail_load = t if tail_load is None else min(tail_load, t)
        assert head is not None and tail_load is not None  # K >= 1: at least one step
        self._hold(work, "accumulator", pm * pn * 4, (mmads + fix) * scale)
        if not (bare and self.hw.split):  # a split chip's AIC has no vector buffer
            self._hold(work, "vector", pm * pn * self.task.out_bytes, after * scale)
        cube, mte2 = mm[0], la[0]
        return _Block(work, {cube: head}, {cube: after, mte2: min(tail_load, epi_tail)},
                      head + mmads + after)

    def _hold(self, work: dict[str, int], role: str, nbytes: int, cycles: int) -> None:
        """Count ``cycles`` of an item's life in ``work["memory SPACE"]`` when the item takes
        more than half of the space playing ``role`` (no two such items coexist)."""
        got = self._memo.get(("role", role))
        if got is None:
            space = self.hw.role(role)
            got = self._memo[("role", role)] = (f"memory {space}", self.hw.space(space).capacity)
        key, cap = got
        if cap and 2 * nbytes > cap:
            work[key] = work.get(key, 0) + cycles

    def work(self, tiling: Any) -> Work:
        """The :class:`Work` of ``tiling`` (see the module docstring)."""
        task, cores = self.task, self._cube_cores
        plan = BlockGrid(task, tiling)
        if getattr(tiling, "split_k", 1) > 1:
            return self._splitk_work(plan)
        steps = (getattr(tiling, "step_m", 1), getattr(tiling, "step_n", 1))
        scale = steps[0] * steps[1]
        depths = Counter(e - s for s, e in plan.k_spans)
        rows = sorted({e - s for s, e in plan.m_spans}, reverse=True)
        cols = sorted({e - s for s, e in plan.n_spans}, reverse=True)
        kinds = tuple(sorted(depths.items()))
        blocks = {}
        resident = getattr(tiling, "resident_a", False)
        for r in rows:
            for c in cols:
                key = ("block", r, c, kinds, steps, resident)
                b = self._memo.get(key)
                if b is None:
                    b = self._memo[key] = self._block(r, c, depths, steps, resident_a=resident)
                blocks[(r, c)] = b
        pipes = sorted({p for b in blocks.values() for p in b.work})
        # cycles per (row class, column class, pipe); each block's class from its span lengths
        w = np.array([[[blocks[(r, c)].work.get(p, 0) for p in pipes] for c in cols] for r in rows],
                     dtype=np.int64)
        ri = np.array([rows.index(e - s) for s, e in plan.m_spans])
        ci = np.array([cols.index(e - s) for s, e in plan.n_spans])
        grid = w[ri][:, ci]  # (m blocks, n blocks, pipes)
        units = grid.sum(axis=1) if task.reduces else grid.reshape(-1, len(pipes))
        units = np.tile(units, (task.batches, 1))  # in lowering order: batch, m, n
        if steps == (1, 1):
            # units go to the cores as the lowering deals them (balanced by their estimated
            # cycles; which core takes the first does not change the largest share): sum per core
            busy = np.zeros((cores, len(pipes)), dtype=np.int64)
            np.add.at(busy, np.asarray(balance_cores(plan.work(self.hw), cores), dtype=np.int64), units)
            most = busy.max(axis=0)
        else:
            most = np.array([_spread_bound(units[:, k], cores) for k in range(len(pipes))])
        per_core = []
        for k, p in enumerate(pipes):
            head = min(b.heads.get(p, 0) for b in blocks.values())
            tail = min(b.tails.get(p, 0) for b in blocks.values())
            per_core.append((p, head + int(most[k]) // scale + tail))
        per_core.append(("critical_path", max(b.chain for b in blocks.values())))
        total = [(p, Fraction(int(units[:, k].sum()), scale)) for k, p in enumerate(pipes)]
        return Work(per_core, total, link_cycles(self.hw, self._gm_moves(plan, steps)))

    def _splitk_work(self, plan: Any) -> Work:
        """A split-K tiling's :class:`Work`: units of (block, K chunk), each its chunk's K
        steps and FixPipe, on the cores the lowering deals them to; the reduction (on the
        Vector engine) and the partials' traffic are left out, which keeps it a lower bound."""
        from staticsched.tasks.matmul.splitk import chunks

        task, cores = self.task, self._cube_cores
        kinds = [Counter(e - s for s, e in ch) for ch in chunks(list(plan.k_spans), plan.tiling.split_k)]
        units: list[_Block] = []
        for _ in range(task.batches):
            for m0, m1 in plan.m_spans:
                for n0, n1 in plan.n_spans:
                    for depths in kinds:
                        key = ("chunk", m1 - m0, n1 - n0, tuple(sorted(depths.items())))
                        b = self._memo.get(key)
                        if b is None:
                            b = self._memo[key] = self._block(m1 - m0, n1 - n0, depths, (1, 1), bare=True)
                        units.append(b)
        pipes = sorted({p for b in units for p in b.work})
        busy: dict[tuple[int, str], int] = {}
        for b, core in zip(units, balance_cores(plan.work(self.hw), cores), strict=True):
            for p, v in b.work.items():
                busy[(core, p)] = busy.get((core, p), 0) + v
        per_core = []
        for p in pipes:
            head = min(b.heads.get(p, 0) for b in units)
            tail = min(b.tails.get(p, 0) for b in units)
            most = max((v for (_, q), v in busy.items() if q == p), default=0)
            per_core.append((p, head + most + tail))
        per_core.append(("critical_path", max(b.chain for b in units)))
        total = [(p, Fraction(sum(b.work.get(p, 0) for b in units))) for p in pipes]
        gm = self.hw.role_space("global") or "GM"
        m, n, k, nb = task.m, task.n, task.k, task.batches
        operand = self.hw.role("operand")
        e = task.elem_bytes
        moves = [(gm, operand, nb * m * k * e * len(plan.n_spans)),
                 (gm, operand, nb * k * n * e * len(plan.m_spans))]
        return Work(per_core, total, link_cycles(self.hw, moves))

    def _gm_moves(self, plan: Any, steps: tuple[int, int]) -> list[tuple[str, str, int]]:
        """``(src, dst, bytes)`` of all GM loads and stores of the task under ``plan``: every
        block loads its A tiles (shared by ``step_n`` blocks) and B tiles (by ``step_m``),
        its epilogue operands and stores its output block."""
        task, hw = self.task, self.hw
        gm = hw.role_space("global") or "GM"
        m, n, k, b = task.m, task.n, task.k, task.batches
        mb, nb = len(plan.m_spans), len(plan.n_spans)
        operand, vector = hw.role("operand"), hw.role("vector")
        e, eo = task.elem_bytes, task.out_bytes
        moves = [(gm, operand, b * m * k * e * nb // steps[1]), (gm, operand, b * k * n * e * mb // steps[0]),
                 (vector, gm, b * m * n * eo)]
        for step in task.epilogue:
            if step.tensor and not step.reduces:
                form = VECOPS[step.op].operands[1]
                moves.append((gm, vector, b * {"col": mb * n, "row": nb * m, "full": m * n}[form] * e))
        return moves


def _spread_bound(costs: np.ndarray, cores: int) -> int:
    """The least possible largest sum when ``costs`` are spread over ``cores`` in any way:
    of the ``k * cores + 1`` largest, some core gets ``k + 1``, at least the ``k + 1``
    smallest of them."""
    desc = np.sort(costs)[::-1]
    cs = np.concatenate(([0], np.cumsum(desc)))
    best = 0
    for k in range(-(-len(desc) // cores)):
        top = k * cores + 1  # the largest `top` costs
        if top > len(desc):
            break
        best = max(best, int(cs[top] - cs[top - k - 1]))
    return best
