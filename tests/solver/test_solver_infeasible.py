"""Inputs no schedule can satisfy get one sentence per reason, naming what and the numbers."""

import attrs
import pytest

from staticsched.emit import finalize
from staticsched.errors import InfeasibleError, InputError, StaticschedError
from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.solver import solve
from staticsched.verify import verify

HW = Hardware(
    "tiny",
    2,
    [Unit("DMA"), Unit("CUBE")],
    [Space("GM", 0), Space("L1", 65536, 32)],
    SyncModel(event_ids=8, flag_latency=0, cross_core_event_ids=16),
)


def test_op_whose_items_cannot_be_co_resident():
    # each tile fits L1 alone (check() accepts them), but 'mm' reads both at once: 80000 B
    graph = OpGraph(
        [Item("a", "L1", 40000), Item("b", "L1", 40000)],
        [
            Op("load_a", "DMA", 10, writes=["a"]),
            Op("load_b", "DMA", 10, writes=["b"]),
            Op("mm", "CUBE", 10, reads=["a", "b"]),
        ],
    )
    graph.check(HW)
    for method in ("list", "cpsat"):
        with pytest.raises(InfeasibleError) as err:
            solve(graph, HW, method=method, time_limit=5)
        (line,) = err.value.problems
        assert "'mm'" in line and "'a' (40000 B)" in line and "'b' (40000 B)" in line
        assert "65536" in line and "L1" in line


def test_cross_pipe_dependency_without_event_ids():
    graph = OpGraph([], [Op("load", "DMA", 10), Op("mm", "CUBE", 10, deps=["load"])])
    hw = attrs.evolve(HW, sync=SyncModel(event_ids=0))
    graph.check(hw)
    with pytest.raises(InfeasibleError) as err:
        solve(graph, hw, method="list")
    (line,) = err.value.problems
    assert "'load' -> 'mm'" in line and "DMA -> CUBE" in line and "event_ids = 0" in line


def test_cross_core_dependency_without_cross_core_ids():
    graph = OpGraph([], [Op("a", "DMA", 10, core=0), Op("b", "DMA", 10, core=1, deps=["a"])])
    hw = attrs.evolve(HW, sync=SyncModel(cross_core_event_ids=0))
    with pytest.raises(InfeasibleError) as err:
        solve(graph, hw)
    assert "core 0 to core 1" in str(err.value) and "cross_core_event_ids = 0" in str(err.value)


def test_same_pipe_dependency_needs_no_event_id():
    # program order on one pipe orders the two ops: no flag, so no id is needed
    graph = OpGraph([], [Op("a", "DMA", 10), Op("b", "DMA", 5, deps=["a"])])
    s = solve(graph, attrs.evolve(HW, sync=SyncModel(event_ids=0)))
    assert s.makespan == 15 and s.verify() == ()


@pytest.mark.parametrize("capacity", [1, 15])
def test_fan_out_beyond_a_single_cross_core_id_still_schedules(capacity):
    # 'a' must signal ops on two pipes of core 1 at the moment it ends. One id carries both
    # flags only if its two WAITs are ordered (else one WAIT could take the other's SET), and
    # on two pipes they are not. A binary id (capacity 1) cannot even hold two SETs at once:
    # the flag-lifetime model proves that and the solver drops it; a counting id (capacity 15)
    # can, so the solver keeps it. Either way the sync planner orders the WAITs (the baton
    # plan: one gateway pipe per core) and the program verifies
    graph = OpGraph(
        [],
        [
            Op("a", "DMA", 10, core=0),
            Op("b", "DMA", 10, core=1, deps=["a"]),
            Op("c", "CUBE", 10, core=1, deps=["a"]),
        ],
    )
    hw = attrs.evolve(HW, sync=SyncModel(cross_core_event_ids=1, cross_core_capacity=capacity))
    sched = solve(graph, hw)
    assert dict(sched.stats)["event_budgets_relaxed"] == (1 if capacity == 1 else 0)
    final, program, plan = finalize(sched)
    assert plan.stats.ids_used and all(n == 1 for key, n in plan.stats.ids_used if "->core" in key)
    assert verify(program, hw, jitter=5).ok
    assert final.makespan == 20


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": "magic"},  # unknown method
        {"time_limit": 0},  # no time at all
        {"time_limit": float("nan")},  # not a number of seconds
        {"workers": 0},  # no worker
        {"seed": 1.5},  # not an integer
        {"time_mode": "sundial"},  # neither deterministic nor wall
    ],
)
def test_bad_arguments_are_input_errors(kwargs):
    graph = OpGraph([], [Op("a", "DMA", 10)])
    with pytest.raises(InputError) as err:
        solve(graph, HW, **kwargs)
    assert isinstance(err.value, StaticschedError)
    assert next(iter(kwargs)) in str(err.value)
