"""What follows a stuck list schedule: the relaxed list schedule and CP-SAT's rescue.

The list scheduler can get stuck where a schedule exists: on event ids (its flag lifetimes
are stricter than the program, whose sync planner can delay SETs) or on memory. Two ways on:

* **Relax** (any kind but memory): the same problem without binding event-id pools, which
  the list scheduler always gets through when memory does not hold it; the sync planner then
  makes the ids fit (credits, the baton). Cheap: one more list schedule.
* **Rescue** (problems of at most :data:`~.portfolio.FULL_LIMIT` ops): CP-SAT on the problem
  as it is, which finds a schedule that keeps the budgets or proves that none does.

The rescue is kept when it is no longer than the relaxed list schedule (it keeps the budgets,
so its program runs as timetabled). With a relaxed schedule behind it, the rescue is an
improvement: it is hinted by that schedule, stops at its first schedule no longer than it and
spends at most :data:`RESCUE_SHARE` of the problem's seconds. Without one it is the only way
to a schedule: unhinted, stopping at its first schedule, with all of the seconds. Either way
its time is charged to the problem's search (the phases get what it left), and a
deterministic budget ends it, so the result is reproducible.

Measured (2026-12-05, ``benchmarks/cases/rescue_three_layernorms.json``: 1,500 ops stuck on
event ids, relaxed list schedule 1,536 cycles, ``"flags"`` family): unhinted, CP-SAT found no
schedule in 16.5 deterministic units (130 s, the 60 s default limit's whole budget; the
calibrated rate promised 48 s), so the old rescue spent that once per candidate of the coupled
link plan (449 s in all). Hinted by the relaxed schedule with the horizon at
:data:`RESCUE_HORIZON` times its makespan, the first schedule came in 0.6 s (2,304 cycles) and
one of 1,529 cycles in 9.7 s (4 units); with the horizon at the relaxed makespan itself, or at
the naive horizon, none no longer than 1,536 came within 8 units.
"""

from __future__ import annotations

import math
import time

import attrs

from staticsched.solver.budget import CALIBRATION, Clock, Shape, det_rate, spent_seconds
from staticsched.solver.cpmodel import CpResult, naive_horizon, solve_cpsat
from staticsched.solver.families.links import fix_rates, rates_of
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.portfolio import FULL_LIMIT
from staticsched.solver.problem import Problem, relax_event_budgets

#: the share of a problem's seconds the rescue may spend when the relaxed list schedule stands
#: behind it (what it spends is charged to the problem's search)
RESCUE_SHARE = 0.25
#: the hinted rescue's horizon, in makespans of the relaxed list schedule: that schedule breaks
#: the budgets, so a schedule that keeps them may need longer, and a horizon at its makespan
#: left CP-SAT without a first schedule (module docstring)
RESCUE_HORIZON = 1.5


@attrs.frozen
class Unstuck:
    """The way on from a stuck list schedule.

    ``found`` is the timetable to start from (or the original :class:`Stuck`, its ``proof``
    saying what CP-SAT found), ``prob`` the problem it solves (the relaxed one when
    ``relaxed``), ``spent`` what the rescue is charged (calibrated seconds in deterministic
    mode, wall seconds in wall-clock mode), ``det_time`` its deterministic units and
    ``stop_reason`` what ended its search ("" when there was none).
    """

    found: Timetable | Stuck
    prob: Problem
    relaxed: bool = False
    spent: float = 0.0
    det_time: float = 0.0
    stop_reason: str = ""


def unstick(prob: Problem, stuck: Stuck, lower: int, clock: Clock, seed: int, target: int) -> Unstuck:
    """Relax and rescue ``prob``, on which the list scheduler got ``stuck`` (module docstring);
    ``target`` is the gap limit's makespan (the relaxed list schedule stops at it)."""
    loose = relax_event_budgets(prob) if stuck.kind != "memory" else None
    fallback = list_schedule(loose, enough=target) if loose is not None else None
    behind = fallback if isinstance(fallback, Timetable) else None
    if prob.n > FULL_LIMIT:
        if behind is not None and loose is not None:
            return Unstuck(behind, loose, relaxed=True)
        return Unstuck(stuck, prob)
    t0 = time.monotonic()
    # from scratch CP-SAT advances its deterministic time far slower per second than when
    # hinted: its own calibration keeps the rescue within its seconds (budget.CALIBRATION)
    # (a disjunctive problem has nothing to be stuck on, so it has no scratch point)
    family = Shape.of(prob).family
    scratch = behind is None and (family, "scratch") in CALIBRATION
    rate = det_rate(family, "scratch" if scratch else "interleave", prob.n)
    seconds = clock.seconds * (RESCUE_SHARE if behind is not None else 1.0)
    fixed = fix_rates(prob, ())  # CP-SAT schedules transfers at fixed rates: the most allowed
    cp = _rescue(fixed, behind, lower, clock.det_limit(rate, seconds),
                 clock.remaining() if clock.deterministic else min(seconds, clock.remaining()), seed)
    spent = spent_seconds(cp.det_time, rate) if clock.deterministic else time.monotonic() - t0
    charged = {"spent": spent, "det_time": cp.det_time, "stop_reason": cp.stop_reason}
    if cp.timetable is not None and (behind is None or cp.timetable.makespan <= behind.makespan):
        rescued = attrs.evolve(cp.timetable, rule="cpsat-rescue", rates=rates_of(fixed))
        return Unstuck(rescued, prob, **charged)
    if behind is not None and loose is not None:
        return Unstuck(behind, loose, relaxed=True, **charged)
    proof = "infeasible" if cp.status == "infeasible" else "unknown"
    return Unstuck(attrs.evolve(stuck, proof=proof), prob, **charged)


def _rescue(
    fixed: Problem, hint: Timetable | None, lower: int, det_limit: float, wall_limit: float, seed: int
) -> CpResult:
    """CP-SAT on ``fixed`` (its transfers at fixed rates): hinted by ``hint`` (a schedule of
    the relaxed problem) up to its first schedule no longer than it, else from scratch up to
    its first schedule."""
    if hint is None:
        return solve_cpsat(fixed, None, lower, det_limit=det_limit, wall_limit=wall_limit,
                           seed=seed, target=naive_horizon(fixed))
    # the model's horizon is its hint's makespan (cpmodel.build_model)
    wide = attrs.evolve(hint, makespan=math.ceil(RESCUE_HORIZON * hint.makespan))
    return solve_cpsat(fixed, wide, lower, det_limit=det_limit, wall_limit=wall_limit, seed=seed,
                       target=hint.makespan)
