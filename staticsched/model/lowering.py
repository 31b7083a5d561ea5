"""Lowering a TaskGraph to an OpGraph of tile micro-ops (DESIGN §4).

Each task is cut into blocks (a matmul into ``base_m x base_n`` output blocks,
an elementwise task into row tiles); blocks go to cores **round-robin in
row-major block order**, the rotation continuing from one task to the next so
that small tasks do not all start on core 0. Within a task the per-core counts
differ by at most one, and equal-sized blocks get identical per-core op
structure.

A matmul block is, for every K step: ``load`` GM->L1 of the A and B tiles,
``move`` L1->L0A and L1->L0B, ``mmad`` into the block's one L0C item (``init``
on the first step, accumulating after); then the epilogue operands are loaded
GM->UB, ``fixpipe`` drains L0C into UB (fp32 -> fp16), the epilogue ``vec`` ops
run in place on that UB tile and ``store`` writes the real region back to GM.
An elementwise tile loads its inputs GM->UB, runs one ``vec`` in place on the
first input's tile and stores it.

The op list is the program order: ops are emitted task by task (dependency
order), block by block, K step by K step. Every tile is its own item, so the
item accesses already order everything inside a block; explicit ``deps`` only
join tasks: a ``load`` depends on exactly the producer ``store`` ops whose GM
regions intersect the region it reads. Units and durations come from the kind
table (:data:`staticsched.model.opkinds.KINDS`).

Tails are smaller blocks. Items the Cube touches (L1, L0A, L0B, L0C) and the UB
block FixPipe drains from L0C are padded up to the cube fractal (their bytes, for
capacity and the Cube's cost); every op states its real extent — ``mmad`` the real
``m, n, k``, ``move``/``fixpipe``/``vec`` ``rows x cols``, loads/stores the real GM
``region`` — and works on exactly that (see :mod:`staticsched.model.opkinds`), so
nothing reads the padding.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from staticsched._fields import Problems
from staticsched.errors import GraphError, TilingError
from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.opgraph import Item, Op, OpGraph, Tensor
from staticsched.model.opkinds import KINDS, ItemShape, Region
from staticsched.model.taskgraph import ElementwiseTask, MatmulTask, TaskGraph, dumps_taskgraph
from staticsched.model.tiling import RowTiling, Tiling, check_tiling, derive_row_tiling, derive_tiling
from staticsched.options import DEFAULT_OP_BUDGET

_FP16 = "float16"
_FP32 = "float32"


def _spans(total: int, step: int) -> tuple[tuple[int, int], ...]:
    """``[0, total)`` cut into ``step``-sized half-open spans, the last one possibly shorter."""
    return tuple((s, min(s + step, total)) for s in range(0, total, step))


def _pad(x: int, q: int) -> int:
    return -(-x // q) * q


@attrs.frozen
class MatmulPlan:
    """How a matmul is cut: its tiling and the block grid it gives."""

    task: MatmulTask
    tiling: Tiling

    @property
    def m_spans(self) -> tuple[tuple[int, int], ...]:
        return _spans(self.task.m, self.tiling.base_m)

    @property
    def n_spans(self) -> tuple[tuple[int, int], ...]:
        return _spans(self.task.n, self.tiling.base_n)

    @property
    def k_spans(self) -> tuple[tuple[int, int], ...]:
        return _spans(self.task.k, self.tiling.base_k)

    @property
    def blocks(self) -> int:
        return math.ceil(self.task.m / self.tiling.base_m) * math.ceil(self.task.n / self.tiling.base_n)

    @property
    def ops_per_block(self) -> int:
        # 5 per K step (2 loads, 2 moves, mmad); fixpipe, store; per epilogue step one vec and,
        # when it has a tensor operand, one load
        k_steps = math.ceil(self.task.k / self.tiling.base_k)
        epilogue = sum(2 if s.tensor else 1 for s in self.task.epilogue)
        return 5 * k_steps + 2 + epilogue

    @property
    def op_count(self) -> int:
        return self.blocks * self.ops_per_block


@attrs.frozen
class ElementwisePlan:
    """How an elementwise task is cut into UB tiles."""

    task: ElementwiseTask
    tiling: RowTiling

    @property
    def row_spans(self) -> tuple[tuple[int, int], ...]:
        return _spans(self.task.rows, self.tiling.rows)

    @property
    def col_spans(self) -> tuple[tuple[int, int], ...]:
        return _spans(self.task.cols, self.tiling.cols)

    @property
    def blocks(self) -> int:
        return math.ceil(self.task.rows / self.tiling.rows) * math.ceil(self.task.cols / self.tiling.cols)

    @property
    def ops_per_block(self) -> int:
        return len(self.task.inputs) + 2

    @property
    def op_count(self) -> int:
        return self.blocks * self.ops_per_block


Plan = MatmulPlan | ElementwisePlan


def _hardware_problems(tg: TaskGraph, hw: Hardware) -> list[str]:
    """What ``hw`` lacks to run the tasks of ``tg``: spaces, transfer paths, cube, vector."""
    lines = []
    for task in tg.ordered_tasks:
        paths = [("GM", "UB"), ("UB", "GM")]
        spaces = ["UB"]
        need_cube = False
        need_vector = True
        if isinstance(task, MatmulTask):
            paths = [("GM", "L1"), ("L1", "L0A"), ("L1", "L0B"), ("L0C", "UB"), ("UB", "GM")]
            if any(s.tensor for s in task.epilogue):
                paths.append(("GM", "UB"))
            spaces = ["L1", "L0A", "L0B", "L0C", "UB"]
            need_cube = True
            need_vector = bool(task.epilogue)
        w = f"hardware '{hw.name}' cannot run task '{task.id}'"
        lines += [f"{w}: no memory space '{s}'" for s in spaces if not hw.has_space(s)]
        lines += [f"{w}: no transfer path {s}->{d} in [[paths]]" for s, d in paths if not hw.has_path(s, d)]
        if need_cube and hw.cube is None:
            lines.append(f"{w}: no [cube] section")
        elif need_cube and _FP16 not in dict(hw.cube.macs_per_cycle):
            lines.append(f"{w}: [cube] has no macs_per_cycle for {_FP16}")
        if need_vector and hw.vector is None:
            lines.append(f"{w}: no [vector] section")
    return lines


def plan_tasks(tg: TaskGraph, hw: Hardware) -> tuple[Plan, ...]:
    """Tiling and block grid of every task, in dependency order.

    Explicit matmul tilings are checked (:func:`check_tiling`), missing ones derived.

    Raises
    ------
    GraphError
        When ``hw`` lacks a space, transfer path or unit the tasks need.
    TilingError
        For every task whose tiling does not fit, all at once.
    """
    missing = _hardware_problems(tg, hw)
    if missing:
        raise GraphError(missing)
    pr = Problems()
    plans: list[Plan] = []
    for task in tg.ordered_tasks:
        try:
            if isinstance(task, MatmulTask):
                if task.tiling is not None:
                    check_tiling(task, task.tiling, hw)
                    tiling = task.tiling
                else:
                    tiling = derive_tiling(task, hw)
                plans.append(MatmulPlan(task, tiling))
            else:
                plans.append(ElementwisePlan(task, derive_row_tiling(task, hw)))
        except TilingError as exc:
            for line in exc.problems:
                pr.add(line)
    pr.raise_if_any(TilingError)
    return tuple(plans)


def estimate_ops(plans: Sequence[Plan]) -> int:
    """Number of ops :func:`lower` emits for ``plans`` (from shapes and tilings, no ops built)."""
    return sum(p.op_count for p in plans)


class _StoreGrid:
    """The store ops of one GM tensor, indexed by the producer's block grid.

    A tensor has one writer task whose blocks tile it as a grid of row spans x column
    spans, so the stores a region intersects are a rectangle of cells found by bisection.
    """

    def __init__(self, row_spans: Sequence[tuple[int, int]], col_spans: Sequence[tuple[int, int]]):
        self.row_starts = [r0 for r0, _ in row_spans]
        self.col_starts = [c0 for c0, _ in col_spans]
        self.cells: dict[tuple[int, int], str] = {}

    def add(self, region: Region, op_id: str) -> None:
        (r0, _), (c0, _) = region
        cell = (bisect.bisect_left(self.row_starts, r0), bisect.bisect_left(self.col_starts, c0))
        self.cells[cell] = op_id

    def intersecting(self, region: Region) -> list[str]:
        (r0, r1), (c0, c1) = region
        rows = range(bisect.bisect_right(self.row_starts, r0) - 1, bisect.bisect_left(self.row_starts, r1))
        cols = range(bisect.bisect_right(self.col_starts, c0) - 1, bisect.bisect_left(self.col_starts, c1))
        return [self.cells[(i, j)] for i in rows for j in cols]


class _Emitter:
    """Accumulates items and ops; units and durations come from the kind table."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.items: list[Item] = []
        self.ops: list[Op] = []
        self.shapes: dict[str, ItemShape] = {}
        self.stores: dict[str, _StoreGrid] = {}
        self.next_core = 0

    def core_of(self, block: int, first_core: int) -> int:
        return (first_core + block) % self.hw.cores

    def item(self, name: str, space: str, dtype: str, shape: tuple[int, int]) -> str:
        it = Item(name, space, shape[0] * shape[1] * DTYPE_BYTES[dtype], dtype, shape)
        self.items.append(it)
        self.shapes[name] = it.as_shape()
        return name

    def op(
        self,
        op_id: str,
        kind_name: str,
        core: int,
        reads: Sequence[str],
        writes: Sequence[str],
        attrs_: Mapping[str, Any],
        deps: Sequence[str] = (),
    ) -> None:
        kind = KINDS[kind_name]
        r = [self.shapes[n] for n in reads]
        w = [self.shapes[n] for n in writes]
        self.ops.append(
            Op(
                id=op_id,
                unit=kind.unit(self.hw, attrs_, r, w),
                duration=kind.duration(self.hw, attrs_, r, w),
                core=core,
                deps=deps,
                reads=reads,
                writes=writes,
                kind=kind_name,
                attrs=attrs_,
            )
        )

    def load(
        self, op_id: str, core: int, dst: str, tensor: str, region: Region, *, transpose: bool = False
    ) -> None:
        attrs_: dict[str, Any] = {"tensor": tensor, "region": region}
        if transpose:
            attrs_["transpose"] = True
        grid = self.stores.get(tensor)
        deps = grid.intersecting(region) if grid is not None else []
        self.op(op_id, "load", core, (), (dst,), attrs_, deps)

    def store(self, op_id: str, core: int, src: str, tensor: str, region: Region) -> None:
        self.op(op_id, "store", core, (src,), (), {"tensor": tensor, "region": region})
        self.stores[tensor].add(region, op_id)

    def vec(
        self,
        op_id: str,
        core: int,
        x: str,
        y: str | None,
        op: str,
        value: float | None,
        extent: tuple[int, int],
    ) -> None:
        attrs_: dict[str, Any] = {"op": op, "rows": extent[0], "cols": extent[1]}
        if value is not None:
            attrs_["scalar"] = value
        self.op(op_id, "vec", core, (x,) if y is None else (x, y), (x,), attrs_)

    # ------------------------------------------------------------------ tasks
    def matmul(self, plan: MatmulPlan) -> None:
        task, hw = plan.task, self.hw
        assert hw.cube is not None  # plan_tasks checked it
        fm, fn, fk = hw.cube.fractal
        n_spans, k_spans = plan.n_spans, plan.k_spans
        self.stores[task.out] = _StoreGrid(plan.m_spans, n_spans)
        first_core = self.next_core
        for bi, (m0, m1) in enumerate(plan.m_spans):
            for bj, (n0, n1) in enumerate(n_spans):
                b = bi * len(n_spans) + bj
                core = self.core_of(b, first_core)
                p = f"{task.id}.b{b}"
                pm, pn = _pad(m1 - m0, fm), _pad(n1 - n0, fn)
                l0c = self.item(f"{p}.l0c", "L0C", _FP32, (pm, pn))
                for s, (k0, k1) in enumerate(k_spans):
                    q = f"{p}.k{s}"
                    pk = _pad(k1 - k0, fk)
                    l1a = self.item(f"{q}.l1a", "L1", _FP16, (pm, pk))
                    l1b = self.item(f"{q}.l1b", "L1", _FP16, (pk, pn))
                    l0a = self.item(f"{q}.l0a", "L0A", _FP16, (pm, pk))
                    l0b = self.item(f"{q}.l0b", "L0B", _FP16, (pk, pn))
                    self.load(f"{q}.load_a", core, l1a, task.a, ((m0, m1), (k0, k1)))
                    if task.transpose_b:
                        self.load(f"{q}.load_b", core, l1b, task.b, ((n0, n1), (k0, k1)), transpose=True)
                    else:
                        self.load(f"{q}.load_b", core, l1b, task.b, ((k0, k1), (n0, n1)))
                    rows, cols, depth = m1 - m0, n1 - n0, k1 - k0
                    self.op(f"{q}.move_a", "move", core, (l1a,), (l0a,), {"rows": rows, "cols": depth})
                    self.op(f"{q}.move_b", "move", core, (l1b,), (l0b,), {"rows": depth, "cols": cols})
                    first = s == 0
                    self.op(
                        f"{q}.mmad",
                        "mmad",
                        core,
                        (l0a, l0b) if first else (l0a, l0b, l0c),
                        (l0c,),
                        {"m": rows, "n": cols, "k": depth, "init": first},
                    )
                ub = self.item(f"{p}.ub", "UB", _FP16, (pm, pn))
                operands: dict[int, str] = {}
                for i, step in enumerate(task.epilogue):
                    if not step.tensor:
                        continue
                    row = step.op == "bias"
                    operands[i] = self.item(f"{p}.e{i}.ub", "UB", _FP16, (1, pn) if row else (pm, pn))
                    region = ((0, 1), (n0, n1)) if row else ((m0, m1), (n0, n1))
                    self.load(f"{p}.e{i}.load", core, operands[i], step.tensor, region)
                extent = (m1 - m0, n1 - n0)
                drain = {"rows": extent[0], "cols": extent[1]}
                self.op(f"{p}.fixpipe", "fixpipe", core, (l0c,), (ub,), drain)
                for i, step in enumerate(task.epilogue):
                    self.vec(f"{p}.e{i}.{step.op}", core, ub, operands.get(i), step.op, step.value, extent)
                self.store(f"{p}.store", core, ub, task.out, ((m0, m1), (n0, n1)))
        self.next_core = self.core_of(plan.blocks, first_core)

    def elementwise(self, plan: ElementwisePlan) -> None:
        task = plan.task
        col_spans = plan.col_spans
        self.stores[task.out] = _StoreGrid(plan.row_spans, col_spans)
        first_core = self.next_core
        for ti, (r0, r1) in enumerate(plan.row_spans):
            for tj, (c0, c1) in enumerate(col_spans):
                t = ti * len(col_spans) + tj
                core = self.core_of(t, first_core)
                p = f"{task.id}.t{t}"
                tiles = []
                for j, name in enumerate(task.inputs):
                    row = task.op == "bias" and j == 1
                    tile = self.item(f"{p}.in{j}", "UB", _FP16, (1, c1 - c0) if row else (r1 - r0, c1 - c0))
                    region = ((0, 1), (c0, c1)) if row else ((r0, r1), (c0, c1))
                    self.load(f"{p}.load{j}", core, tile, name, region)
                    tiles.append(tile)
                self.vec(
                    f"{p}.{task.op}",
                    core,
                    tiles[0],
                    tiles[1] if len(tiles) > 1 else None,
                    task.op,
                    task.value,
                    (r1 - r0, c1 - c0),
                )
                self.store(f"{p}.store", core, tiles[0], task.out, ((r0, r1), (c0, c1)))
        self.next_core = self.core_of(plan.blocks, first_core)


def lower(tg: TaskGraph, hw: Hardware, *, op_budget: int | None = DEFAULT_OP_BUDGET) -> OpGraph:
    """Lower a task graph to micro-ops for ``hw``.

    Parameters
    ----------
    tg
        A valid task graph (from :func:`~staticsched.model.taskgraph.taskgraph_from_dict`).
    hw
        The hardware model; its cube fractal, capacities and cost model shape the result.
    op_budget
        Refuse, before building anything, when the op count computed from shapes and tilings
        exceeds this; ``None`` disables the limit.

    Returns
    -------
    OpGraph
        Items, ops in program order, every GM tensor declared 2-D, and ``source`` set to
        :func:`~staticsched.model.taskgraph.dumps_taskgraph` of ``tg``. It passes
        ``OpGraph.check(hw)``.

    Raises
    ------
    GraphError
        When ``hw`` cannot run a task or the op count exceeds ``op_budget``.
    TilingError
        When an explicit tiling does not fit or no tiling can be derived.
    """
    plans = plan_tasks(tg, hw)
    estimate = estimate_ops(plans)
    if op_budget is not None and estimate > op_budget:
        parts = ", ".join(f"'{p.task.id}' {p.blocks} blocks x {p.ops_per_block} ops" for p in plans)
        raise GraphError(
            f"lowering would create {estimate} ops ({parts}), over op_budget {op_budget}; "
            f"use larger tiles, a smaller problem, or raise op_budget"
        )
    em = _Emitter(hw)
    for plan in plans:
        if isinstance(plan, MatmulPlan):
            em.matmul(plan)
        else:
            em.elementwise(plan)
    tensors = [Tensor(t.name, t.shape2d, t.dtype) for t in tg.tensors]
    # items by name, as the OpGraph JSON form holds them, so that the graph round-trips equal
    items = sorted(em.items, key=lambda it: it.name)
    return OpGraph(items, em.ops, tensors, dumps_taskgraph(tg))


@attrs.frozen
class TilingInfo:
    """How one task was cut, for summaries and ``timetable.json``.

    ``base`` is ``(base_m, base_n, base_k)`` for a matmul and ``(rows, cols)`` of a tile for an
    elementwise task; ``derived`` is False when the task gave its tiling; ``per_core`` is the
    fewest and most blocks one core gets (blocks go round-robin).
    """

    task: str
    kind: str
    base: tuple[int, ...] = attrs.field(converter=tuple)
    buffers: int
    derived: bool
    blocks: int
    per_core: tuple[int, int] = attrs.field(converter=tuple)

    def text(self) -> str:
        size = "/".join(map(str, self.base)) if self.kind == "matmul" else "x".join(map(str, self.base))
        what = "base m/n/k" if self.kind == "matmul" else "tile rows x cols"
        lo, hi = self.per_core
        per = f"{lo}" if lo == hi else f"{lo}-{hi}"
        return (f"{self.task}: {self.kind} {what} {size} ({'derived' if self.derived else 'given'}), "
                f"{'double' if self.buffers == 2 else 'single'} buffered, {self.blocks} blocks, "
                f"{per} per core")

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "kind": self.kind,
            "base": list(self.base),
            "buffers": self.buffers,
            "derived": self.derived,
            "blocks": self.blocks,
            "blocks_per_core": list(self.per_core),
        }


def tiling_info(tg: TaskGraph, hw: Hardware) -> tuple[TilingInfo, ...]:
    """The tiling :func:`lower` uses for every task of ``tg`` on ``hw``, in dependency order."""
    out = []
    for plan in plan_tasks(tg, hw):
        lo, hi = plan.blocks // hw.cores, -(-plan.blocks // hw.cores)
        if isinstance(plan, MatmulPlan):
            t = plan.tiling
            out.append(TilingInfo(plan.task.id, "matmul", (t.base_m, t.base_n, t.base_k), t.buffers,
                                  plan.task.tiling is None, plan.blocks, (lo, hi)))
        else:
            t = plan.tiling
            out.append(TilingInfo(plan.task.id, "elementwise", (t.rows, t.cols), 2, True,
                                  plan.blocks, (lo, hi)))
    return tuple(out)
