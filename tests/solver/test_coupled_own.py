"""A coupled chip whose cores' own timetables fit the link searches the cores' own problems
and checks the result against the link afterwards (docs/design.md, refinement 41)."""

from __future__ import annotations

import attrs
import pytest

from staticsched.api import compile_graph
from staticsched.solver import coupled
from staticsched.solver.solve import _first_alike
from staticsched.verify import verify


def _links(lines: list[str]) -> list[str]:
    return [ln.strip() for ln in lines if ln.strip().startswith("links:")]


def test_own_timetables_that_fit_the_link_are_searched_as_the_cores_own_problems():
    # gemv_m1 (5,280 ops): the cores' own list timetables fit the L2 link and no split is
    # shorter, so no pass schedules the 16 cores as one problem
    lines: list[str] = []
    out = compile_graph("examples/gemv_m1.json", "seed-davinci", method="list", progress=lines.append)
    note = dict(out.schedule.stats)["links"]
    assert "the cores' own problems are searched and checked against the link afterwards" in note
    assert "kept the own search" in note
    groups = [ln for ln in lines if "core group(s)" in ln]
    assert groups and not any(" in 1 core group(s)" in ln for ln in groups)
    assert verify(out.program, "seed-davinci", jitter=1).ok


def test_a_small_chip_keeps_the_chips_search():
    # chain.json (302 ops) is under SMALL_CHIP_OPS: its problem costs little and its search
    # knows the link (702 cycles, where the cores' own searches meet on the link: 704)
    out = compile_graph("examples/chain.json", "seed-davinci", method="cpsat", time_limit=5)
    note = dict(out.schedule.stats)["links"]
    assert "the chip's search starts from the own timetables" in note
    assert out.program.makespan == 702


@pytest.mark.parametrize("mode", ["timed", "flags"])
def test_own_searches_that_overload_the_link_together_lose_to_their_start(monkeypatch, mode):
    # with the size rule off, chain.json's own searches shorten each core (plan 702) but
    # their transfers together overload the link: a timed program, which runs them at their
    # cycles, keeps the cores' own list timetables (705, which fit); a flags program's replay,
    # with the link shared, runs the searched plan at 704 and keeps it, as it is still faster
    monkeypatch.setattr(coupled, "SMALL_CHIP_OPS", 0)
    lines: list[str] = []
    out = compile_graph("examples/chain.json", "seed-davinci", method="cpsat", time_limit=5, mode=mode,
                        progress=lines.append)
    links = _links(lines)
    if mode == "timed":
        assert "links: the cores' own searched timetables overload the link together; kept their " \
               "list schedules" in links
        assert out.schedule.makespan == out.program.makespan == 705
        assert out.schedule.verify() == ()  # within every link's bandwidth at its cycles
    else:
        assert any("own search 704 (plan 702), own timetables 705 (plan 705)" in ln for ln in links)
        assert out.program.makespan == 704
    # a timed program keeps its order by exact cycles: jitter would race it by design
    assert verify(out.program, "seed-davinci", jitter=1 if mode == "flags" else 0).ok


def test_alike_candidates_are_replayed_once():
    # with --method list the search of the cores' own problems gives back their list
    # timetables, which are a candidate too: one replay serves both
    sch = compile_graph("examples/chain.json", "seed-davinci", method="list").schedule
    first = sch.ops[0]
    moved = attrs.evolve(sch, ops=(attrs.evolve(first, start=first.start + 1, end=first.end + 1),
                                   *sch.ops[1:]))
    placed = attrs.evolve(sch, items=(attrs.evolve(sch.items[0], offset=sch.items[0].offset + 32),
                                      *sch.items[1:]))
    assert _first_alike([sch, moved, attrs.evolve(sch), placed, moved, sch]) == [0, 1, 0, 3, 1, 0]
