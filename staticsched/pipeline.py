"""The whole pipeline in one call: lower, solve, plan sync and build the program
(:func:`compile_graph`), and what it returns (:class:`Compiled`). The public entry points of
:mod:`staticsched.api` and the sweeps and tuner of :mod:`staticsched.explore` both call it, so
it sits below them. The solver and the emitter are imported when first called, so that
``import staticsched`` and the CLI's argument errors do not wait for OR-Tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from staticsched._gc import paused
from staticsched.errors import InputError, StaticschedError
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule
from staticsched.options import DEFAULT_GAP, DEFAULT_OP_BUDGET, option_problems
from staticsched.progress import Progress, as_progress

if TYPE_CHECKING:  # the emitter is imported when first called (see the module docstring)
    from staticsched.emit.files import PendingOutputs


@attrs.frozen
class Compiled:
    """Everything one run produces: the final schedule, the program and the sync plan, and
    how long each phase took (``timings``: ``(phase, seconds)`` in the order they ran)."""

    graph: OpGraph = attrs.field(repr=False)
    schedule: Schedule = attrs.field(repr=False)
    program: Program = attrs.field(repr=False)
    plan: Any = attrs.field(repr=False)
    timings: tuple[tuple[str, float], ...] = attrs.field(converter=tuple, default=(), repr=False)
    #: the program's nominal replay (:class:`staticsched.emit.nominal.Replayed`): its cycles
    replayed: Any = attrs.field(default=None, repr=False, eq=False)

    def explain(self) -> Any:
        """Where the time goes between the lower bound and the makespan: the bound's binding
        term, the critical path of the program's replay with each wait's cause, and each
        pipe's idle time per core type (:class:`staticsched.emit.explain.Explanation`)."""
        import json

        from staticsched.emit.explain import explain
        from staticsched.emit.nominal import replay

        played = self.replayed if self.replayed is not None else replay(self.schedule, self.plan)
        source = self.schedule.graph.source
        tasks = [t.get("id", "") for t in json.loads(source).get("tasks", [])] if source else []
        return explain(self.schedule, self.plan, played.cycles, played.ends, tasks)

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
        return self.start_write(outdir, outputs=outputs, compress=compress,
                                extra_files=extra_files).finish()

    def start_write(
        self,
        outdir: str | Path,
        *,
        outputs: Sequence[str] | None = None,
        compress: bool | None = None,
        extra_files: Mapping[str, str | bytes] | None = None,
        processes: int | None = None,
        nice: int = 0,
    ) -> PendingOutputs:
        """:meth:`write`, started: a large program's files render in forked workers (at most
        ``processes``, their niceness raised by ``nice``) while the caller goes on; the
        result's ``finish()`` moves them into place and returns the paths
        (:func:`staticsched.emit.start_outputs`)."""
        from staticsched.emit import start_outputs

        return start_outputs(outdir, self.schedule, self.program, self.plan, outputs=outputs,
                             compress=compress, extra_files=extra_files, processes=processes,
                             nice=nice)


def as_opgraph(graph: Any, hw: Hardware, *, op_budget: int | None = DEFAULT_OP_BUDGET) -> OpGraph:
    """Turn a path, TaskGraph or OpGraph into a checked OpGraph (lowering a TaskGraph first)."""
    from staticsched.frontend.lowering import lower
    from staticsched.frontend.taskgraph import TaskGraph, load_graph

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
        raise naming(exc, where) from None
    return graph


def naming(exc: StaticschedError, where: str) -> StaticschedError:
    """``exc`` with every line naming the file it is about, as the loaders' own lines do."""
    return type(exc)([p if p.startswith(f"{where}: ") else f"{where}: {p}" for p in exc.problems])


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
    gap: float = DEFAULT_GAP,
    on_solved: Callable[[OpGraph], Any] | None = None,
    on_final: Callable[[Schedule, Any], Any] | None = None,
) -> Compiled:
    """Lower, check, solve, plan sync and build the program.

    Parameters are those of :func:`schedule`; ``mode`` selects the program's form
    (``"flags"`` or ``"timed"``), ``progress`` receives the phases and progress lines (a
    :class:`staticsched.progress.Progress`, or a callable taking one line). ``on_solved`` is
    called with the checked graph once the solver is done, before plan sync: work that needs
    nothing else can start there, beside sync planning and program building, which use one
    CPU (the CLI starts the verifier's NumPy reference). ``on_final`` is called with the final
    schedule and the sync plan before the program is built (:func:`staticsched.emit.finalize`;
    the CLI starts rendering the files that need no program).
    """
    bad = option_problems(method=method, mode=mode, time_limit=time_limit, workers=workers, gap=gap)
    if bad:
        raise InputError(bad)
    from staticsched.solver import solve

    rep = as_progress(progress)
    done = len(rep.timings)
    with paused():
        with rep.phase("lower"):
            hw = load_hardware(hw)
            og = as_opgraph(graph, hw, op_budget=op_budget)
        with rep.phase("solve"):
            # without flags (timed mode) the event-id budgets constrain nothing
            cands: list[tuple[str, Schedule]] = []
            solve(og, hw, method=method, time_limit=time_limit, seed=seed, workers=workers,
                  progress=lambda line: rep.line(f"  {line}"), event_budgets=mode == "flags",
                  time_mode="wall" if wall_clock else "deterministic", link_policy=link_policy,
                  gap=gap, on_candidates=cands.extend)
        if on_solved is not None:
            on_solved(og)
        final, program, plan, played = _finalized(cands, mode, rep, on_final)
    return Compiled(og, final, program, plan, rep.timings[done:], played)


def _finalized(cands: Sequence[tuple[str, Schedule]], mode: str, rep: Progress,
               on_final: Callable[[Schedule, Any], Any] | None) -> tuple[Schedule, Program, Any, Any]:
    """The program of the solver's timetable, the first of ``cands``; or, when the sync
    planner runs short of event ids on it and falls back to the baton, whichever candidate's
    program runs fastest (ties: the solver's order). The solver counts flag lifetimes in time,
    a relaxation of the planner's need that an id's WAIT be ordered before its next SET, so
    one timetable can run short where another does not; a baton program runs above its plan
    (bert_wide_layer on seed-davinci: the coupled search's program 75,225, the equal split's
    70,143)."""
    from staticsched.emit.build import finalize_replayed, planned_flags
    from staticsched.progress import silent

    name, raw = cands[0]
    if mode != "flags" or len(cands) == 1:
        return finalize_replayed(raw, mode=mode, progress=rep, on_final=on_final)
    plan = planned_flags(raw, rep)
    if not plan.stats.fallback:
        return finalize_replayed(raw, mode=mode, progress=rep, on_final=on_final, plan=plan)
    with rep.phase("compare programs"):
        built = [finalize_replayed(raw, mode=mode, plan=plan)]
        built += [finalize_replayed(sch, mode=mode, progress=silent()) for _, sch in cands[1:]]
        spans = [b[0].makespan for b in built]
        k = min(range(len(built)), key=lambda i: (spans[i], i))
        listed = ", ".join(f"{n} {m}{' (baton)' if b[2].stats.fallback else ''}"
                           for (n, _), m, b in zip(cands, spans, built, strict=True))
        line = (f"the {name}'s flags ran short of event ids; programs compared: {listed}; "
                f"kept the {cands[k][0]}")
        rep.line(f"  links: {line}")
    final, program, plan, played = built[k]
    stats = dict(final.stats)
    stats["links"] = f"{stats['links']}; {line}" if stats.get("links") else line
    final = attrs.evolve(final, stats=stats)
    if on_final is not None:
        on_final(final, plan)
    return final, program, plan, played
