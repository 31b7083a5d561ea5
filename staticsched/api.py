"""The public entry points: ``schedule``, ``compile_graph`` (the CLI's whole pipeline, in
:mod:`staticsched.pipeline`), ``tune`` (in :mod:`staticsched.explore.tune`) and
``Compiled.write`` (the output files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from staticsched.explore.tune import tune
from staticsched.model.hardware import Hardware
from staticsched.model.schedule import Schedule
from staticsched.pipeline import Compiled, as_opgraph, compile_graph

__all__ = ["Compiled", "as_opgraph", "compile_graph", "schedule", "tune"]


def schedule(graph: Any, hw: Hardware | str | Path, **options: Any) -> Schedule:
    """Schedule a task graph or op graph on a hardware model: :func:`compile_graph`'s
    schedule. The keyword options are :func:`compile_graph`'s, with its defaults.

    Parameters
    ----------
    graph : TaskGraph, OpGraph, str or Path
        A TaskGraph is lowered to micro-ops first; a path is loaded by its ``format`` field.
    hw : Hardware, str or Path
        A hardware model, a preset name (``"seed-davinci"``) or a TOML path.
    time_limit : float
        Seconds granted to the search (CP-SAT and the windowed LNS, building their models
        included); lowering, list scheduling, sync planning and building the program come on
        top. By default the search is bounded by deterministic work calibrated to fill about
        80% of ``time_limit`` on the reference machine, so results are reproducible on any
        machine. Only if the wall clock reaches 3 x ``time_limit`` + 30 s first (a machine far
        slower or busier than the reference) does a safety net stop the search; then
        ``stop_reason`` says ``not reproducible`` and the summary has an error line.
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
    link_policy : {"auto", "split"}
        How cores share a link of the hardware (``[[links]]``) they could overload together:
        ``"auto"`` solves them as one problem with the whole bandwidth unless an equal static
        split provably costs nothing; ``"split"`` always gives each core an equal share (a
        baseline to compare against).
    gap : float
        Stop the search as soon as the makespan is proven within this relative gap of the
        lower bound, ``(makespan - bound) / makespan <= gap`` (default 0.001, ``--gap``);
        ``stop_reason`` is then ``"gap_limit"``. Deterministic. 0 searches until the budget
        or a proof.

    Returns
    -------
    Schedule
        Timetable with item placements, sync events, makespan, lower bound and status.

    Raises
    ------
    StaticschedError
        For bad input (``InputError`` subclasses) or an infeasible problem (``InfeasibleError``).
    """
    return compile_graph(graph, hw, **options).schedule
