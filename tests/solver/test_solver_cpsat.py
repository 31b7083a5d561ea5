"""CP-SAT backend plumbing: complete feasible hints, model feasibility, limits, LNS."""


import pytest
from ortools.sat.python import cp_model

from benchmarks import synthetic
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver import build_problems, list_schedule, lower_bound, solve
from staticsched.solver.budget import (
    STOP_CONVERGED,
    STOP_DETERMINISTIC,
    STOP_OPTIMAL,
    STOP_WALL_NET,
    Clock,
)
from staticsched.solver.cpmodel import build_model, solve_cpsat
from staticsched.solver.feasibility import model_violations
from staticsched.solver.lns import improve_lns
from staticsched.solver.normalize import semi_active


def tile_pipeline(n: int, seed: int = 0, slots: int = 2, event_ids: int = 8) -> tuple[OpGraph, Hardware]:
    return synthetic.tile_pipeline(n, seed, slots=slots, event_ids=event_ids, flag_latency=1)


@pytest.mark.parametrize("event_ids", [1, 8])
def test_list_schedule_is_a_complete_feasible_hint(event_ids):
    graph, hw = tile_pipeline(12, event_ids=event_ids)
    ((prob, _),) = build_problems(graph, hw)
    tt = list_schedule(prob)
    assert model_violations(prob, tt.starts, tt.offsets) == []
    model, _ = build_model(prob, tt, lower_bound(prob).value)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    # every variable has a hint: the fixed-hint solve reproduces the list timetable
    proto = model.proto
    assert len(proto.solution_hint.vars) == len(proto.variables)


def test_cpsat_result_satisfies_the_model_and_beats_or_ties_the_hint():
    graph, hw = tile_pipeline(10)
    ((prob, _),) = build_problems(graph, hw)
    tt = list_schedule(prob)
    res = solve_cpsat(prob, tt, lower_bound(prob).value, det_limit=1.0, wall_limit=30)
    assert res.timetable is not None
    assert model_violations(prob, res.timetable.starts, res.timetable.offsets) == []
    assert res.objective <= tt.makespan
    assert res.stop_reason in ("optimal", "deterministic_limit")


def test_wall_clock_safety_net_is_reported():
    graph, hw = tile_pipeline(60)
    ((prob, _),) = build_problems(graph, hw)
    tt = list_schedule(prob)
    # a large deterministic budget and almost no wall time: the wall clock must stop it
    res = solve_cpsat(prob, tt, lower_bound(prob).value, det_limit=1e6, wall_limit=0.2)
    assert res.stop_reason == STOP_WALL_NET
    assert "not reproducible" in res.stop_reason


def test_time_limit_holds_and_says_what_stopped():
    graph, hw = tile_pipeline(60)
    s = solve(graph, hw, time_limit=1.0)
    assert s.verify() == ()
    # the limit is in calibrated seconds, which the deterministic budget counts whatever the
    # machine's speed (the wall seconds are benchmarks/wall_clock.py's to measure)
    assert dict(s.stats)["budget_spent"] <= 1.0 * 1.05
    assert s.stop_reason in (STOP_WALL_NET, STOP_DETERMINISTIC, STOP_OPTIMAL, STOP_CONVERGED)


def test_lns_keeps_the_model_and_improves_a_long_pipeline():
    graph, hw = tile_pipeline(150)
    ((prob, _),) = build_problems(graph, hw)
    tt = list_schedule(prob)
    clock = Clock("deterministic", 1e6, 60).start()
    res = improve_lns(prob, tt, seconds=1e6, clock=clock, max_windows=6)
    assert res.rounds == 6 and res.stop_reason == "deterministic_limit"
    assert model_violations(prob, res.timetable.starts, res.timetable.offsets) == []
    before = max(s + d for s, d in zip(semi_active(prob, tt.starts, tt.offsets), prob.dur, strict=True))
    starts = semi_active(prob, res.timetable.starts, res.timetable.offsets)
    after = max(s + d for s, d in zip(starts, prob.dur, strict=True))
    assert res.improved > 0 and after < before
    again = improve_lns(prob, tt, seconds=1e6, clock=Clock("deterministic", 1e6, 60).start(), max_windows=6)
    assert again.timetable == res.timetable


def test_large_problem_takes_the_lns_path():
    graph, hw = tile_pipeline(100)  # 300 ops: above the whole-model limit
    s = solve(graph, hw, time_limit=4)
    assert s.verify() == ()
    assert s.status in ("feasible", "optimal")
    assert s.makespan <= dict(s.stats)["list_makespan"]
