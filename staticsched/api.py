"""The public entry points: ``schedule``, ``compile_graph`` (the CLI's whole pipeline) and
``Compiled.write`` (the output files)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from staticsched.errors import InputError, StaticschedError
from staticsched.model.hardware import Hardware, load_hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule
from staticsched.options import DEFAULT_OP_BUDGET, METHODS, MODES
from staticsched.progress import Progress, as_progress


@attrs.frozen
class Compiled:
    """Everything one run produces: the final schedule, the program and the sync plan, and
    how long each phase took (``timings``: ``(phase, seconds)`` in the order they ran)."""

    graph: OpGraph = attrs.field(repr=False)
    schedule: Schedule = attrs.field(repr=False)
    program: Program = attrs.field(repr=False)
    plan: Any = attrs.field(repr=False)
    timings: tuple[tuple[str, float], ...] = attrs.field(converter=tuple, default=(), repr=False)

    def write(
        self,
        outdir: str | Path,
        *,
        outputs: Sequence[str] | None = None,
        compress: bool | None = None,
        extra_files: Mapping[str, str | bytes] | None = None,
    ) -> list[Path]:
        """Write the output files (timetable, program, bundles, trace, Gantt) atomically.

        Parameters
        ----------
        outdir
            The directory (created if missing).
        outputs, compress
            Which files, and gzip for JSON: see :func:`staticsched.emit.choose_outputs`
            (default: all files; JSON compressed for programs over 50,000 ops).
        extra_files
            More files to write in the same atomic step.

        Returns
        -------
        list of Path
            The files written.
        """
        from staticsched.emit import write_outputs

        return write_outputs(outdir, self.schedule, self.program, self.plan, outputs=outputs,
                             compress=compress, extra_files=extra_files)


def as_opgraph(graph: Any, hw: Hardware, *, op_budget: int | None = DEFAULT_OP_BUDGET) -> OpGraph:
    """Turn a path, TaskGraph or OpGraph into a checked OpGraph (lowering a TaskGraph first)."""
    from staticsched.model.lowering import lower
    from staticsched.model.taskgraph import TaskGraph, load_graph

    where = ""
    if isinstance(graph, str | Path):
        where = str(graph)
        graph = load_graph(graph)
    if not isinstance(graph, TaskGraph | OpGraph):
        raise InputError(f"graph must be a TaskGraph, an OpGraph or a path, got {type(graph).__name__}")
    try:
        if isinstance(graph, TaskGraph):
            graph = lower(graph, hw, op_budget=op_budget)
        graph.check(hw)
    except StaticschedError as exc:
        if not where:
            raise
        raise _naming(exc, where) from None
    return graph


def _naming(exc: StaticschedError, where: str) -> StaticschedError:
    """``exc`` with every line naming the file it is about, as the loaders' own lines do."""
    return type(exc)([p if p.startswith(f"{where}: ") else f"{where}: {p}" for p in exc.problems])


def _option_problems(method: str, mode: str, time_limit: float, workers: int) -> list[str]:
    """One line per bad solver option."""
    out = []
    if method not in METHODS:
        out.append(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if mode not in MODES:
        out.append(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not (time_limit > 0):
        out.append(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if workers < 1:
        out.append(f"workers must be >= 1, got {workers}")
    return out


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
    progress: Progress | Callable[[str], None] | None = None,
    wall_clock: bool = False,
    link_policy: str = "auto",
) -> Compiled:
    """Lower, check, solve, plan sync and build the program.

    Parameters are those of :func:`schedule`; ``mode`` selects the program's form
    (``"flags"`` or ``"timed"``), ``progress`` receives the phases and progress lines (a
    :class:`staticsched.progress.Progress`, or a callable taking one line).
    """
    from staticsched.emit import finalize
    from staticsched.solver import solve

    bad = _option_problems(method, mode, time_limit, workers)
    if bad:
        raise InputError(bad)
    rep = as_progress(progress)
    done = len(rep.timings)
    with rep.phase("lower"):
        hw = load_hardware(hw)
        og = as_opgraph(graph, hw, op_budget=op_budget)
    with rep.phase("solve"):
        # without flags (timed mode) the event-id budgets constrain nothing
        raw = solve(og, hw, method=method, time_limit=time_limit, seed=seed, workers=workers,
                    progress=lambda line: rep.line(f"  {line}"), event_budgets=mode == "flags",
                    time_mode="wall" if wall_clock else "deterministic", link_policy=link_policy)
    final, program, plan = finalize(raw, mode=mode, progress=rep)
    return Compiled(og, final, program, plan, rep.timings[done:])


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


def tune(
    graph: Any,
    hw: Hardware | str | Path,
    *,
    method: str = "cpsat",
    time_limit: float = 10.0,
    max_candidates: int = 32,
    polish: int = 3,
    seed: int = 0,
    workers: int = 1,
    mode: str = "flags",
    op_budget: int | None = DEFAULT_OP_BUDGET,
    wall_clock: bool = False,
    link_policy: str = "auto",
    jobs: int = 1,
    ray: str | None = None,
    progress: Progress | Callable[[str], None] | None = None,
    steps: bool = False,
) -> Any:
    """Search the tilings of a task graph's tasks for the shortest schedule.

    Each tunable task (``matmul``; the other kinds keep their derived tiling) is tuned in turn,
    the others fixed at their best so far. Its legal tilings (base m/n/k in multiples of the
    Cube's fractal, double buffering, L1 reuse steps where the tiling has them) are visited in
    the order of their lower bound; the tiling the task already has is scheduled first. Each
    is scheduled with the list scheduler, and the search stops when the next bound reaches the
    best makespan (the rest are pruned: they cannot beat it) or after ``max_candidates``
    schedules. With ``method="cpsat"`` the ``polish`` best are then improved by CP-SAT. The
    details are in :mod:`staticsched.explore.tune`.

    Parameters
    ----------
    graph : TaskGraph, str or Path
        A TaskGraph or its path (an OpGraph has no tiling to choose).
    hw : Hardware, str or Path
        A hardware model, a preset name or a TOML path.
    method : {"cpsat", "list"}
        ``"list"``: the list schedules alone; ``"cpsat"``: then CP-SAT on the ``polish`` best.
    time_limit : float
        Seconds of CP-SAT search per polished candidate (as for :func:`schedule`).
    max_candidates : int
        At most this many candidates are list scheduled (the baseline included).
    polish : int
        How many of the best list schedules CP-SAT improves (``method="cpsat"``).
    seed, workers, mode, op_budget, wall_clock, link_policy
        As for :func:`schedule`, for every candidate.
    jobs : int
        Local worker processes scheduling candidates side by side (rounds of 4 candidates, so
        the result does not depend on ``jobs``).
    ray : str, optional
        Schedule candidates as Ray tasks: ``"auto"`` or a cluster address (needs the
        ``staticsched[ray]`` extra).
    progress : Progress or callable, optional
        Receives progress lines.
    steps : bool
        Also search the matmul's L1 reuse steps (``step_m``/``step_n`` in 1, 2, 4): up to 9
        times the tilings, and the cheap bound does not yet credit what reuse saves, so the
        search lowers many more candidates (minutes on a 1000x777 GEMM).

    Returns
    -------
    staticsched.explore.tune_report.Tuned
        ``best`` (a :class:`Compiled`), ``graph`` (the TaskGraph with the best tilings),
        ``rows`` (every candidate), ``csv_text()``, ``picture()``, ``write(outdir)``.

    Raises
    ------
    StaticschedError
        For bad input or options (``InputError``, one line per problem), or when no candidate
        can be scheduled.
    """
    from staticsched.explore.tune import TuneOptions, run_tune
    from staticsched.model.taskgraph import TaskGraph, load_graph

    bad = _option_problems(method, mode, time_limit, workers)
    counts = (("max_candidates", max_candidates, 1), ("polish", polish, 0), ("jobs", jobs, 1))
    for name, value, least in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            bad.append(f"{name} must be an integer >= {least}, got {value!r}")
    if bad:
        raise InputError(bad)
    rep = as_progress(progress)
    source = str(graph) if isinstance(graph, str | Path) else ""
    hw = load_hardware(hw)
    if isinstance(graph, str | Path):
        graph = load_graph(graph)
    if not isinstance(graph, TaskGraph):
        what = "an OpGraph" if isinstance(graph, OpGraph) else type(graph).__name__
        raise InputError(f"{source or 'graph'}: tune needs a TaskGraph, got {what} (no tiling to choose)")
    opts = TuneOptions(method=method, mode=mode, time_limit=time_limit, seed=seed, workers=workers,
                       wall_clock=wall_clock, link_policy=link_policy, op_budget=op_budget,
                       max_candidates=max_candidates, polish=polish, steps=steps)
    try:
        return run_tune(graph, hw, opts, compile_graph, jobs=jobs, ray_address=ray, progress=rep,
                        source=source)
    except StaticschedError as exc:
        if not source:
            raise
        raise _naming(exc, source) from None
