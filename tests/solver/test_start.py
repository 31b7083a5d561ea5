"""A start timetable handed to ``solve_problem`` from another problem (the coupled link plan
seeds the chip's search with a static split's timetable) is used only when this problem's
model accepts it: a start that breaks an event-id pool made the windows keep the breach, the
search's result was dropped, and the whole budget went for nothing (``bert_layer`` on
``ascend-a2``: every window at 29,278, the plan 26% over its program)."""

from __future__ import annotations

import functools

from common import EXAMPLES, preset

from staticsched.frontend.taskgraph import load_graph
from staticsched.pipeline import as_opgraph
from staticsched.solver import build_problems
from staticsched.solver.budget import Clock
from staticsched.solver.feasibility import model_violations
from staticsched.solver.list_sched import Timetable, list_schedule
from staticsched.solver.problem import Problem, relax_event_budgets
from staticsched.solver.subproblem import solve_problem


@functools.cache
def _case() -> tuple[Problem, Timetable, Timetable]:
    """A problem whose event-id pools bind, its list schedule, and the shorter list schedule of
    the same problem without the pools, which breaks them."""
    hw = preset("seed-davinci")
    graph = as_opgraph(load_graph(EXAMPLES / "unequal_mm1000_hbm.json"), hw)
    for prob, _ in build_problems(graph, hw):
        if not any(b.binding for b in prob.budgets):
            continue
        own, free = list_schedule(prob), list_schedule(relax_event_budgets(prob))
        if (isinstance(own, Timetable) and isinstance(free, Timetable) and free.makespan < own.makespan
                and model_violations(prob, free.starts, free.offsets)):
            return prob, own, free
    raise AssertionError("no problem of the example has a shorter start that breaks its pools")


def test_a_start_that_breaks_the_pools_is_not_used():
    prob, own, free = _case()
    lines: list[str] = []
    res = solve_problem(prob, "list", Clock("deterministic", 1.0, 30.0), 0, progress=lines.append,
                        start=free)
    assert any("the start timetable breaks this problem" in ln for ln in lines), lines
    # the result comes from the problem's own list schedule, not from the start
    assert res.list_makespan == own.makespan > free.makespan

