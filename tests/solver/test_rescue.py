"""A stuck list schedule: the relaxed list schedule, and CP-SAT's rescue within its share.

The case is three chained row layernorms on ``seed-davinci`` (1,500 ops, one problem), drawn by
the property tests, on which the list scheduler runs out of event ids. The rescue once searched
it from scratch with the whole time limit, found nothing and took minutes per candidate of the
coupled link plan (docs/performance.md, "Sixteenth pass").
"""

from __future__ import annotations

import functools

import pytest
from common import BENCHMARKS, examples, preset
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from benchmarks import synthetic
from staticsched.frontend.taskgraph import load_graph
from staticsched.pipeline import as_opgraph
from staticsched.solver import build_problems
from staticsched.solver.bounds import lower_bound
from staticsched.solver.budget import Clock, Shape, det_rate
from staticsched.solver.feasibility import model_violations
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.problem import Problem, relax_event_budgets
from staticsched.solver.rescue import RESCUE_SHARE, unstick
from staticsched.solver.subproblem import solve_problem


@functools.cache
def _stuck() -> tuple[Problem, Stuck, Timetable]:
    hw = preset("seed-davinci")
    graph = as_opgraph(load_graph(BENCHMARKS / "cases" / "rescue_three_layernorms.json"), hw)
    (prob, _), = build_problems(graph, hw)
    stuck = list_schedule(prob)
    relaxed = list_schedule(relax_event_budgets(prob))
    assert isinstance(stuck, Stuck) and stuck.kind == "events"
    assert isinstance(relaxed, Timetable)
    return prob, stuck, relaxed


def _unstick(seconds: float):
    prob, stuck, _ = _stuck()
    clock = Clock("deterministic", seconds, 1e9).start()
    lower = lower_bound(prob).value
    return unstick(prob, stuck, lower, clock, seed=0, target=lower)


def _check(seconds: float):
    prob, _, relaxed = _stuck()
    out = _unstick(seconds)
    # charged, and no more than its share (CP-SAT passes its budget by a step at most)
    assert 0 < out.spent <= RESCUE_SHARE * seconds * 1.05, out
    assert isinstance(out.found, Timetable)
    if out.relaxed:
        assert out.found == relaxed and not any(b.binding for b in out.prob.budgets)
    else:
        # a rescue is kept only when it keeps the budgets and is no longer than the relaxed one
        assert out.prob is prob and out.found.rule == "cpsat-rescue"
        assert out.found.makespan <= relaxed.makespan
        assert model_violations(prob, out.found.starts, out.found.offsets) == []
    return out


def test_a_short_rescue_is_charged_and_the_relaxed_schedule_stands():
    out = _check(2.0)
    # two seconds' share finds no schedule that keeps the ids as short as the relaxed one
    assert out.relaxed


def test_a_rescue_with_its_share_of_a_minute_keeps_the_ids_and_beats_the_relaxed_schedule():
    # measured: 1,529 cycles within the budgets against the relaxed list schedule's 1,536
    out = _check(60.0)
    assert not out.relaxed


def test_the_rescue_is_the_searchs_time_and_reproducible():
    prob = _stuck()[0]
    clock = Clock("deterministic", 2.0, 1e9)
    a = solve_problem(prob, "list", clock, 0)
    b = solve_problem(prob, "list", clock, 0)
    assert a.relaxed and a.spent == _unstick(2.0).spent > 0
    assert (a.starts, a.offsets, a.spent) == (b.starts, b.offsets, b.spent)
    # under CP-SAT the phases get what the rescue left: in all, no more than the grant
    c = solve_problem(prob, "cpsat", clock, 0)
    assert c.makespan <= a.makespan and c.spent <= 2.0 * 1.05


@pytest.mark.parametrize("ids", [(8, 0), (1, 1)], ids=["memory", "flags"])
@settings(max_examples=examples(2), deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_rescue_from_scratch_keeps_to_its_own_calibration(ids, seed):
    """A drawn problem stuck on memory, with no relaxed schedule behind it: the rescue runs
    from scratch on the ``"scratch"`` rate of its family (CP-SAT advances far slower unhinted),
    so its deterministic budget is the seconds at that rate, and what it is charged stays
    within the seconds (with the interleave rate it overran them up to 2.6x)."""
    event_ids, latency = ids
    graph, hw = synthetic.fragmented_pipeline(30, seed, event_ids=event_ids, flag_latency=latency)
    (prob, _), = build_problems(graph, hw)
    stuck = list_schedule(prob)
    assume(isinstance(stuck, Stuck) and stuck.kind == "memory")
    seconds = 2.0
    clock = Clock("deterministic", seconds, 1e9).start()
    out = unstick(prob, stuck, lower_bound(prob).value, clock, seed=0, target=0)
    assert not out.relaxed and out.prob is prob
    family = Shape.of(prob).family
    budget = clock.det_limit(det_rate(family, "scratch", prob.n), seconds)
    assert budget < clock.det_limit(det_rate(family, "interleave", prob.n), seconds) or family == "memory"
    assert 0 < out.det_time <= budget * 1.05 + 0.01, (out.det_time, budget)  # CP-SAT's last step
    assert out.spent <= seconds * 1.05
    if isinstance(out.found, Timetable):
        assert model_violations(prob, out.found.starts, out.found.offsets) == []
    else:
        assert out.found.proof in ("unknown", "infeasible")
