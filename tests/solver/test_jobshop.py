"""Classic job-shop instances as OpGraphs: one unit per machine, each job a dependency chain.

Data in the OR-Library format: per job, (machine, duration) pairs in processing order.
"""

import pytest
from common import BENCHMARKS
from schedcases import FT06, LA01, jobshop

from staticsched.solver import solve


# Fisher & Thompson (1963) 6x6, optimum 55
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


def test_stored_instances_match_the_typed_copies_and_the_peer_proves_ft06():
    # benchmarks/jobshop/ holds the OR-Library data the benchmark and the peer use
    import sys

    bench = BENCHMARKS
    sys.path.insert(0, str(bench))
    try:
        from jssp import FAMILY, INSTANCES, load_jobshop, parse_orlib
        from peer_cpsat import peer_solve
    finally:
        sys.path.remove(str(bench))
    for name, text in (("ft06", FT06), ("la01", LA01)):
        typed = [[int(x) for x in line.split()] for line in text.strip().splitlines()]
        stored = parse_orlib((bench / "jobshop" / f"{name}.txt").read_text())
        assert [[v for pair in job for v in pair] for job in stored] == typed
    required = {"ft06", "ft10", "ft20", *(f"la{i:02d}" for i in range(1, 41))}
    required |= {f"ta{i:02d}" for i in range(1, 11)}
    assert required <= set(FAMILY)
    for name in sorted(INSTANCES):
        graph, hw, info = load_jobshop(name)
        assert len(graph.ops) == info.jobs * info.machines
        assert info.lower <= info.best
    graph, hw, info = load_jobshop("ft06")
    peer = peer_solve(graph, hw, time_limit=10)
    assert (peer.status, peer.makespan) == ("OPTIMAL", info.optimum)
