"""The relative gap limit (issue 23): the search stops as soon as the makespan is proven within
``gap`` of the lower bound, deterministically, and says so; ``gap=0`` searches on."""

import pytest
from common import EXAMPLES, preset
from schedcases import FT06, LA01, jobshop

from staticsched.errors import InputError
from staticsched.options import option_problems
from staticsched.pipeline import as_opgraph
from staticsched.solver import list_sched, solve
from staticsched.solver.budget import STOP_GAP, Clock, gap_target
from staticsched.solver.decompose import build_problems
from staticsched.solver.list_sched import FIRST_BATCH, Stuck, list_schedule
from staticsched.solver.lns import improve_lns


@pytest.mark.parametrize("gap", [0.0, 0.001, 0.05, 0.1, 0.5])
@pytest.mark.parametrize("lower", [1, 52, 666, 1_050_000])
def test_the_target_is_the_largest_makespan_within_the_gap(lower, gap):
    t = gap_target(lower, gap)
    assert t >= lower
    assert (t - lower) <= gap * t
    assert (t + 1 - lower) > gap * (t + 1)


@pytest.mark.parametrize(("text", "gap"), [(FT06, 0.1), (LA01, 0.05), (LA01, 0.02)])
def test_the_search_stops_within_the_gap_and_reproducibly(text, gap):
    graph, hw = jobshop(text)
    runs = [solve(graph, hw, gap=gap, time_limit=10) for _ in range(2)]
    a, b = runs
    assert [o.start for o in a.ops] == [o.start for o in b.ops]
    assert a.stop_reason == STOP_GAP
    assert a.makespan - a.lower_bound <= gap * a.makespan
    # the search ran (the list schedule was outside the gap) and stopped early
    assert dict(a.stats)["list_makespan"] - a.lower_bound > gap * dict(a.stats)["list_makespan"]


def test_a_list_schedule_within_the_gap_is_not_searched():
    graph, hw = jobshop(FT06)
    sch = solve(graph, hw, gap=0.5, time_limit=10)
    assert sch.stop_reason == STOP_GAP
    assert sch.makespan == dict(sch.stats)["list_makespan"]
    assert dict(sch.stats)["cpsat_makespan"] == -1


def test_gap_zero_searches_to_the_proof():
    graph, hw = jobshop(FT06)
    sch = solve(graph, hw, gap=0.0, time_limit=10)
    assert (sch.makespan, sch.status) == (55, "optimal")


def test_lns_stops_at_its_target():
    graph, hw = jobshop(LA01)
    (prob, _), = build_problems(graph, hw)
    tt = list_schedule(prob)
    assert not isinstance(tt, Stuck)
    res = improve_lns(prob, tt, seconds=10.0, clock=Clock("deterministic", 10.0, 100.0),
                      target=tt.makespan)
    assert res.stop_reason == STOP_GAP
    assert res.timetable.starts == tt.starts


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, "0.1", True])
def test_a_bad_gap_is_one_line(bad):
    (line,) = option_problems(gap=bad)
    assert line.startswith("gap must be a number with 0 <= gap < 1")
    graph, hw = jobshop(FT06)
    with pytest.raises(InputError, match="gap must be"):
        solve(graph, hw, gap=bad)


_RUN_VARIANT = list_sched.run_variant


def _variants_run(monkeypatch, prob, **kw):
    ran: list[str] = []

    def counted(prob, prep, var, given=None):
        ran.append(var.name)
        return _RUN_VARIANT(prob, prep, var, given)

    monkeypatch.setattr(list_sched, "run_variant", counted)
    list_sched._default_schedule.cache_clear()
    try:
        return list_schedule(prob, **kw), ran
    finally:
        list_sched._default_schedule.cache_clear()


def test_the_list_scheduler_stops_its_variants_at_the_gap(monkeypatch):
    graph, hw = jobshop(LA01)
    (prob, _), = build_problems(graph, hw)
    every, all_ran = _variants_run(monkeypatch, prob)
    assert not isinstance(every, Stuck)
    assert len(all_ran) > FIRST_BATCH
    # a target the first batch meets: the other variants are not run
    first, ran = _variants_run(monkeypatch, prob, enough=10**9)
    assert ran == all_ran[:FIRST_BATCH]
    assert not isinstance(first, Stuck) and first.makespan >= every.makespan
    # a target no variant meets (below the best): every variant runs, and the result is theirs
    same, ran = _variants_run(monkeypatch, prob, enough=every.makespan - 1)
    assert ran == all_ran
    assert same == every


def test_a_first_batch_stuck_on_event_ids_stops_the_variants(monkeypatch):
    # the HBM chain's 32 tiles per core keep more flags open than the 8 event ids: every
    # variant ends stuck on them; a caller that stops early is told after the first batch
    # (and then solves without the pools), one that does not runs every variant
    hw = preset("seed-davinci")
    graph = as_opgraph(EXAMPLES / "elementwise_chain_hbm.json", hw)
    prob = max((p for p, _ in build_problems(graph, hw)), key=lambda p: p.n)
    every, all_ran = _variants_run(monkeypatch, prob)
    assert isinstance(every, Stuck) and every.kind == "events"
    assert len(all_ran) > FIRST_BATCH
    first, ran = _variants_run(monkeypatch, prob, enough=10**9)
    assert ran == all_ran[:FIRST_BATCH]
    assert first == every
