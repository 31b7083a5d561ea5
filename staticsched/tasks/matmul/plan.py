"""The ``matmul`` plan: units of work balanced over cores by their estimated cycles, and the
lowering of each block to micro-ops."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import attrs

from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.base import (
    TilingInfo,
    checked_or_derived,
    hardware_needs,
)
from staticsched.tasks.builder import FP32, Builder, balance_cores
from staticsched.tasks.matmul import vector
from staticsched.tasks.matmul.grid import BlockGrid
from staticsched.tasks.matmul.split import BlockSink, EpilogueTile, SplitEpilogue, halves, load_operands
from staticsched.tasks.matmul.splitk import SplitK, pieces, reducers_per_chunk
from staticsched.tasks.matmul.task import REDUCTION_OPS, MatmulTask
from staticsched.tasks.matmul.tiling import check_tiling, derive_tiling
from staticsched.tasks.rowops import ROWOPS, Block, Ctx


@attrs.frozen
class MatmulPlan(BlockGrid):
    """How a matmul is cut: its tiling and the block grid it gives."""

    #: Vector cores per cluster on a split chip (0 on a coupled one): blocks' epilogues and
    #: split-K reductions go to them, which changes the ops a block has
    aivs: int = 0

    @property
    def blocks(self) -> int:
        """Units of work on cores: groups of output blocks (one block without L1 reuse), or
        row panels when the epilogue reduces rows."""
        if self.task.reduces:
            return self.panels
        return self.task.batches * len(self.groups) * self.tiling.split_k

    @property
    def op_count(self) -> int:
        """Per group and K step: a load per A and B tile, a move per A tile, a move and an
        mmad per block; per block a fixpipe, a store, and per elementwise epilogue step one vec
        and, with a tensor operand, one load; the row reductions' ops per panel."""
        t, nm, nb = self.tiling, len(self.m_spans), len(self.n_spans)
        k_steps = math.ceil(self.task.k / t.base_k)
        epilogue = sum(2 if s.tensor else 1 for s in self.task.epilogue if not s.reduces)
        if t.split_k > 1:
            return self._splitk_ops(k_steps, epilogue)
        ops = 0
        for mi, ni in self.groups:
            gm, gn = min(t.step_m, nm - mi), min(self.step_n, nb - ni)
            if t.resident_a:  # A's tiles once; per block and K step a B load, two moves, an mmad
                ops += k_steps * (1 + 4 * gn)
            else:
                ops += k_steps * (2 * gm + gn + 2 * gm * gn)
            if self.aivs:  # FixPipe into the ring; per AIV with rows: load, epilogue, store
                # (an AIV without rows: its token load)
                ops += sum(gn * (1 + sum((2 + epilogue) if h[1] > h[0] else 1 for h in halves(m1 - m0)))
                           for m0, m1 in self.m_spans[mi:mi + gm])
            else:
                ops += gm * gn * (2 + epilogue)
        per_panel = 0
        for s in self.task.epilogue:
            if s.reduces:
                params = {"gamma": s.gamma, "beta": s.beta}
                per_panel += ROWOPS[s.op].count_resident(nb, params) + nb * len(s.tensors)
        # on a split chip each AIV with rows reduces its half of the panel
        sweeps = sum(len([h for h in halves(m1 - m0) if h[1] > h[0]]) if self.aivs else 1
                     for m0, m1 in self.m_spans)
        return self.task.batches * (ops + sweeps * per_panel)

    def _splitk_ops(self, k_steps: int, epilogue: int) -> int:
        """Per block: the K steps (five ops each), per chunk its FixPipe (and on a coupled core
        its store), per reduction piece ``split_k`` loads, ``split_k - 1`` adds, a cast, the
        epilogue and a store."""
        split = self.tiling.split_k
        per_chunk = 1 if self.aivs else 2
        ops = 0
        for m0, m1 in self.m_spans:
            count = len(pieces(m1 - m0, split * max(1, self.aivs)))
            ops += k_steps * 5 + split * per_chunk + count * (2 * split + epilogue + 1)
        return self.task.batches * len(self.n_spans) * ops

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        combine = ROWOPS[REDUCTION_OPS[0]].resident_combine(len(self.n_spans)) if self.task.reduces else ""
        ncores = len(hw.engine_cores("cube"))
        counts = Counter(balance_cores(self.work(hw), ncores))
        per = (min(counts.get(c, 0) for c in range(ncores)), max(counts.values()))
        return TilingInfo(self.task.id, "matmul", (t.base_m, t.base_n, t.base_k), t.buffers,
                          self.task.tiling is None, self.blocks, per,
                          combine=combine, steps=(t.step_m, t.step_n) if t.reuses else (),
                          resident_a=t.resident_a)

    def lower(self, em: Builder) -> None:
        task, hw = self.task, em.hw
        assert hw.cube is not None  # needs() checked it
        fm, fn, fk = hw.cube.fractal
        m_spans, n_spans, k_spans = self.m_spans, self.n_spans, self.k_spans
        m, n, k = task.m, task.n, task.k
        if self.tiling.split_k > 1:
            SplitK(self, em).lower()
            return
        split = SplitEpilogue(self, em) if hw.split else None
        # on a split chip each AIV stores half a block's rows: the output grid has both halves
        out_spans = [(bi * m + m0 + a0, bi * m + m0 + a1) for bi in range(task.batches) for m0, m1 in m_spans
                     for a0, a1 in (halves(m1 - m0) if split else [(0, m1 - m0)]) if a1 > a0]
        em.output(task.out, out_spans, n_spans)
        cores = em.balance(self.work(hw), "cube")
        a_rows = k if task.transpose_a else m
        b_rows = n if task.transpose_b else k
        t, nm, nn = self.tiling, len(m_spans), len(n_spans)
        panel: list[EpilogueTile] = []
        # computed once: the property builds the whole list (a lookup per group was quadratic)
        groups = self.groups
        for bi in range(task.batches):
            a_off = task.operand_index(task.a_lead, bi) * a_rows
            b_off = task.operand_index(task.b_lead, bi) * b_rows
            o_off = bi * m
            for gi, (mi0, ni0) in enumerate(groups):
                # block numbers are row-major over (batch, M, N) whatever the grouping
                grid = [[((bi * nm + mi) * nn + ni, m_spans[mi], n_spans[ni])
                         for ni in range(ni0, min(ni0 + self.step_n, nn))]
                        for mi in range(mi0, min(mi0 + t.step_m, nm))]
                pi = bi * nm + mi0
                core = cores[pi if task.reduces else bi * len(groups) + gi]
                group = self._resident if t.resident_a else self._group
                tiles = group(em, grid, core, k_spans, (a_off, b_off, o_off), (fm, fn, fk), split)
                if task.reduces:  # one row of blocks per group (check_tiling): the panel's come in order
                    panel.extend(tiles)
                    if ni0 + len(grid[0]) == nn:
                        self._panel(em, pi, panel)
                        panel = []

    def _panel(self, em: Builder, pi: int, tiles: list[EpilogueTile]) -> None:
        """The epilogue of one row panel whose blocks are all in vector buffers: on a coupled
        core one tile per block, on a split chip one per block and AIV (each AIV holds its
        half of the panel's rows and reduces them alone, rows being independent)."""
        by_core: dict[int, list[EpilogueTile]] = {}
        for t in tiles:
            by_core.setdefault(t.core, []).append(t)
        base = em.hw.cluster_of(tiles[0].core) * em.hw.cluster_size if em.hw.split else 0
        for core, blocks in by_core.items():
            prefix = f"{self.task.id}.r{pi}" + (f".v{core - base}" if em.hw.split else "")
            self._panel_rows(em, prefix, blocks)

    def _panel_rows(self, em: Builder, prefix: str, blocks: list[EpilogueTile]) -> None:
        """The epilogue of the rows of ``blocks`` (one row panel's, on one core): each row
        reduction sweeps every block (:mod:`staticsched.tasks.rowops`), the elementwise steps
        after it run block by block; then every block is stored. The reductions' ops are
        named after ``prefix``."""
        task = self.task
        first, rows = blocks[0], blocks[0].rows
        start = next(i for i, s in enumerate(task.epilogue) if s.reduces)
        for i in range(start, len(task.epilogue)):
            step = task.epilogue[i]
            if not step.reduces:
                for t in blocks:
                    t.step(em, i)
                continue
            tiles = []
            for t in blocks:
                params = {}
                for key in ("gamma", "beta"):
                    name = getattr(step, key)
                    if name:
                        params[key] = em.item(f"{t.p}.e{i}.{key}", "vector", task.dtype, (1, t.pn))
                        em.load(f"{t.p}.e{i}.load_{key}", t.core, params[key], name, ((0, 1), t.ns))
                tiles.append(Block(t.ub, t.cols, gamma=params.get("gamma", ""), beta=params.get("beta", "")))
            ctx = Ctx(em, first.core, f"{prefix}.e{i}", rows, first.pm, task.n)
            ROWOPS[step.op].resident(ctx, tiles, step.epsilon, "")
        for t in blocks:
            t.store(em)

    def _group(self, em: Builder, grid: list[list[tuple[int, tuple[int, int], tuple[int, int]]]], core: int,
               k_spans: Sequence[tuple[int, int]], offs: tuple[int, int, int],
               fractal: tuple[int, int, int], split: BlockSink | None = None,
               suffix: str = "") -> list[EpilogueTile]:
        """A group of blocks (``grid[i][j]`` = block number, M span, N span), K step by K step:
        each A tile is loaded once for its grid row and each B tile once for its column (named
        after the row's first and the column's first block, so a 1x1 group names everything
        after its block, plus ``suffix``); then each block's epilogue in row-major order, or
        its accumulator handed to ``split`` (the AIVs' workspace ring, a split-K partial)."""
        task = self.task
        fm, fn, fk = fractal
        a_off, b_off, _ = offs
        p = [[f"{task.id}.b{b}{suffix}" for b, _, _ in row] for row in grid]
        pad_m = [round_up(ms[1] - ms[0], fm) for _, ms, _ in (row[0] for row in grid)]
        pad_n = [round_up(ns[1] - ns[0], fn) for _, _, ns in grid[0]]
        l0c = [[em.item(f"{p[i][j]}.l0c", "accumulator", FP32, (pad_m[i], pad_n[j]))
                for j in range(len(grid[0]))] for i in range(len(grid))]

        def load_b(s: int) -> list[str]:
            k0, k1 = k_spans[s]
            pk = round_up(k1 - k0, fk)
            tiles = []
            for j, (_, _, (n0, n1)) in enumerate(grid[0]):
                q = f"{p[0][j]}.k{s}"
                tiles.append(em.item(f"{q}.l1b", "operand", task.dtype, (pk, pad_n[j])))
                self._load(em, q, core, tiles[j], "b", b_off, (k0, k1), (n0, n1))
            return tiles

        ahead = self._prefetch(em, len(grid), len(grid[0]), fractal)
        loaded_b: dict[int, list[str]] = {}
        for s, (k0, k1) in enumerate(k_spans):
            pk, depth = round_up(k1 - k0, fk), k1 - k0
            # B's tiles of the next ``ahead`` K steps come before A's of this one in program
            # order (the memory allocation order): they wait for no earlier task
            for t in range(s, min(s + ahead, len(k_spans))):
                if t not in loaded_b:
                    loaded_b[t] = load_b(t)
            l1a = []
            for i, row in enumerate(grid):
                (m0, m1), q = row[0][1], f"{p[i][0]}.k{s}"
                l1a.append(em.item(f"{q}.l1a", "operand", task.dtype, (pad_m[i], pk)))
                self._load(em, q, core, l1a[i], "a", a_off, (m0, m1), (k0, k1))
            l1b = loaded_b.pop(s) if s in loaded_b else load_b(s)
            for i, row in enumerate(grid):
                q = f"{p[i][0]}.k{s}"
                rows = row[0][1][1] - row[0][1][0]
                l0a = em.item(f"{q}.l0a", "cube_a", task.dtype, (pad_m[i], pk))
                em.move(f"{q}.move_a", core, l1a[i], l0a, rows, depth)
                for j, (_, _, (n0, n1)) in enumerate(row):
                    q = f"{p[i][j]}.k{s}"
                    l0b = em.item(f"{q}.l0b", "cube_b", task.dtype, (pk, pad_n[j]))
                    em.move(f"{q}.move_b", core, l1b[j], l0b, depth, n1 - n0)
                    em.mmad(f"{q}.mmad", core, l0a, l0b, l0c[i][j], rows, n1 - n0, depth, s == 0)
        if split is not None:  # the epilogue elsewhere, through global memory
            return [tile for i, row in enumerate(grid) for j, (_, ms, ns) in enumerate(row)
                    for tile in split.block(p[i][j], core, ms, ns, offs[2], l0c[i][j])]
        return [self._epilogue(em, p[i][j], core, ms, ns, offs, l0c[i][j], (pad_m[i], pad_n[j]))
                for i, row in enumerate(grid) for j, (_, ms, ns) in enumerate(row)]

    def _load(self, em: Builder, q: str, core: int, item: str, operand: str, off: int,
              rows: tuple[int, int], cols: tuple[int, int]) -> None:
        """``q.load_a`` or ``q.load_b``: the operand's tile of ``rows`` x ``cols`` as the Cube
        takes it (A: M x K, B: K x N; batch offset ``off``) into ``item``, read transposed
        from a transposed operand's tensor."""
        task = self.task
        tensor, transposed = (task.a, task.transpose_a) if operand == "a" else (task.b, task.transpose_b)
        (r0, r1), (c0, c1) = rows, cols
        name = f"{q}.load_{operand}"
        if transposed:
            em.load(name, core, item, tensor, ((off + c0, off + c1), (r0, r1)), transpose=True)
        else:
            em.load(name, core, item, tensor, ((off + r0, off + r1), (c0, c1)))

    def _resident(self, em: Builder, grid: list[list[tuple[int, tuple[int, int], tuple[int, int]]]],
                  core: int, k_spans: Sequence[tuple[int, int]], offs: tuple[int, int, int],
                  fractal: tuple[int, int, int], split: BlockSink | None = None) -> list[EpilogueTile]:
        """A row of blocks (``grid[0]``, as :meth:`_group` takes it) with A's panel resident
        in L1 (``Tiling.resident_a``): the first block loads each K step's A tile beside its B
        tile, and every block after it loads B's alone and moves A's again from L1; each
        block runs its K loop into its own accumulator and then its epilogue, so one
        accumulator is live at a time (two with double buffering: the next block's K loop
        runs beside this one's epilogue)."""
        task = self.task
        fm, fn, fk = fractal
        a_off, b_off, _ = offs
        (row,) = grid
        m0, m1 = row[0][1]
        rows, pm = m1 - m0, round_up(m1 - m0, fm)
        l1a: list[str] = []
        # B's tiles go through a ring of as many L1 items as the tiling has buffers, reused in
        # program order (a TQue of that depth): a free-running B stream in the L1 the panel
        # leaves ran ten loads ahead of MTE1, and the sync planner found no reusable
        # MTE1->MTE2 id (docs/design.md, refinement 9's rule, for a space of mixed tiles)
        p0 = f"{task.id}.b{row[0][0]}"
        pk0, pn0 = round_up(k_spans[0][1] - k_spans[0][0], fk), round_up(row[0][2][1] - row[0][2][0], fn)
        ring = [em.item(f"{p0}.l1b{r}", "operand", task.dtype, (pk0, pn0))
                for r in range(self.tiling.buffers)]
        tiles: list[EpilogueTile] = []
        # the first block's B tiles that fill the ring come before its A tiles in program order
        # where only A waits for an earlier task (as _prefetch's): they load while that task
        # runs, and the first K loop after A arrives moves A's bytes and the rest of B's
        ahead = min(len(ring), len(k_spans)) if self._weights_wait_for_nothing(em) else 0
        first_b, first_n = row[0][0], row[0][2]
        for s in range(ahead):
            self._load(em, f"{task.id}.b{first_b}.k{s}", core, ring[s], "b", b_off, k_spans[s], first_n)
        for j, (b, ms, ns) in enumerate(row):
            p = f"{task.id}.b{b}"
            n0, n1 = ns
            pn = round_up(n1 - n0, fn)
            l0c = em.item(f"{p}.l0c", "accumulator", FP32, (pm, pn))
            for s, (k0, k1) in enumerate(k_spans):
                pk, depth, q = round_up(k1 - k0, fk), k1 - k0, f"{p}.k{s}"
                if j == 0:
                    l1a.append(em.item(f"{q}.l1a", "operand", task.dtype, (pm, pk)))
                    self._load(em, q, core, l1a[s], "a", a_off, (m0, m1), (k0, k1))
                l1b = ring[(j * len(k_spans) + s) % len(ring)]
                if j or s >= ahead:
                    self._load(em, q, core, l1b, "b", b_off, (k0, k1), (n0, n1))
                l0a = em.item(f"{q}.l0a", "cube_a", task.dtype, (pm, pk))
                em.move(f"{q}.move_a", core, l1a[s], l0a, rows, depth)
                l0b = em.item(f"{q}.l0b", "cube_b", task.dtype, (pk, pn))
                em.move(f"{q}.move_b", core, l1b, l0b, depth, n1 - n0)
                em.mmad(f"{q}.mmad", core, l0a, l0b, l0c, rows, n1 - n0, depth, s == 0)
            if split is not None:
                tiles += split.block(p, core, ms, ns, offs[2], l0c)
            else:
                tiles.append(self._epilogue(em, p, core, ms, ns, offs, l0c, (pm, pn)))
        return tiles

    def _weights_wait_for_nothing(self, em: Builder) -> bool:
        """Whether B's tiles may load ahead of A's in program order: on a split chip, where A
        is an earlier task's output and B is not (see :meth:`_prefetch`)."""
        task = self.task
        return em.hw.split and task.b not in em.stores and task.a in em.stores

    def _prefetch(self, em: Builder, rows: int, cols: int, fractal: tuple[int, int, int]) -> int:
        """How many K steps' B tiles a group of ``rows x cols`` blocks loads ahead of the A
        tiles of the step it is in (0: none; A's first, as the plain order has it).

        Where A is an earlier task's output and B is not (a layer's weights), B's tiles wait
        for nothing: placed ahead of A in program order, which is the order the list scheduler
        allocates memory in, they load while the previous task still runs, and the K loop
        after A arrives moves A's bytes only (``bert_layer``'s down projection on
        ``ascend-a2``: 16 loads of 288 cycles after the up projection's last store, instead of
        8). As many steps as the operand space's slots hold beside the group's A tiles: its
        capacity in the largest tile, and at most the chip's event ids (the solver's flag-slot
        cap, refinement 9), so the program order's live set still fits and allocating in it
        cannot deadlock.

        On a split chip only: there the AIC's MTE2 serves the Cube alone, while a coupled
        core's also feeds the Vector tasks, which the early loads then delay (``gpt_block`` on
        ``seed-davinci``: 14,742 -> 14,844 cycles with them; ``bert_layer`` on ``ascend-a2``:
        23,184 -> 22,800).
        """
        t = self.tiling
        if not self._weights_wait_for_nothing(em):
            return 0
        fm, fn, fk = fractal
        pk = round_up(t.base_k, fk)
        tile = max(round_up(t.base_m, fm) * pk, pk * round_up(t.base_n, fn)) * self.task.elem_bytes
        space = em.hw.space(em.space("operand"))
        slots = min(space.capacity // tile, em.hw.sync.event_ids) if space.capacity else em.hw.sync.event_ids
        ahead = (slots - rows) // cols
        return min(ahead, len(self.k_spans)) if ahead > 1 else 0

    def _epilogue(self, em: Builder, p: str, core: int, ms: tuple[int, int], ns: tuple[int, int],
                  offs: tuple[int, int, int], l0c: str, pads: tuple[int, int]) -> EpilogueTile:
        """One block's epilogue operands, fixpipe and elementwise steps, and its store (unless
        a row reduction waits for the whole panel)."""
        task = self.task
        (m0, m1), (n0, n1) = ms, ns
        o_off = offs[2]
        pm, pn = pads
        rows, cols = m1 - m0, n1 - n0
        ub = em.item(f"{p}.ub", "vector", task.out_dtype, (pm, pn))
        out_rows = (o_off + m0, o_off + m1)
        operands = load_operands(em, task, p, core, (pm, pn), out_rows, ns)
        em.fixpipe(f"{p}.fixpipe", core, l0c, ub, rows, cols)
        tile = EpilogueTile(task, p, core, ub, operands, out_rows, ns, pm, pn)
        for i, step in enumerate(task.epilogue):
            if step.reduces:
                return tile  # the rest once the whole row panel is here (_panel)
            tile.step(em, i)
        tile.store(em)
        return tile


def plan(task: MatmulTask, hw: Hardware) -> MatmulPlan | vector.VectorPlan:
    if task.on_vector:
        return vector.plan(task, hw)
    aivs = reducers_per_chunk(hw) if hw.split else 0
    return checked_or_derived(task, hw, check_tiling, derive_tiling,
                              lambda task, tiling: MatmulPlan(task, tiling, aivs))


def needs(task: MatmulTask, hw: Hardware) -> list[str]:
    if task.on_vector:
        return vector.needs(task, hw)
    if hw.split:
        return _split_needs(task, hw)
    paths = [("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"), ("accumulator", "vector"),
             ("vector", "global")]
    if any(s.tensors for s in task.epilogue) or (task.tiling is not None and task.tiling.split_k > 1):
        paths.append(("global", "vector"))
    return hardware_needs(task.id, hw, roles=("operand", "cube_a", "cube_b", "accumulator", "vector"),
                          paths=paths, cube=True, vector=bool(task.epilogue), cube_dtype=task.dtype)


def _split_needs(task: MatmulTask, hw: Hardware) -> list[str]:
    """On a split chip the block goes L0C -> GM (the workspace) -> UB (a row reduction in the
    epilogue keeps each AIV's half of the row panel in its UB)."""
    lines = hardware_needs(task.id, hw, roles=("operand", "cube_a", "cube_b", "accumulator", "vector"),
                           paths=[("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"),
                                  ("accumulator", "global"), ("global", "vector"), ("vector", "global")],
                           cube=True, vector=True, cube_dtype=task.dtype)
    return lines
