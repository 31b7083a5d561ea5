"""Properties of the solver over random graphs and hardware.

Graphs are DAGs by construction: op ``i`` reads only items written by earlier ops of its core
and depends only on earlier ops, so every edge goes from a lower to a higher index. Each
bounded space's capacity lies between what the sequential program needs at once ("one slot")
and plenty; event ids 1-8, flag latency 0-10.

Fast by default (small graphs, few examples). For a long exploration run::

    HYPOTHESIS_PROFILE=thorough pytest tests/solver/test_solver_property.py

which multiplies the number of examples by 50 (the convention of ``tests/strategies.py``).
"""

from __future__ import annotations

from common import THOROUGH, examples
from hypothesis import HealthCheck, given, settings
from schedcases import instances

from staticsched.errors import InfeasibleError
from staticsched.solver import solve

PROOF = "CP-SAT proves that no schedule satisfies these constraints"


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=not THOROUGH,
)
@given(instances())
def test_schedules_verify_and_cpsat_sits_between_bound_and_list(case):
    graph, hw = case
    graph.check(hw)
    try:
        # the same limit as the search: a stuck list schedule's CP-SAT rescue spends a share
        # of it under both methods (solver/rescue.py)
        listed = solve(graph, hw, method="list", time_limit=5)
    except InfeasibleError as err:
        # only a proven infeasibility may stop the list scheduler on inputs this small
        assert all(PROOF in line for line in err.problems), err.problems
        return
    best = solve(graph, hw, time_limit=5)
    assert listed.verify() == ()
    assert best.verify() == ()
    assert best.lower_bound <= best.makespan <= listed.makespan
    assert listed.lower_bound == best.lower_bound


@settings(max_examples=examples(15), deadline=None, derandomize=not THOROUGH)
@given(instances(max_ops=8))
def test_same_input_same_schedule(case):
    graph, hw = case
    graph.check(hw)
    try:
        a = solve(graph, hw, time_limit=5)
    except InfeasibleError:
        return
    b = solve(graph, hw, time_limit=5)
    assert (a.ops, a.items, a.makespan, a.status) == (b.ops, b.items, b.makespan, b.status)
