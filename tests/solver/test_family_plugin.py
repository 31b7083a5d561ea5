"""A resource family is a plug-in: a family defined here, outside the package, and added to
``FAMILIES`` is honoured by decomposition, the list scheduler, CP-SAT, the feasibility check,
the lower bound, the semi-active normalisation and the explanations, with no other change.

The family: a core issues one op at a time (its pipes never overlap), a plausible model of a
scalar core, and one that the built-in families never impose.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import attrs
import pytest
from common import EXAMPLES, preset
from schedcases import jobshop

from staticsched.model.opgraph import load_opgraph
from staticsched.solver import bounds as bounds_mod
from staticsched.solver import (
    constraints,
    cpmodel,
    decompose,
    explain,
    feasibility,
    hints,
    list_sched,
    normalize,
    solve,
)
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.base import Group, Passive, Stuck
from staticsched.solver.problem import Problem, ProblemMap

NAME = "one_issue"


def _by_core(prob: Problem) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i in range(prob.n):
        out.setdefault(prob.pipes[prob.pipe_of[i]][0], []).append(i)
    return out


class _Tracker:
    def __init__(self, prob: Problem) -> None:
        self.prob = prob
        self.core_of = [prob.pipes[p][0] for p in prob.pipe_of]
        self.busy_until = [0] * prob.n_cores
        self.ends: list[int] = []

    def prune(self, t: int) -> None:
        while self.ends and self.ends[0] <= t:
            heapq.heappop(self.ends)

    def next_change(self) -> int | None:
        return self.ends[0] if self.ends else None

    def refuses(self, i: int, end: int, start: list[int]) -> bool:
        return self.busy_until[self.core_of[i]] > end - self.prob.dur[i]

    def begin(self, i: int, t: int, start: list[int]) -> None:
        end = t + self.prob.dur[i]
        self.busy_until[self.core_of[i]] = end
        heapq.heappush(self.ends, end)

    def stuck(self, i: int, end: int, start: list[int], rule: str) -> Stuck | None:
        return Stuck(NAME, i, end - self.prob.dur[i], rule=rule) if self.refuses(i, end, start) else None


class OneIssue(Passive):
    name = NAME

    def attach(self, prob: Problem, pmap: ProblemMap, group: Group) -> tuple[Problem, ProblemMap]:
        return attrs.evolve(prob, parts=(*prob.parts, (NAME, 1))), pmap

    def variables(self, v) -> None:
        pass

    def constrain(self, v, whole: bool) -> None:
        if v.prob.part(NAME):
            for ops in _by_core(v.prob).values():
                v.model.add_no_overlap([v.interval[i] for i in ops])

    def hint(self, model, v, starts, offsets) -> None:
        pass

    def tracker(self, prob: Problem, prep) -> _Tracker | None:
        return _Tracker(prob) if prob.part(NAME) else None

    def explain(self, graph, prob, pmap, stuck) -> str | None:
        return "a core issues one op at a time" if stuck.kind == NAME else None

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        out = []
        for core, ops in _by_core(prob).items():
            ops = sorted(ops, key=lambda i: starts[i])
            out += [f"core {core} issues two ops at once" for a, b in itertools.pairwise(ops)
                    if starts[b] < starts[a] + prob.dur[a]]
        return out

    def bounds(self, prob, heads, tails, core_names) -> list[tuple[str, int]]:
        return [(f"{NAME} core {c}", sum(prob.dur[i] for i in ops)) for c, ops in _by_core(prob).items()]

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list:
        out = []
        for ops in _by_core(prob).values():
            ops = sorted(ops, key=lambda i: (starts[i], i))
            out += [(a, b, 0) for a, b in itertools.pairwise(ops)]
        return out


USERS = (decompose, list_sched, constraints, cpmodel, hints, feasibility, bounds_mod, normalize, explain)


@pytest.fixture
def plugged(monkeypatch):
    """FAMILIES with the new family last, in every module that iterates it."""
    for mod in USERS:
        assert mod.FAMILIES is FAMILIES, mod.__name__
        monkeypatch.setattr(mod, "FAMILIES", (*FAMILIES, OneIssue()))


def _overlaps(sch) -> list[tuple[str, str]]:
    by_core: dict[int, list] = {}
    for t in sch.ops:
        by_core.setdefault(t.core, []).append(t)
    out = []
    for ts in by_core.values():
        ts.sort(key=lambda t: (t.start, t.id))
        out += [(a.id, b.id) for a, b in itertools.pairwise(ts) if b.start < a.end]
    return out


def _case():
    return load_opgraph(EXAMPLES / "double_buffer.json"), preset("double-buffer-demo")


@pytest.mark.parametrize("method", ["list", "cpsat"])
def test_a_plugged_family_is_honoured_end_to_end(plugged, method):
    graph, hw = _case()
    sch = solve(graph, hw, method=method, time_limit=10)
    assert _overlaps(sch) == []
    assert sch.verify() == ()
    assert sch.lower_bound >= sum(op.duration for op in graph.ops)
    assert sch.makespan >= sch.lower_bound


@pytest.mark.parametrize("method", ["list", "cpsat"])
def test_without_the_plug_in_the_pipes_overlap(method):
    graph, hw = _case()
    sch = solve(graph, hw, method=method, time_limit=10)
    assert _overlaps(sch), "the case must have pipe parallelism for the family to remove"
    assert sch.makespan < sum(op.duration for op in graph.ops)


def test_the_family_data_travels_in_the_problem(plugged):
    graph, hw = jobshop("2 2\n0 3 1 2\n1 2 0 4\n")
    for prob, _ in decompose.build_problems(graph, hw):
        assert prob.part(NAME) == 1
        assert prob.part("absent") is None


def test_a_stuck_run_is_explained_by_its_family(plugged):
    graph, hw = jobshop("1 2\n0 3 1 2\n")
    (prob, pmap), = decompose.build_problems(graph, hw)
    err = explain.explain_stuck(graph, prob, pmap, Stuck(NAME, 0, 0))
    assert "one op at a time" in str(err)


def test_cpsat_and_the_feasibility_check_take_the_family_from_scratch(plugged):
    graph, hw = _case()
    (prob, _), = decompose.build_problems(graph, hw)
    res = cpmodel.solve_cpsat(prob, None, 0, det_limit=20.0, wall_limit=60.0)
    assert res.status == "optimal" and res.timetable is not None
    assert res.objective == sum(prob.dur)
    assert feasibility.model_violations(prob, res.timetable.starts, res.timetable.offsets) == []
    # the free timetable (pipes overlapping) breaks the plugged family's part of the model
    free = list_sched.list_schedule(attrs.evolve(prob, parts=()))
    assert not isinstance(free, Stuck)
    found = feasibility.model_violations(prob, free.starts, free.offsets)
    assert any("issues two ops at once" in line for line in found)
