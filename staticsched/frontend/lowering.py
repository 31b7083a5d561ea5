"""Lowering a TaskGraph to an OpGraph of tile micro-ops (DESIGN §4).

Each task kind (:mod:`staticsched.tasks`) cuts its task into blocks and lowers them; this
module checks that the hardware can run every task, collects the plans (tilings), refuses
lowerings over the op budget before building anything, and runs the kinds' lowerings in
dependency order through one :class:`~staticsched.tasks.builder.Builder`.

Blocks go to cores **round-robin in block order**, the rotation continuing from one task to
the next so that small tasks do not all start on core 0. The op list is the program order:
ops are emitted task by task, block by block. Every tile is its own item, so item accesses
order everything inside a block; explicit ``deps`` only join tasks: a ``load`` depends on
exactly the producer ``store`` ops whose GM regions intersect the region it reads.

Tails are smaller blocks. Items the Cube touches and the tiles FixPipe drains into are padded
up to the cube fractal (their bytes, for capacity and the Cube's cost); every op states its
real extent and works on exactly that (see :mod:`staticsched.model.opkinds`), so nothing reads
the padding.
"""

from __future__ import annotations

from collections.abc import Sequence

from staticsched._fields import Problems
from staticsched.errors import GraphError, TilingError
from staticsched.frontend.taskgraph import TaskGraph, dumps_taskgraph
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph, Tensor
from staticsched.options import DEFAULT_OP_BUDGET
from staticsched.tasks import kind_of
from staticsched.tasks.base import Plan, TilingInfo
from staticsched.tasks.builder import Builder

__all__ = ["TilingInfo", "estimate_ops", "lower", "plan_tasks", "tiling_info"]


def plan_tasks(tg: TaskGraph, hw: Hardware) -> tuple[Plan, ...]:
    """Tiling and block grid of every task, in dependency order.

    Explicit tilings are checked, missing ones derived (each by its kind).

    Raises
    ------
    GraphError
        When ``hw`` lacks a space, transfer path or unit the tasks need.
    TilingError
        For every task whose tiling does not fit, all at once.
    """
    missing = [line for task in tg.ordered_tasks for line in kind_of(task).needs(task, hw)]
    if missing:
        raise GraphError(missing)
    pr = Problems()
    plans: list[Plan] = []
    for task in tg.ordered_tasks:
        try:
            plans.append(kind_of(task).plan(task, hw))
        except TilingError as exc:
            for line in exc.problems:
                pr.add(line)
    pr.raise_if_any(TilingError)
    return tuple(plans)


def placements(tg: TaskGraph, hw: Hardware) -> dict[str, str]:
    """Tensors placed outside the hardware's global space (TaskGraph ``space``), by name.

    Raises
    ------
    GraphError
        One line per tensor whose space the hardware lacks or that is on-chip (bounded): a
        placement chooses which global memory a tensor's traffic uses, never an on-chip buffer.
    """
    glob = hw.role_space("global")
    lines, out = [], {}
    for t in tg.tensors:
        if not t.space or t.space == glob:
            continue
        if not hw.has_space(t.space):
            names = ", ".join(s.name for s in hw.spaces if s.capacity <= 0)
            lines.append(f"tensor '{t.name}': space '{t.space}' is not a space of hardware '{hw.name}' "
                         f"(global spaces: {names})")
        elif hw.space(t.space).capacity > 0:
            lines.append(f"tensor '{t.name}': space '{t.space}' is on-chip ({hw.space(t.space).capacity} B); "
                         f"a tensor lives in an unbounded global space")
        else:
            out[t.name] = t.space
    if lines:
        raise GraphError(lines)
    return out


def estimate_ops(plans: Sequence[Plan]) -> int:
    """Number of ops :func:`lower` emits for ``plans`` (from shapes and tilings, no ops built)."""
    return sum(p.op_count for p in plans)


def lower(tg: TaskGraph, hw: Hardware, *, op_budget: int | None = DEFAULT_OP_BUDGET) -> OpGraph:
    """Lower a task graph to micro-ops for ``hw``.

    Parameters
    ----------
    tg
        A valid task graph (from :func:`~staticsched.frontend.taskgraph.taskgraph_from_dict`).
    hw
        The hardware model; its roles, cube fractal, capacities and cost model shape the result.
    op_budget
        Refuse, before building anything, when the op count computed from shapes and tilings
        exceeds this; ``None`` disables the limit.

    Returns
    -------
    OpGraph
        Items, ops in program order, every GM tensor declared 2-D, and ``source`` set to
        :func:`~staticsched.frontend.taskgraph.dumps_taskgraph` of ``tg``. It passes
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
        parts = ", ".join(f"'{p.task.id}' {p.blocks} blocks x {p.op_count // max(1, p.blocks)} ops"
                          for p in plans)
        raise GraphError(
            f"lowering would create {estimate} ops ({parts}), over op_budget {op_budget}; "
            f"use larger tiles, a smaller problem, or raise op_budget"
        )
    em = Builder(hw)
    em.placement = placements(tg, hw)
    for t in tg.tensors:
        em.declare(t.name, t.layout, t.shape2d[1])
    for plan in plans:
        plan.lower(em)
    if em.problems:
        raise GraphError([em.problems[key] for key in sorted(em.problems)])
    tensors = [Tensor(t.name, t.shape2d, t.dtype, layout=t.layout) for t in tg.tensors] + em.workspaces
    # items by name, as the OpGraph JSON form holds them, so that the graph round-trips equal
    items = sorted(em.items, key=lambda it: it.name)
    return OpGraph(items, em.ops, tensors, dumps_taskgraph(tg))


def tiling_info(tg: TaskGraph, hw: Hardware) -> tuple[TilingInfo, ...]:
    """The tiling :func:`lower` uses for every task of ``tg`` on ``hw``, in dependency order."""
    return tuple(plan.info(hw) for plan in plan_tasks(tg, hw))
