"""Build, hint and solve the CP-SAT model of one problem, within deterministic and wall limits.

Determinism: one search worker (or CP-SAT's interleaved search, which is deterministic for any
number of workers), a fixed ``random_seed``, the model built in a fixed order and a
``max_deterministic_time`` budget; under those the same problem gives the same answer. The
wall clock is then only a safety net: ``max_time_in_seconds`` plus a watchdog thread that calls
``stop_search`` a little later (CP-SAT can overrun its own time limit on large models). When
the wall clock is what ended the search, ``stop_reason`` says so and that the result is not
reproducible. Without a deterministic budget (wall-clock mode) the wall clock is the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import attrs
from ortools.sat.python import cp_model

from staticsched.solver.addresses import colour_slots
from staticsched.solver.budget import STOP_DETERMINISTIC, STOP_GAP, STOP_WALL_MODE, STOP_WALL_NET
from staticsched.solver.constraints import Constraints
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.memory import MEMORY
from staticsched.solver.hints import add_hints
from staticsched.solver.list_sched import Timetable
from staticsched.solver.objective import minimise_makespan
from staticsched.solver.paths import head_lengths, tail_lengths
from staticsched.solver.problem import Problem
from staticsched.solver.search import run_search
from staticsched.solver.variables import Variables

#: ``search`` values of :func:`solve_cpsat`
SEARCHES = ("lp", "interleave", "parallel")
#: CP-SAT subsolvers left out of the interleaved search (see :func:`solve_cpsat`)
IGNORED_SUBSOLVERS = ("reduced_costs",)


@attrs.frozen
class CpResult:
    """Outcome of one CP-SAT run.

    ``timetable`` is the best solution found (None if none); ``status`` is ``"optimal"``,
    ``"feasible"``, ``"unknown"`` (nothing found) or ``"infeasible"``; ``bound`` is CP-SAT's
    bound on *this model's* makespan.
    """

    timetable: Timetable | None
    status: str
    objective: int
    bound: int
    stop_reason: str
    wall: float
    det_time: float
    branches: int
    conflicts: int


def naive_horizon(prob: Problem) -> int:
    """A makespan every schedule without needless idling stays below: each start is the end
    (or, waiting for an event id, the start) of another op plus at most two latencies."""
    lat = max((lat for _, _, lat in prob.edges), default=0)
    return sum(prob.dur) + (prob.n + 1) * (2 * max(lat, prob.reuse_gap) + 1)


def build_model(
    prob: Problem,
    hint: Timetable | None,
    lower: int,
    *,
    release: Sequence[int] | None = None,
    deadline: Sequence[int] | None = None,
    objective_ops: Sequence[int] | None = None,
    fixed_offsets: dict[int, int] | None = None,
    use_hint: bool = True,
) -> tuple[cp_model.CpModel, Variables]:
    """The model of ``prob`` with makespan in ``[lower, hint.makespan]`` and a complete hint
    (without a hint: up to :func:`naive_horizon`, unhinted).

    ``release``/``deadline`` bound each op to ``[release, deadline - dur]`` (equal bounds fix
    it); ``objective_ops`` restricts the makespan to those ops (a window); ``fixed_offsets``
    pins item addresses in mixed spaces. With ``use_hint=False`` the timetable only bounds the
    horizon: its values are not hinted.
    """
    model = cp_model.CpModel()
    horizon = hint.makespan if hint is not None else naive_horizon(prob)
    if release is None:
        release = head_lengths(prob)
    if deadline is None:
        q = tail_lengths(prob)
        deadline = [horizon - q[i] + prob.dur[i] for i in range(prob.n)]
    variables = Variables(
        model,
        prob,
        horizon=horizon,
        release=release,
        deadline=deadline,
        fixed_offsets=fixed_offsets,
    )
    for family in FAMILIES:
        family.variables(variables)
    variables.add_makespan(min(lower, horizon))
    Constraints(model, prob, variables, objective_ops=objective_ops).add_all()
    minimise_makespan(model, variables)
    if hint is not None and use_hint:
        add_hints(model, variables, hint, objective_ops)
    return model, variables


class _OnSolution(cp_model.CpSolverSolutionCallback):
    """Reports each solution, and stops the search at the first one within ``target`` (the
    gap limit against the caller's lower bound: a deterministic search finds its solutions in
    the same order every time, so it stops at the same one)."""

    def __init__(self, report: Callable[[str], None] | None, label: str, target: int) -> None:
        super().__init__()
        self._report = report
        self._label = label
        self._target = target
        self.reached = False

    def on_solution_callback(self) -> None:
        if self._report is not None:
            self._report(
                f"{self._label}best makespan {int(self.objective_value)}, "
                f"bound {int(self.best_objective_bound)}, {self.wall_time:.1f} s"
            )
        if self.objective_value <= self._target:
            self.reached = True
            self.stop_search()


def solve_cpsat(
    prob: Problem,
    hint: Timetable | None,
    lower: int,
    *,
    det_limit: float,
    wall_limit: float,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    label: str = "",
    release: Sequence[int] | None = None,
    deadline: Sequence[int] | None = None,
    objective_ops: Sequence[int] | None = None,
    fixed_offsets: dict[int, int] | None = None,
    workers: int = 1,
    search: str = "interleave",
    use_hint: bool = True,
    strong: bool = False,
    on_start: Callable[[Callable[[], None]], None] | None = None,
    target: int = 0,
) -> CpResult:
    """Improve ``hint`` with CP-SAT, or search from scratch without one.

    Parameters
    ----------
    prob, hint, lower
        The problem, a model-feasible timetable (or None) and a lower bound on the makespan.
    det_limit
        Deterministic-time budget: what normally stops the search, reproducibly. ``inf``
        means wall-clock mode: ``wall_limit`` is then the limit, not a safety net.
    wall_limit
        Wall-clock seconds (``max_time_in_seconds`` plus a watchdog).
    seed
        CP-SAT's random seed.
    progress, label
        Called with ``label`` + best makespan, bound and elapsed time per solution.
    release, deadline, objective_ops, fixed_offsets
        See :func:`build_model` (windows of a larger schedule).
    workers
        CP-SAT workers (``"interleave"`` and ``"parallel"`` only).
    search
        ``"lp"``: one worker running CP-SAT's default search (LP relaxation, clause
        learning), deterministic. ``"interleave"``: CP-SAT's portfolio with
        ``interleave_search``, deterministic for any number of workers. ``"parallel"``: CP-SAT's
        ordinary parallel portfolio, fastest with several workers but not reproducible (for
        wall-clock mode).
    use_hint
        Hint every variable from ``hint`` (else ``hint`` only bounds the horizon).
    strong
        Stronger (costlier) propagation in the per-pipe no-overlap constraints
        (``use_strong_propagation_in_disjunctive``). Measured on job shops at 10 deterministic
        units, one worker: ta02 proven optimal (1244) in 31 CPU s instead of 1265 unproven
        after 43 s; ta05 1228 instead of 1245.
    on_start
        Called with a function that stops this search (another thread's way to end it).
    target
        Stop at the first solution whose makespan is at most this (the gap limit against the
        caller's lower bound, :func:`.budget.gap_target`); 0: never.

    Returns
    -------
    CpResult
        The best timetable (with valid addresses) or None, the status, objective and bound,
        and what stopped the search.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    model, variables = build_model(
        prob,
        hint,
        lower,
        release=release,
        deadline=deadline,
        objective_ops=objective_ops,
        fixed_offsets=fixed_offsets,
        use_hint=use_hint,
    )
    solver = cp_model.CpSolver()
    params = solver.parameters
    if search == "lp":
        params.num_workers = 1
    elif search == "interleave":
        params.num_workers = max(1, workers)
        params.interleave_search = True
        # a batch waits for its slowest task, and 'reduced_costs' can run for minutes on a
        # deterministic slice of 0.1 (measured: one task 1.9 min for 0.17 units on a 300-op
        # tile pipeline with 2 workers; without it the same run took 12 s for 1.3 units)
        params.ignore_subsolvers.extend(IGNORED_SUBSOLVERS)
    else:
        params.num_workers = max(1, workers)
    params.random_seed = seed
    params.use_strong_propagation_in_disjunctive = strong
    wall_mode = math.isinf(det_limit)
    if not wall_mode:
        params.max_deterministic_time = max(det_limit, 1e-3)
    params.max_time_in_seconds = max(wall_limit, 1e-3)
    t0 = time.monotonic()
    callback = _OnSolution(progress, label, target) if progress or target else None
    status, fired = run_search(solver, model, callback, wall_limit, on_start)
    wall = time.monotonic() - t0
    det = solver.response_proto.deterministic_time
    common = {
        "wall": wall,
        "det_time": det,
        "branches": solver.num_branches,
        "conflicts": solver.num_conflicts,
    }
    if status == cp_model.INFEASIBLE:
        return CpResult(None, "infeasible", 0, 0, "infeasible", **common)
    reason = STOP_WALL_MODE if wall_mode else _stop_reason(fired, det, params.max_deterministic_time)
    if callback is not None and callback.reached and status == cp_model.FEASIBLE:
        reason = STOP_GAP
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return CpResult(None, "unknown", 0, int(solver.best_objective_bound), reason, **common)
    starts = [solver.value(s) for s in variables.start]
    offsets = MEMORY.offsets(solver, variables)
    coloured = colour_slots(prob, starts, offsets)
    if coloured is None:  # cannot happen when the cumulative holds; refuse rather than guess
        return CpResult(None, "unknown", 0, 0, "colouring_failed", **common)
    objective = int(solver.objective_value)
    ends = (s + d for s, d in zip(starts, prob.dur, strict=True))
    tt = Timetable(starts, coloured, max(ends, default=0))
    if status == cp_model.OPTIMAL:
        return CpResult(tt, "optimal", objective, objective, "optimal", **common)
    return CpResult(tt, "feasible", objective, int(solver.best_objective_bound), reason, **common)


def _stop_reason(fired: bool, det: float, det_limit: float) -> str:
    """What ended an unproven search: only two limits exist, and CP-SAT stops on the
    deterministic one only once its counter has passed it."""
    if not fired and det >= 0.999 * det_limit:
        return STOP_DETERMINISTIC
    return STOP_WALL_NET
