"""Solving one problem (a core group, in its local index space): the list schedule, then
CP-SAT on the whole model or the windowed LNS, normalised, with what the search spent
(:class:`SubResult`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from staticsched.solver.bounds import lower_bound
from staticsched.solver.budget import (
    STOP_GAP,
    STOP_LNS_SHORT,
    STOP_MODEL_OPTIMAL,
    STOP_OPTIMAL,
    STOP_WALL_MODE,
    STOP_WALL_NET,
    Clock,
    Shape,
    gap_target,
)
from staticsched.solver.families.links import fix_rates, rates_of
from staticsched.solver.feasibility import model_violations
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.lns import covers_one_pass, improve_lns
from staticsched.solver.normalize import semi_active
from staticsched.solver.portfolio import plan, solve_whole
from staticsched.solver.problem import Problem, relax_flag_slots
from staticsched.solver.rescue import unstick

RANK = {"optimal": 0, "feasible": 1, "heuristic": 2}
#: whether a transfer holds its rate on a link from its start rather than from the end of its
#: overhead: never -- no flag reserves bandwidth (flags programs have no link-order flags; the
#: hardware shares the links) and a timed program keeps the order by exact cycles
HOLDS = False


@attrs.frozen
class SubResult:
    """The solution of one problem (local indices), or ``stuck`` when none was found.

    ``exact`` says whether the solver's model of the problem is exactly the user's problem
    (see :func:`model_is_exact`): only then is a CP-SAT proof an optimality proof. ``spent``
    is the calibrated seconds the search used (:mod:`.budget`).
    """

    starts: tuple[int, ...] = attrs.field(converter=tuple)
    offsets: tuple[int, ...] = attrs.field(converter=tuple)
    makespan: int
    lower: int
    bound_source: str
    status: str
    stop_reason: str
    list_makespan: int
    cpsat_makespan: int = -1
    cpsat_status: str = ""
    cpsat_bound: int = -1
    stuck: Stuck | None = None
    seconds: float = 0.0
    #: the event-id budgets were dropped because the list scheduler got stuck on them
    relaxed: bool = False
    exact: bool = True
    spent: float = 0.0
    det_time: float = 0.0
    search_seconds: float = 0.0
    #: per local op: the rate a transfer on a shared link runs at (empty: no link) and every
    #: op's duration at it
    rates: tuple[int, ...] = attrs.field(converter=tuple, default=())
    durs: tuple[int, ...] = attrs.field(converter=tuple, default=())


def model_is_exact(prob: Problem) -> bool:
    """Is the solver's model of ``prob`` exactly the user's problem, so that a CP-SAT proof is
    an optimality proof?

    Four parts of the model are stricter than the execution model and make it a restriction:
    binding event-id pools, whose flag tokens over-count the flags the sync planner keeps
    (counting every possible flag, and without the reachability refinement above
    :data:`.tokens.REACH_LIMIT` ops); transfers on shared links, whose rates are fixed; flag
    slots (a space cut to ``event_ids`` slots, :func:`~.decompose.build_problems`); and, with a
    non-zero flag latency, the gap of ``reuse_gap`` cycles between items sharing bytes, which
    a reuse on the same pipe does not need. Capacity and addresses are otherwise exact (uniform
    spaces: slots at multiples of the footprint lose nothing; mixed spaces: every aligned offset
    is a choice).
    """
    if any(b.binding for b in prob.budgets):
        return False
    if prob.xfers:
        return False  # the transfers' rates are fixed (by the list schedule): a restriction
    if any(sp.capped for sp in prob.spaces):
        return False  # fewer slots than the space holds: a restriction of the user's problem
    return not (prob.reuse_gap > 0 and any(sp.binding for sp in prob.spaces))


def solve_problem(
    prob: Problem,
    method: str,
    clock: Clock,
    seed: int,
    label: str = "",
    progress: Callable[[str], None] | None = None,
    start: Timetable | None = None,
    *,
    gap: float = 0.0,
) -> SubResult:
    """List-schedule one problem, improve it by the phases of its plan, and normalise the best.

    ``clock`` grants the search its seconds, mode, wall-clock deadline and CP-SAT workers.
    ``start``, a feasible timetable (with its transfers' rates), replaces the list schedule
    when it is shorter. Transfers on shared links get their rates from the list schedule (or
    ``start``); the search then keeps them fixed.
    """
    t0 = time.monotonic()
    shape = Shape.of(prob)
    exact = model_is_exact(prob)
    bound = lower_bound(prob)
    # the gap limit stops the list scheduler's variants too: once one is within it, the others
    # could gain less than the gap (gap 0: only a variant at the bound stops them)
    target = gap_target(bound.value, gap)
    found = list_schedule(prob, enough=target)
    if isinstance(found, Stuck) and any(sp.capped for sp in prob.spaces):
        # the flag slots left some op no room: the spaces' full capacity (the sync planner
        # then fits the ids, with credits or the baton)
        prob = relax_flag_slots(prob)
        exact = model_is_exact(prob)
        found = list_schedule(prob, enough=target)
    if start is not None and (isinstance(found, Stuck) or start.makespan < found.makespan):
        # a start from another problem (a static split's timetable for the chip's) may break
        # this one's event-id pools: the search would keep the breach in every window it
        # does not reopen and its result would be dropped, so only a start this model accepts
        broken = model_violations(prob, start.starts, start.offsets)
        if not broken:
            found = start
        elif progress is not None:
            progress(f"{label}the start timetable breaks this problem ({broken[0]}); "
                     "searching from its own list schedule")
    relaxed, rescue = False, None
    # the search starts here: the time limit bounds what follows, up to normalisation
    t_search = time.monotonic()
    clock = clock.start()
    if isinstance(found, Stuck):
        rescue = unstick(prob, found, bound.value, clock, seed, target)
        if isinstance(rescue.found, Stuck):
            return SubResult((), (), 0, bound.value, bound.source, "heuristic", "list", 0,
                             stuck=rescue.found, spent=rescue.spent, det_time=rescue.det_time)
        # a relaxed problem keeps ``exact`` as it was: its proofs are not the user's
        found, prob, relaxed = rescue.found, rescue.prob, rescue.relaxed
    prob = fix_rates(prob, found.rates)
    listed = semi_active(prob, found.starts, found.offsets)
    list_ms = _makespan(prob, listed)
    best, offsets, best_ms = listed, found.offsets, list_ms
    status = "optimal" if list_ms <= bound.value else "heuristic"
    stop = STOP_OPTIMAL if status == "optimal" else "list"
    # the search stops once an incumbent is proven within the gap of the bound
    if method == "cpsat" and status != "optimal" and list_ms <= target:
        stop = STOP_GAP
    cp_ms, cp_status, cp_bound = -1, "", -1
    # what the rescue spent is the search's: the phases get what it left
    spent = rescue.spent if rescue is not None else 0.0
    det_used = rescue.det_time if rescue is not None else 0.0
    if progress is not None:
        progress(f"{label}list makespan {list_ms}, lower bound {bound.value}")
    if method == "cpsat" and status != "optimal" and stop != STOP_GAP:
        phases = plan(shape)
        left = max(0.0, clock.seconds - spent)
        start, stops, proven, objective = found, [], None, -1
        for k, phase in enumerate(phases):
            # a phase gets its share of what the earlier phases left
            grant = left * phase.share / sum(p.share for p in phases[k:])
            t_phase = time.monotonic()
            if phase.kind == "whole":
                cp, used = solve_whole(
                    prob, start, bound.value, clock, grant, phase.hinted, seed, progress, label,
                    target=target,
                )
                det_used += cp.det_time
                stops.append(cp.stop_reason)
                cp_status, cp_bound, objective = cp.status, cp.bound, cp.objective
                if cp.timetable is not None:
                    proven = cp.timetable if cp.status == "optimal" else None
                    if cp.timetable.makespan <= start.makespan:
                        start = cp.timetable
            elif clock.deterministic and not covers_one_pass(prob.n, grant, clock.workers):
                if progress is not None:
                    progress(f"{label}no LNS: {grant:.1f} s cannot pay for one pass of windows over "
                             f"{prob.n} ops; the list schedule stands")
                stops.append(STOP_LNS_SHORT)
                continue
            else:
                lns = improve_lns(
                    prob, _left_justified(prob, start), seconds=grant, clock=clock, seed=seed,
                    progress=progress, label=label, target=target,
                )
                used = lns.spent
                stops.append(lns.stop_reason)
                start, cp_status = lns.timetable, cp_status or "feasible"
            used = used if clock.deterministic else time.monotonic() - t_phase
            spent += used
            left = max(0.0, left - used)
            if proven is not None or clock.expired():
                break
            if start.makespan <= target:
                stops.append(STOP_GAP)
                break
        broken = model_violations(prob, start.starts, start.offsets) if start is not found else []
        if broken:
            # a search bug: its timetable cannot be normalised; the list schedule stands
            if progress is not None:
                progress(f"{label}the search's timetable breaks the model ({broken[0]}); "
                         "kept the list schedule")
        elif start is not found:
            norm = semi_active(prob, start.starts, start.offsets)
            cp_ms = _makespan(prob, norm)
            if cp_ms <= best_ms:
                best, offsets, best_ms = norm, start.offsets, cp_ms
        # "feasible": the result went through CP-SAT (a solution or LNS windows), unproven
        searched = any(p.kind == "lns" for p in phases) and STOP_LNS_SHORT not in stops
        status = "feasible" if start is not found or searched else status
        model_optimal = proven is start and cp_ms == objective
        if best_ms <= bound.value or (model_optimal and exact):
            status, stop = "optimal", STOP_OPTIMAL
        elif model_optimal:
            status, stop = "feasible", STOP_MODEL_OPTIMAL
        else:
            stop = _worst(stops) if stops else stop
    if rescue is not None and rescue.stop_reason in (STOP_WALL_MODE, STOP_WALL_NET) and stop != STOP_OPTIMAL:
        stop = rescue.stop_reason  # the start itself depended on the wall clock
    return SubResult(
        best,
        offsets,
        best_ms,
        bound.value,
        bound.source,
        status,
        stop,
        list_ms,
        cp_ms,
        cp_status,
        cp_bound,
        seconds=time.monotonic() - t0,
        relaxed=relaxed,
        exact=exact,
        spent=spent,
        det_time=det_used,
        search_seconds=time.monotonic() - t_search,
        rates=rates_of(prob),
        durs=prob.dur,
    )


def _left_justified(prob: Problem, tt: Timetable) -> Timetable:
    """``tt`` normalised (:func:`.normalize.semi_active`) when that keeps the model (flag
    lifetimes may grow), else ``tt``. LNS windows end by their old end and keep the hinted
    starts of ops that do not decide it, so windows over a timetable with needless idling
    (the list scheduler's, CP-SAT's) gain less: on examples/attention.json (one core, 5,712
    ops, 60 s) 344,756 cycles from the list timetable, 344,429 from its normalisation, list
    schedule 345,230."""
    starts = semi_active(prob, tt.starts, tt.offsets)
    if model_violations(prob, starts, tt.offsets):
        return tt
    return attrs.evolve(tt, starts=starts, makespan=_makespan(prob, starts))


def _worst(stops: list[str]) -> str:
    """The stop reason to report for several searches: a wall-clock stop taints the result
    (not reproducible); otherwise the last search's reason."""
    for reason in (STOP_WALL_MODE, STOP_WALL_NET):
        if reason in stops:
            return reason
    return stops[-1]


def _makespan(prob: Problem, starts: list[int] | tuple[int, ...]) -> int:
    return max((s + d for s, d in zip(starts, prob.dur, strict=True)), default=0)
