"""The seed's double-buffering micro-instance (shared/seeds/000 §3.3) and its variants.

Ten tiles, each a DMA load (60 cycles) into a 32 KiB L1 tile followed by a CUBE compute
(100 cycles) that reads it; L1 is 64 KiB on ``double-buffer-demo``.
"""


import attrs
import pytest
from common import EXAMPLES, preset

from staticsched.model.opgraph import load_opgraph
from staticsched.solver import solve


@pytest.fixture(scope="module")
def demo():
    graph = load_opgraph(EXAMPLES / "double_buffer.json")
    hw = preset("double-buffer-demo")
    graph.check(hw)
    return graph, hw


def _with_l1(hw, capacity):
    spaces = [attrs.evolve(s, capacity=capacity) if s.name == "L1" else s for s in hw.spaces]
    return attrs.evolve(hw, spaces=spaces)


def test_two_slots_overlap_loads_with_compute(demo):
    graph, hw = demo
    s = solve(graph, hw, time_limit=10)
    # two slots: load i+1 runs under compute i, so the CUBE never waits after the first load:
    # 60 (first load) + 10 * 100 (computes back to back) = 1060, the CUBE pipe's lower bound
    assert s.makespan == 1060
    assert s.lower_bound == 1060
    assert s.status == "optimal"
    assert s.verify() == ()
    # the two slots alternate: tiles i and i+2 share an address, i and i+1 never do
    offsets = [p.offset for p in s.items]
    assert all(offsets[i] != offsets[i + 1] for i in range(9))
    assert all(offsets[i] == offsets[i + 2] for i in range(8))


def test_one_slot_serialises_every_tile(demo):
    graph, hw = demo
    s = solve(graph, _with_l1(hw, 32 * 1024), time_limit=10)
    # one slot: load i+1 may only overwrite the tile after compute i has read it, so nothing
    # overlaps: 10 * (60 + 100) = 1600; CP-SAT proves it although the pipe bound stays 1060
    assert s.makespan == 1600
    assert s.lower_bound == 1060
    assert s.status == "optimal"
    assert s.verify() == ()
    assert {p.offset for p in s.items} == {0}


def test_slow_loads_make_the_dma_the_bottleneck(demo):
    graph, hw = demo
    slow = attrs.evolve(
        graph, ops=[attrs.evolve(o, duration=120) if o.unit == "DMA" else o for o in graph.ops]
    )
    s = solve(slow, hw, time_limit=10)
    # loads of 120 with two slots: the DMA runs its ten loads back to back (1200) and the last
    # compute follows the last load: 10 * 120 + 100 = 1300, the DMA pipe's lower bound
    assert s.makespan == 1300
    assert s.lower_bound == 1300
    assert s.status == "optimal"
    assert s.verify() == ()


def test_list_method_is_heuristic_but_valid(demo):
    graph, hw = demo
    s = solve(graph, _with_l1(hw, 32 * 1024), method="list")
    assert s.method == "list"
    assert s.status == "heuristic"
    assert s.stop_reason == "list"
    assert s.makespan == 1600
    assert s.verify() == ()


def test_solution_is_semi_active(demo):
    graph, hw = demo
    s = solve(graph, hw, time_limit=10)
    # every op starts at 0 or right when a predecessor on its pipe or in the graph ends
    ends = {o.end for o in s.ops}
    assert all(o.start == 0 or o.start in ends for o in s.ops)
    assert s.events == ()
    assert [o.id for o in s.ops] == [op.id for op in graph.ops]
    assert [p.item for p in s.items] == [it.name for it in graph.items]
