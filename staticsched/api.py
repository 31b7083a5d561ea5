"""The public entry points: ``schedule`` (and ``compile_graph`` for the CLI's full pipeline)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from staticsched.errors import InfeasibleError, InputError
from staticsched.model.hardware import Hardware, load_hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule

METHODS = ("cpsat", "list")
MODES = ("flags", "timed")
DEFAULT_OP_BUDGET = 2_000_000


@attrs.frozen
class Compiled:
    """Everything one run produces: the final schedule, the program and the sync plan."""

    graph: OpGraph = attrs.field(repr=False)
    schedule: Schedule = attrs.field(repr=False)
    program: Program = attrs.field(repr=False)
    plan: Any = attrs.field(repr=False)


def as_opgraph(graph: Any, hw: Hardware, *, op_budget: int | None = DEFAULT_OP_BUDGET) -> OpGraph:
    """Turn a path, TaskGraph or OpGraph into a checked OpGraph (lowering a TaskGraph first)."""
    from staticsched.model.lowering import lower
    from staticsched.model.taskgraph import TaskGraph, load_graph

    if isinstance(graph, str | Path):
        graph = load_graph(graph)
    if isinstance(graph, TaskGraph):
        graph = lower(graph, hw, op_budget=op_budget)
    if not isinstance(graph, OpGraph):
        raise InputError(f"graph must be a TaskGraph, an OpGraph or a path, got {type(graph).__name__}")
    graph.check(hw)
    return graph


def compile_graph(
    graph: Any,
    hw: Hardware | str | Path,
    *,
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    method: str = "cpsat",
    mode: str = "flags",
    op_budget: int | None = DEFAULT_OP_BUDGET,
    progress: Callable[[str], None] | None = None,
    wall_clock: bool = False,
) -> Compiled:
    """Lower, check, solve, plan sync and build the program.

    Parameters are those of :func:`schedule`; ``mode`` selects the program's form
    (``"flags"`` or ``"timed"``).
    """
    from staticsched.emit import finalize
    from staticsched.solver import solve

    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not (time_limit > 0):
        raise InputError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    hw = load_hardware(hw)
    og = as_opgraph(graph, hw, op_budget=op_budget)
    try:
        raw = solve(og, hw, method=method, time_limit=time_limit, seed=seed, workers=workers,
                    progress=progress, time_mode="wall" if wall_clock else "deterministic")
        final, program, plan = finalize(raw, mode=mode)
    except InfeasibleError as exc:
        if not _is_event_budget(exc):
            raise
        if progress is not None:
            progress("event-id budget too tight for the solver's pipe orders: "
                     "falling back to a schedule serialised per core (one id per pipe pair "
                     "always suffices)")
        final, program, plan = _serialised(og, hw, mode=mode, seed=seed, reason=exc)
    return Compiled(og, final, program, plan)


def _is_event_budget(exc: InfeasibleError) -> bool:
    text = str(exc)
    return "event id" in text or "event_ids" in text


def serialise(graph: OpGraph) -> OpGraph:
    """``graph`` with an explicit dependency from each op to the next op of the same core in
    list order. The list order is a valid sequential program, so this is always acyclic."""
    last: dict[int, str] = {}
    ops = []
    for op in graph.ops:
        prev = last.get(op.core)
        if prev is not None and prev not in op.deps:
            op = attrs.evolve(op, deps=(*op.deps, prev))
        ops.append(op)
        last[op.core] = op.id
    return attrs.evolve(graph, ops=ops)


def _serialised(graph: OpGraph, hw: Hardware, *, mode: str, seed: int, reason: Exception):
    """Fallback when the event-id budget defeats the solver or the sync planner.

    With every core serialised, each cross-pipe dependency is implied by a flag between
    consecutive ops, and a flag's SET always happens-after the previous WAIT on its pipe pair,
    so one id per pair suffices. The solver runs with the id budget lifted (the serial chain
    keeps lifetimes disjoint anyway); the planner then assigns ids against the real budget.
    """
    from staticsched.emit import finalize
    from staticsched.solver import solve

    roomy = attrs.evolve(
        hw, sync=attrs.evolve(hw.sync, event_ids=64, cross_core_event_ids=1024)
    )
    raw = solve(serialise(graph), roomy, method="list", seed=seed)
    stats = dict(raw.stats)
    stats["fallback"] = "serialised per core: " + str(reason).splitlines()[0]
    raw = attrs.evolve(raw, hw=hw, status="heuristic", stop_reason="serialised_fallback",
                       stats=stats)
    final, program, plan = finalize(raw, mode=mode)
    return attrs.evolve(final, graph=graph), program, plan


def schedule(
    graph: Any,
    hw: Hardware | str | Path,
    *,
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    method: str = "cpsat",
    mode: str = "flags",
    op_budget: int | None = DEFAULT_OP_BUDGET,
    wall_clock: bool = False,
) -> Schedule:
    """Schedule a task graph or op graph on a hardware model.

    Parameters
    ----------
    graph : TaskGraph, OpGraph, str or Path
        A TaskGraph is lowered to micro-ops first; a path is loaded by its ``format`` field.
    hw : Hardware, str or Path
        A hardware model, a preset name (``"seed-davinci"``) or a TOML path.
    time_limit : float
        Seconds granted to the search (CP-SAT and the windowed LNS, building their models
        included); lowering, list scheduling, sync planning and building the program come on
        top. A run that does not prove optimality searches for most of it and never longer.
        By default the search is bounded by deterministic work calibrated to fill about 80%
        of ``time_limit`` on the reference machine, so results are reproducible; if the
        machine is slower or busy and the wall clock reaches ``time_limit`` first, the search
        stops there and ``stop_reason`` says ``not reproducible``.
    seed : int
        Random seed of the search; same inputs, seed and workers give identical results
        (unless ``wall_clock``).
    workers : int
        CP-SAT workers per problem (its deterministic interleaved search) and, when the graph
        splits into several distinct per-core problems, processes solving them side by side.
        Different worker counts may give different (equally reproducible) schedules.
    method : {"cpsat", "list"}
        CP-SAT (warm-started from the list schedule) or the list scheduler alone.
    mode : {"flags", "timed"}
        Program form used when planning sync.
    op_budget : int or None
        Refuse TaskGraphs whose lowering would exceed this many ops.
    wall_clock : bool
        Search until the wall clock reaches ``time_limit`` (all of it, with CP-SAT's fastest,
        non-deterministic parallel search when ``workers > 1``). The result is not
        reproducible and its ``stop_reason`` says so.

    Returns
    -------
    Schedule
        Timetable with item placements, sync events, makespan, lower bound and status.

    Raises
    ------
    StaticschedError
        For bad input (``InputError`` subclasses) or an infeasible problem (``InfeasibleError``).
    """
    return compile_graph(
        graph, hw, time_limit=time_limit, seed=seed, workers=workers, method=method, mode=mode,
        op_budget=op_budget, wall_clock=wall_clock,
    ).schedule
