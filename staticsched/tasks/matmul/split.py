"""The ``matmul`` lowering on a split chip (Ascend A2/A3: Cube on the AIC, Vector on the AIVs).

The AIC has no path to a UB, so a block's result reaches the epilogue through global memory,
as CATLASS's ``MatmulEpilogue`` with its multistage workspace does
(``shared/reference/graphs-and-split-cores.md`` §1.3):

- each AIC owns a ring of ``workspace_stages`` output-tile slots (a tiling field, default 2
  as CATLASS's ``workspaceStages``; ``tune`` searches 1-3 on a split chip) in a workspace tensor
  (``<task>.ws``, in the output's dtype: FixPipe converts from fp32 on the way out, as it does into the
  coupled core's UB); the AIC's k-th block goes to slot ``k mod stages``;
- FixPipe stores the block into its slot (a ``store`` from the accumulator: on this chip the
  path L0C->GM belongs to the FIXPIPE pipe);
- the two AIVs of the AIC's cluster each load their half of the block's rows (split along M)
  into their UB, run the epilogue there and store their half of the output;
- the block after next on that AIC overwrites the slot only after both halves were loaded
  (the ring's "consumed" dependency, made explicit here: global memory is not an item whose
  reuse the graph orders by itself).

The dependencies cross cores (AIC -> AIV, AIV -> AIC), so the sync planner gives them
cross-core flags. A block of one row gives its second AIV no rows: that AIV loads the slot's
first row as a token (``<block>.v<i>.token``) and does nothing else, so it waits for the slot
and signals it consumed like its twin. Every AIC <-> AIV crossing of the block then has both
AIVs, which a mode-2 flag needs (the AIC's SET counts on both, its WAIT passes only when both
have set), instead of a GM word for the one AIV that had work.
"""

from __future__ import annotations

import math
from typing import Protocol

import attrs

from staticsched.model.hardware import round_up
from staticsched.model.vecops import VECOPS
from staticsched.tasks.builder import Builder
from staticsched.tasks.matmul.task import MatmulTask
from staticsched.tasks.ring import Ring, cluster_aivs


def halves(rows: int) -> list[tuple[int, int]]:
    """The row ranges of a block's two AIV halves (the second empty for one row)."""
    h = math.ceil(rows / 2)
    return [(0, h), (h, rows)]


class SplitEpilogue:
    """The workspace ring of one matmul task and the epilogue of each block on its cluster's
    AIVs (:meth:`block`, called by the K loop in program order)."""

    def __init__(self, plan, em: Builder) -> None:
        task, hw = plan.task, em.hw
        assert hw.cube is not None
        fm, fn, _ = hw.cube.fractal
        self.plan, self.em = plan, em
        self.aics = hw.engine_cores("cube")
        self.aivs = cluster_aivs(hw)
        self.pm = round_up(plan.tiling.base_m, fm)
        self.pn = round_up(plan.tiling.base_n, fn)
        self.ws = f"{task.id}.ws"
        self.ring = Ring(em, self.ws, self.aics, plan.tiling.workspace_stages, (self.pm, self.pn),
                         task.out_dtype)

    def block(self, p: str, core: int, ms: tuple[int, int], ns: tuple[int, int], o_off: int,
              l0c: str) -> list[EpilogueTile]:
        """Store block ``p`` (rows ``ms``, columns ``ns`` of the output) from the accumulator
        into the AIC's next slot; each AIV of its cluster runs the epilogue on its half. With a
        row reduction in the epilogue each AIV stops before it and returns its half (in its
        UB, to stay there until the row panel is complete): the tiles, by AIV."""
        em, task, hw = self.em, self.plan.task, self.em.hw
        m0, m1 = ms
        rows, cols = m1 - m0, ns[1] - ns[0]
        slot = self.ring.next(core)
        base = slot.base
        em.store(f"{p}.fixpipe", core, l0c, self.ws, ((base, base + rows), (0, cols)), deps=slot.after)
        cluster = hw.cluster_of(core) * hw.cluster_size
        loads = []
        tiles: list[EpilogueTile] = []
        for v, (a0, a1) in zip(self.aivs[hw.cluster_of(core)], halves(rows), strict=False):
            q = f"{p}.v{v - cluster}"
            if a1 <= a0:
                # no rows for this AIV: it still waits for the slot and signals it consumed, by
                # a one-row token load, so that both AIVs set and wait every id of the block
                # and the AIC's mode-2 SET and WAIT cover the pair
                token = em.item(f"{q}.token", "vector", task.out_dtype, (1, self.pn))
                em.load(f"{q}.token", v, token, self.ws, ((base, base + 1), (0, cols)))
                loads.append(f"{q}.token")
                continue
            hr = a1 - a0
            ub = em.item(f"{q}.ub", "vector", task.out_dtype, (hr, self.pn))
            em.load(f"{q}.load", v, ub, self.ws, ((base + a0, base + a1), (0, cols)))
            loads.append(f"{q}.load")
            out_rows = (o_off + m0 + a0, o_off + m0 + a1)
            if task.reduces:
                operands = load_operands(em, task, q, v, (hr, self.pn), out_rows, ns)
                tile = EpilogueTile(task, q, v, ub, operands, out_rows, ns, hr, self.pn)
                for i in range(next(i for i, s in enumerate(task.epilogue) if s.reduces)):
                    tile.step(em, i)
                tiles.append(tile)
            else:
                epilogue_rows(em, task, q, v, ub, out_rows, ns, self.pn)
        self.ring.read(slot, loads)
        return tiles


@attrs.frozen
class EpilogueTile:
    """An output block in the vector buffer: its tile (the output's dtype), epilogue operand tiles, where it
    goes (``rows`` of the output, columns ``ns``) and its padded size."""

    task: MatmulTask
    p: str
    core: int
    ub: str
    operands: dict[int, str]
    out_rows: tuple[int, int]
    ns: tuple[int, int]
    pm: int
    pn: int

    @property
    def rows(self) -> int:
        return self.out_rows[1] - self.out_rows[0]

    @property
    def cols(self) -> int:
        return self.ns[1] - self.ns[0]

    def step(self, em: Builder, i: int) -> None:
        """Elementwise epilogue step ``i`` in place."""
        step = self.task.epilogue[i]
        reads = (self.ub,) if i not in self.operands else (self.ub, self.operands[i])
        em.vec(f"{self.p}.e{i}.{step.op}", self.core, step.op, reads, self.ub, (self.rows, self.cols),
               scalar=step.value)

    def store(self, em: Builder) -> None:
        em.store(f"{self.p}.store", self.core, self.ub, self.task.out, (self.out_rows, self.ns))


class BlockSink(Protocol):
    """Where a block's accumulator goes when its epilogue does not follow on the same core:
    the tiles whose row reduction waits for the rest of their row panel, if any."""

    def block(self, p: str, core: int, ms: tuple[int, int], ns: tuple[int, int], o_off: int,
              l0c: str) -> list[EpilogueTile]: ...


def epilogue_rows(em: Builder, task, q: str, core: int, ub: str, out_rows: tuple[int, int],
                  ns: tuple[int, int], pn: int) -> None:
    """The epilogue of rows ``out_rows`` x columns ``ns`` of the output, already in item
    ``ub`` (``pn`` columns) of ``core``'s vector buffer: its operand tiles loaded, every step
    in place, then the store. Ops are named after ``q``."""
    hr, cols = out_rows[1] - out_rows[0], ns[1] - ns[0]
    operands = load_operands(em, task, q, core, (hr, pn), out_rows, ns)
    for i, step in enumerate(task.epilogue):
        reads = (ub,) if i not in operands else (ub, operands[i])
        em.vec(f"{q}.e{i}.{step.op}", core, step.op, reads, ub, (hr, cols), scalar=step.value)
    em.store(f"{q}.store", core, ub, task.out, (out_rows, ns))


def load_operands(em: Builder, task, q: str, core: int, pads: tuple[int, int], out_rows: tuple[int, int],
                  ns: tuple[int, int]) -> dict[int, str]:
    """The tiles of the epilogue's tensor operands for output rows ``out_rows`` x columns
    ``ns``, loaded into ``core``'s vector buffer, by epilogue step; ``pads`` are the tiles'
    rows and columns (a row reduction's gamma/beta are loaded with its panel instead)."""
    (n0, n1), (pm, pn) = ns, pads
    operands: dict[int, str] = {}
    for i, step in enumerate(task.epilogue):
        if not step.tensor:
            continue
        form = VECOPS[step.op].operands[1]
        shape, region = {
            "col": ((1, pn), ((0, 1), (n0, n1))),
            "row": ((pm, 1), (out_rows, (0, 1))),
            "full": ((pm, pn), (out_rows, (n0, n1))),
        }[form]
        operands[i] = em.item(f"{q}.e{i}.ub", "vector", task.dtype, shape)
        em.load(f"{q}.e{i}.load", core, operands[i], step.tensor, region)
    return operands
