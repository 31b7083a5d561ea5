"""Split-K across cores: a block's K loop in ``split_k`` chunks on several cores, the partial
sums through an fp32 workspace in global memory, and a reduction in a fixed order.

The seed's §2.3 table: splitting along K "needs cross-core accumulation and brings extra
sync". It pays when the output has fewer blocks than the chip has Cube cores and K is long
(a decode-like ``64 x 64 x 65536``): without it a few cores stream all of K alone.

- K steps are dealt to chunks contiguously, the remainder to the first chunks (CATLASS's
  ``splitkFactor``: 14/13/13, ``shared/reference/graphs-and-split-cores.md`` §4.1). Each
  (block, chunk) is a unit of work, balanced over the Cube cores like whole blocks.
- A chunk's fp32 accumulator goes to its slice of the workspace ``<task>.partials``
  (``split_k`` stacked copies of the output, fp32): FixPipe into the vector buffer and a
  store on a coupled core; FixPipe straight to global memory on a split chip's AIC.
- The reduction of a block is cut along M into pieces, one per chunk (two per chunk on a
  split chip: the AIVs of each chunk's cluster). A piece loads its rows of every partial in
  chunk order and adds them in that order into the first, in fp32 (CATLASS's sequential
  ``Add`` onto slice 0: deterministic, unlike atomic adds), casts to the output's dtype, runs the epilogue
  and stores its rows of the output.
- Each piece's loads depend on the partials' stores on other cores, so the sync planner
  orders them with cross-core flags: every reducer waits for every chunk of its block (the
  all-to-all a barrier would give, per block, without stopping the other blocks).
"""

from __future__ import annotations

from staticsched.model.hardware import round_up
from staticsched.model.opgraph import Tensor
from staticsched.tasks.builder import FP32, Builder
from staticsched.tasks.matmul.split import epilogue_rows
from staticsched.tasks.ring import cluster_aivs

#: the name of a split-K workspace: the task id and this suffix
PARTIALS = ".partials"


def chunks(spans: list[tuple[int, int]], split: int) -> list[list[tuple[int, int]]]:
    """K steps ``spans`` dealt to ``split`` contiguous chunks, the remainder to the first."""
    size, extra = divmod(len(spans), split)
    out, at = [], 0
    for c in range(split):
        n = size + (c < extra)
        out.append(spans[at:at + n])
        at += n
    return out


def pieces(rows: int, count: int) -> list[tuple[int, int]]:
    """``rows`` cut into ``min(count, rows)`` ranges whose sizes differ by at most one."""
    count = max(1, min(count, rows))
    return [(i * rows // count, (i + 1) * rows // count) for i in range(count)]


def reducers_per_chunk(hw) -> int:
    """Reduction pieces per chunk: one on a coupled core, one per Vector core of a split
    cluster."""
    if not hw.split:
        return 1
    return len(hw.engine_cores("vector")) // max(1, hw.cores // hw.cluster_size)


class SplitK:
    """The split-K lowering of one matmul plan (``tiling.split_k > 1``)."""

    def __init__(self, plan, em: Builder) -> None:
        task, hw = plan.task, em.hw
        assert hw.cube is not None
        self.plan, self.em, self.task = plan, em, task
        self.split = plan.tiling.split_k
        self.chunks = chunks(list(plan.k_spans), self.split)
        self.pn = round_up(plan.tiling.base_n, hw.cube.fractal[1])
        self.rows = task.batches * task.m  # one partial's rows
        self.ws = task.id + PARTIALS
        self.chunk = 0
        self.aivs = cluster_aivs(hw)

    def reducers(self, cores: list[int]) -> list[int]:
        """The Vector cores that reduce a block whose chunks ran on ``cores``, in chunk order."""
        if not self.em.hw.split:
            return cores
        return [v for c in cores for v in self.aivs[self.em.hw.cluster_of(c)]]

    def lower(self) -> None:
        plan, em, task = self.plan, self.em, self.task
        hw = em.hw
        assert hw.cube is not None
        m_spans, n_spans = plan.m_spans, plan.n_spans
        per = self.split * max(1, plan.aivs)
        out_spans = [(bi * task.m + m0 + a0, bi * task.m + m0 + a1) for bi in range(task.batches)
                     for m0, m1 in m_spans for a0, a1 in pieces(m1 - m0, per)]
        em.output(task.out, out_spans, n_spans)
        em.workspace(Tensor(self.ws, (self.split * self.rows, task.n), FP32, workspace=True))
        em.output(self.ws, [(c * self.rows + bi * task.m + m0, c * self.rows + bi * task.m + m1)
                            for c in range(self.split) for bi in range(task.batches) for m0, m1 in m_spans],
                  n_spans)
        cores = em.balance(plan.work(hw), "cube")
        a_rows = task.k if task.transpose_a else task.m
        b_rows = task.n if task.transpose_b else task.k
        nm, nn = len(m_spans), len(n_spans)
        unit = 0
        for bi in range(task.batches):
            offs = (task.operand_index(task.a_lead, bi) * a_rows,
                    task.operand_index(task.b_lead, bi) * b_rows, bi * task.m)
            for mi in range(nm):
                for ni in range(nn):
                    b = (bi * nm + mi) * nn + ni
                    grid = [[(b, m_spans[mi], n_spans[ni])]]
                    used = []
                    for c, spans in enumerate(self.chunks):
                        self.chunk = c
                        plan._group(em, grid, cores[unit], spans, offs, hw.cube.fractal, self, f".c{c}")
                        used.append(cores[unit])
                        unit += 1
                    self.reduce(f"{task.id}.b{b}", self.reducers(used), m_spans[mi], n_spans[ni], bi * task.m)

    def block(self, p: str, core: int, ms: tuple[int, int], ns: tuple[int, int], o_off: int,
              l0c: str) -> list:
        """Chunk ``self.chunk``'s partial sums of a block into its slice of the workspace (no
        tile waits: split-K takes no row reduction)."""
        em = self.em
        (m0, m1), (n0, n1) = ms, ns
        r0 = self.chunk * self.rows + o_off + m0
        region = ((r0, r0 + m1 - m0), (n0, n1))
        if em.hw.split:  # the AIC's FixPipe writes global memory itself
            em.store(f"{p}.fixpipe", core, l0c, self.ws, region)
            return []
        assert em.hw.cube is not None
        pm = round_up(m1 - m0, em.hw.cube.fractal[0])
        ub = em.item(f"{p}.ub", "vector", FP32, (pm, self.pn))
        em.fixpipe(f"{p}.fixpipe", core, l0c, ub, m1 - m0, n1 - n0)
        em.store(f"{p}.store", core, ub, self.ws, region)
        return []

    def reduce(self, p: str, reducers: list[int], ms: tuple[int, int], ns: tuple[int, int],
               o_off: int) -> None:
        """Each piece of the block's rows on its reducer: every partial loaded and added in chunk
        order into the first (fp32), cast to fp16, the epilogue, the store."""
        em = self.em
        (m0, m1), (n0, n1) = ms, ns
        cols = n1 - n0
        for j, (a0, a1) in enumerate(pieces(m1 - m0, len(reducers))):
            v, q, hr = reducers[j], f"{p}.r{j}", a1 - a0
            acc = ""
            for c in range(self.split):
                part = em.item(f"{q}.p{c}", "vector", FP32, (hr, self.pn))
                r0 = c * self.rows + o_off + m0 + a0
                em.load(f"{q}.load{c}", v, part, self.ws, ((r0, r0 + hr), (n0, n1)))
                if acc:
                    em.vec(f"{q}.add{c}", v, "add", (acc, part), acc, (hr, cols))
                else:
                    acc = part
            ub = em.item(f"{q}.ub", "vector", self.task.out_dtype, (hr, self.pn))
            em.vec(f"{q}.cast", v, "cast", (acc,), ub, (hr, cols))
            epilogue_rows(em, self.task, q, v, ub, (o_off + m0 + a0, o_off + m0 + a1), ns, self.pn)
