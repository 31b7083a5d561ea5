"""Time budgets, workers, wall-clock mode and what "optimal" means (issue 12)."""

import math

import pytest
from common import BENCHMARKS
from schedcases import FT06, LA01, jobshop

from benchmarks import synthetic
from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Op, OpGraph
from staticsched.solver import budget, build_problems, solve
from staticsched.solver.budget import (
    CALIBRATION,
    STOP_DETERMINISTIC,
    STOP_MODEL_OPTIMAL,
    STOP_OPTIMAL,
    STOP_WALL_MODE,
    TARGET,
    Clock,
    Shape,
    det_rate,
    spent_seconds,
)
from staticsched.solver.portfolio import plan
from staticsched.solver.subproblem import model_is_exact


def test_deterministic_budget_and_its_charge_are_inverse():
    clock = Clock("deterministic", 30.0, 30.0)
    rate = det_rate("disjunctive", "lp", 100)
    det = clock.det_limit(rate)
    # the budget aims at TARGET of the grant, and using all of it charges the whole grant
    assert det == pytest.approx(TARGET * rate * 30.0)
    assert spent_seconds(det, rate) == pytest.approx(30.0)
    assert math.isinf(Clock("wall", 30.0, 30.0).det_limit(rate))


def test_calibrated_rates_fall_with_size_and_rise_with_workers():
    for family, search in CALIBRATION:
        rates = [det_rate(family, search, n) for n in (10, 100, 1000, 10_000, 100_000)]
        assert all(r > 0 for r in rates)
        assert rates == sorted(rates, reverse=True), (family, search)
    assert det_rate("disjunctive", "interleave", 200, 2) > det_rate("disjunctive", "interleave", 200, 1)


def test_portfolio_searches_job_shops_whole_and_unhinted_and_long_pipelines_in_windows():
    (prob, _), = build_problems(*jobshop(LA01))
    assert [(p.kind, p.hinted) for p in plan(Shape.of(prob))] == [("whole", False)]
    (prob, _), = build_problems(*synthetic.tile_pipeline(2000))
    assert Shape.of(prob).family in ("memory", "flags")
    assert [p.kind for p in plan(Shape.of(prob))] == ["lns"]


def test_wall_clock_mode_says_it_is_not_reproducible():
    graph, hw = synthetic.tile_pipeline(100, flag_latency=1)
    s = solve(graph, hw, time_limit=1.0, time_mode="wall")
    assert s.verify() == ()
    assert "not reproducible" in s.stop_reason
    assert s.stop_reason == STOP_WALL_MODE or s.status == "optimal"


def test_proven_job_shop_is_optimal_for_the_user():
    graph, hw = jobshop(FT06)
    (prob, _), = build_problems(graph, hw)
    assert model_is_exact(prob)
    s = solve(graph, hw, time_limit=10)
    # the static bound is 43: only CP-SAT's proof makes 55 optimal
    assert s.makespan == 55 and s.lower_bound < 55
    assert s.status == "optimal" and s.stop_reason == STOP_OPTIMAL


def _flags_graph(event_ids: int) -> tuple[OpGraph, Hardware]:
    """Two pipes, flags with latency 3: with one event id per pipe pair the solver's flag model
    (every possibly-kept flag counted) is stricter than the sync planner needs."""
    ops = [
        Op("o0", "A", 15),
        Op("o1", "A", 2),
        Op("o2", "A", 9, deps=["o0"]),
        Op("o3", "B", 2, deps=["o0"]),
        Op("o4", "B", 14, deps=["o0", "o1"]),
        Op("o5", "B", 6),
    ]
    sync = SyncModel(event_ids=event_ids, flag_latency=3)
    return OpGraph([], ops), Hardware("pair", 1, [Unit("A"), Unit("B")], [Space("GM", 0)], sync)


def test_a_proof_for_the_stricter_model_is_not_called_optimal():
    # with two ids nothing binds: 34 is optimal, and the static bound proves it (pipe B runs o5
    # in [0, 6), and o3 and o4 cannot start before o0's end plus the flag latency, 18: Jackson's
    # preemptive schedule of B ends at 18 + 2 + 14 = 34)
    graph, hw = _flags_graph(2)
    (prob, _), = build_problems(graph, hw)
    assert model_is_exact(prob)
    s = solve(graph, hw, time_limit=10)
    assert (s.makespan, s.lower_bound, s.status, s.stop_reason) == (34, 34, "optimal", STOP_OPTIMAL)
    # with one id the flag budget binds: the solver proves 36 optimal for its own model only
    graph, hw = _flags_graph(1)
    (prob, _), = build_problems(graph, hw)
    assert not model_is_exact(prob)
    s = solve(graph, hw, time_limit=10)
    assert s.verify() == ()
    assert (s.makespan, s.lower_bound) == (36, 34)
    assert (s.status, s.stop_reason) == ("feasible", STOP_MODEL_OPTIMAL)


@pytest.mark.slow
def test_thirty_seconds_on_a_small_model_search_for_more_than_fifteen():
    # la29 (200 ops, optimum 1152) is not proven within 60 s on a 2-core machine (README's
    # solver table), so a 30 s request must keep searching; ft10, used before, is now proven
    # in a few seconds and never reached the long-search branch

    text = (BENCHMARKS / "jobshop" / "la29.txt").read_text()
    lines = text.strip().splitlines()[1:]
    graph, hw = jobshop("\n".join(lines))
    s = solve(graph, hw, time_limit=30)
    stats = dict(s.stats)
    assert s.status != "optimal", "la29 was proven: pick a harder instance so this test keeps its point"
    # the calibrated seconds, not the wall clock's: a busy machine (a test run beside this one)
    # took 38.7 wall seconds for the same deterministic search (2026-12-04)
    assert s.stop_reason == STOP_DETERMINISTIC, stats
    assert 15 < stats["budget_spent"] < 31, stats  # it searched, and the limit holds
    # the wall clock is bounded by the safety net only, whatever the machine
    assert stats["search_seconds"] < budget.NET_FACTOR * 30 + budget.NET_OFFSET, stats


def test_the_wall_clock_net_fires_at_its_factor_of_the_limit(monkeypatch):
    # la29 is not proven in a minute, so its search runs until something stops it. A budget
    # calibrated 100x too generous stands for a machine far slower than the calibration one:
    # the deterministic budget would take ~100 s, and the net must stop the search at
    # NET_FACTOR * time_limit + NET_OFFSET (made 1.5 x 1 s + 0 s here, so the test is quick)

    text = (BENCHMARKS / "jobshop" / "la29.txt").read_text()
    graph, hw = jobshop("\n".join(text.strip().splitlines()[1:]))
    monkeypatch.setattr(budget, "TARGET", 100.0)
    monkeypatch.setattr(budget, "NET_FACTOR", 1.5)
    monkeypatch.setattr(budget, "NET_OFFSET", 0.0)
    s = solve(graph, hw, time_limit=1.0)
    stats = dict(s.stats)
    assert s.stop_reason == budget.STOP_WALL_NET
    assert stats["safety_net_fired"] and stats["safety_net"] == 1.5
    # stopped by the net, not at the budget (when it fires, in wall seconds, is
    # benchmarks/wall_clock.py's to measure: a test run beside this one would move it)
    assert stats["budget_spent"] < 1.0, stats
    from staticsched.emit.summary import net_lines

    (line,) = net_lines(s)
    assert line.startswith("error") and "1.5 s" in line and "not reproducible" in line
