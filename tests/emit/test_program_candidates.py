"""The solver's timetable candidates compared as programs when the sync planner runs short of
event ids on the first (``pipeline._finalized``): the baton program of one timetable can run
slower than another's."""

from __future__ import annotations

import random

from schedcases import list_schedule, tiny_hw

from staticsched.model.opgraph import Op, OpGraph
from staticsched.pipeline import _finalized
from staticsched.progress import Progress
from staticsched.solver import solve
from staticsched.verify import verify


def _graph(seed: int) -> OpGraph:
    rnd = random.Random(seed)
    ops = []
    for i in range(12):
        deps = [f"op{d}" for d in rnd.sample(range(i), min(i, 2))]
        ops.append(Op(f"op{i}", rnd.choice("AB"), rnd.randint(1, 9), core=rnd.randint(0, 1), deps=deps))
    return OpGraph([], ops)


def _candidates(seed: int, event_ids: int):
    graph = _graph(seed)
    hw = tiny_hw(event_ids=event_ids, cross_ids=event_ids)
    return [("plain list", list_schedule(graph, hw)), ("solver's list", solve(graph, hw, method="list"))]


def _run(cands):
    rep = Progress(enabled=False, tty=False)
    finals = []
    out = _finalized(cands, "flags", rep, lambda final, plan: finals.append(final))
    return out, finals, rep


def test_the_fastest_program_is_kept_when_the_first_runs_short_of_ids():
    # seed 4: with one id per pool both timetables fall back to the baton; the first's program
    # runs 37 cycles, the second's 32
    cands = _candidates(4, 1)
    alone = [_finalized([c], "flags", Progress(enabled=False, tty=False), None) for c in cands]
    assert alone[0][2].stats.fallback
    spans = [a[0].makespan for a in alone]
    assert spans[1] < spans[0], spans
    (final, program, _, _), finals, rep = _run(cands)
    assert final.makespan == spans[1]
    assert final.ops == alone[1][0].ops
    assert finals == [final]  # the chosen one, once
    assert "programs compared: plain list 37 (baton), solver's list 32 (baton); kept the solver's list" \
        in dict(final.stats)["links"]
    assert [name for name, _ in rep.timings] == ["plan sync", "compare programs"]
    report = verify(program, final.hw, jitter=2, seed=0)
    assert report.ok, report.text()


def test_the_first_is_kept_when_its_program_is_the_fastest():
    # seed 30: the first's baton program (44) beats the second's (53)
    cands = _candidates(30, 1)
    (final, _, _, _), _, _ = _run(cands)
    first = _finalized(cands[:1], "flags", Progress(enabled=False, tty=False), None)[0]
    assert final.makespan == first.makespan == 44
    assert "kept the plain list" in dict(final.stats)["links"]


def test_no_comparison_when_the_first_plans_its_flags():
    # with ids to spare nothing falls back: the solver's choice stands and no other is built (seed 4's
    # second timetable is shorter, and is not built)
    cands = _candidates(4, 8)
    (final, _, plan, _), finals, rep = _run(cands)
    assert not plan.stats.fallback
    assert final.ops == _finalized(cands[:1], "flags", Progress(enabled=False, tty=False), None)[0].ops
    assert "links" not in dict(final.stats)
    assert [name for name, _ in rep.timings] == ["plan sync", "build program"]
    assert finals == [final]
