"""Classic job-shop instances as OpGraphs: one unit per machine, each job a dependency chain.

Data in the OR-Library format: per job, (machine, duration) pairs in processing order.
"""

import pytest

from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Op, OpGraph
from staticsched.solver import solve

# Fisher & Thompson (1963) 6x6, optimum 55
FT06 = """
2 1 0 3 1 6 3 7 5 3 4 6
1 8 2 5 4 10 5 10 0 10 3 4
2 5 3 4 5 8 0 9 1 1 4 7
1 5 0 5 2 5 3 3 4 8 5 9
2 9 1 3 4 5 5 4 0 3 3 1
1 3 3 3 5 9 0 10 4 4 2 1
"""

# Lawrence (1984) 10x5 "la01", optimum 666
LA01 = """
1 21 0 53 4 95 3 55 2 34
0 21 3 52 4 16 2 26 1 71
3 39 4 98 1 42 2 31 0 12
1 77 0 55 4 79 2 66 3 77
0 83 3 34 2 64 1 19 4 37
1 54 2 43 4 79 0 92 3 62
3 69 4 77 1 87 2 87 0 93
2 38 0 60 1 41 3 24 4 83
3 17 1 49 4 25 0 44 2 98
4 77 3 79 2 43 1 75 0 96
"""


def jobshop(text: str) -> tuple[OpGraph, Hardware]:
    rows = [[int(x) for x in line.split()] for line in text.strip().splitlines()]
    n_machines = len(rows[0]) // 2
    ops = []
    for j, row in enumerate(rows):
        for k in range(n_machines):
            deps = [f"j{j}.{k - 1}"] if k else []
            ops.append(Op(f"j{j}.{k}", f"M{row[2 * k]}", row[2 * k + 1], deps=deps))
    # flags are not the point here: a generous id budget and no latency
    hw = Hardware(
        "jobshop",
        1,
        [Unit(f"M{m}") for m in range(n_machines)],
        [Space("GM", 0)],
        SyncModel(event_ids=64, flag_latency=0),
    )
    return OpGraph([], ops), hw


@pytest.mark.parametrize(("text", "optimum"), [(FT06, 55), (LA01, 666)], ids=["ft06", "la01"])
def test_classic_optimum_is_proven(text, optimum):
    graph, hw = jobshop(text)
    graph.check(hw)
    s = solve(graph, hw, time_limit=20)
    assert s.makespan == optimum
    assert s.status == "optimal"
    assert s.verify() == ()


def test_instances_are_transcribed_consistently():
    # each job visits every machine once, and the machine loads give the textbook lower bounds
    for text, lb in ((FT06, 43), (LA01, 666)):
        graph, hw = jobshop(text)
        for j in range(len(graph.ops) // len(hw.units)):
            units = [op.unit for op in graph.ops if op.id.startswith(f"j{j}.")]
            assert sorted(units) == sorted(hw.unit_names)
        load = {}
        for op in graph.ops:
            load[op.unit] = load.get(op.unit, 0) + op.duration
        assert max(load.values()) == lb


def test_list_schedule_is_a_feasible_upper_bound():
    graph, hw = jobshop(LA01)
    s = solve(graph, hw, method="list")
    assert s.verify() == ()
    assert s.makespan >= 666
