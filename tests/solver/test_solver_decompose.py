"""Decomposition: independent cores, identical cores solved once, workers, determinism."""

import json

import attrs

from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.solver import build_problems, solve
from staticsched.solver.decompose import core_groups

HW = Hardware(
    "quad",
    4,
    [Unit("DMA"), Unit("CUBE")],
    [Space("GM", 0), Space("L1", 65536, 32)],
    SyncModel(event_ids=2, flag_latency=2, cross_core_event_ids=4, cross_core_latency=5),
)


def pipeline(core: int, tiles: int, prefix: str, load=(60, 90), mm=(100, 70)) -> tuple[list, list]:
    """Double-buffered tiles on one core; names differ per core, structure does not."""
    items, ops = [], []
    for i in range(tiles):
        t = f"{prefix}t{i}"
        items.append(Item(t, "L1", 32768))
        ops.append(Op(f"{prefix}load{i}", "DMA", load[i % 2], core=core, writes=[t]))
        ops.append(Op(f"{prefix}mm{i}", "CUBE", mm[i % 2], core=core, reads=[t]))
    return items, ops


def four_cores(identical: bool = True) -> OpGraph:
    items, ops = [], []
    # interleave the cores' ops in the list: relative order per core is what counts
    parts = [pipeline(c, 6, f"c{c}.", mm=(100, 70) if identical or c < 2 else (100, 71)) for c in range(4)]
    for k in range(12):
        for _, os in parts:
            ops.append(os[k])
    for its, _ in parts:
        items.extend(its)
    return OpGraph(items, ops)


def dump(s) -> str:
    return json.dumps(
        {
            "ops": [attrs.astuple(o) for o in s.ops],
            "items": [attrs.astuple(p) for p in s.items],
            "makespan": s.makespan,
            "status": s.status,
        }
    )


def test_identical_cores_are_solved_once_and_mapped():
    graph = four_cores()
    graph.check(HW)
    pairs = build_problems(graph, HW)
    assert len(pairs) == 4 and len({p for p, _ in pairs}) == 1
    s = solve(graph, HW, time_limit=10)
    assert s.verify() == ()
    assert dict(s.stats)["distinct_problems"] == 1
    # the same timetable on every core, shifted to that core's ops
    per_core = [[(o.unit, o.start, o.end) for o in s.ops if o.core == c] for c in range(4)]
    assert all(p == per_core[0] for p in per_core)


def test_identical_cores_listing_their_items_in_other_orders_share_one_problem():
    # core 2's items listed backwards: the same problem object, each core's items mapped to
    # its own tiles in the problem's structural order
    graph = four_cores()
    items = list(graph.items)
    mine = [it for it in items if it.name.startswith("c2.")]
    shuffled = attrs.evolve(graph, items=[it for it in items if it not in mine] + mine[::-1])
    shuffled.check(HW)
    pairs = build_problems(shuffled, HW)
    assert len({id(p) for p, _ in pairs}) == 1
    names = [[shuffled.items[k].name.split(".", 1)[1] for k in pmap.items] for _, pmap in pairs]
    assert all(n == names[0] for n in names)
    assert pairs[0][0] == build_problems(graph, HW)[0][0]


def test_different_cores_are_distinct_problems():
    graph = four_cores(identical=False)
    assert len({p for p, _ in build_problems(graph, HW)}) == 2
    s = solve(graph, HW, time_limit=10)
    assert s.verify() == ()
    assert dict(s.stats)["distinct_problems"] == 2


def test_cross_core_edges_join_cores_into_one_group():
    graph = four_cores()
    ops = list(graph.ops)
    k = next(i for i, o in enumerate(ops) if o.id == "c2.load0")
    ops[k] = attrs.evolve(ops[k], deps=["c0.mm0"])
    joined = attrs.evolve(graph, ops=ops)
    assert core_groups(joined) == [(0, 2), (1,), (3,)]
    s = solve(joined, HW, time_limit=10)
    assert s.verify() == ()
    # the flag carries the cross-core latency
    assert s.op_time("c2.load0").start >= s.op_time("c0.mm0").end + 5


def test_repeated_runs_and_worker_processes_give_identical_schedules():
    graph = four_cores(identical=False)
    first = solve(graph, HW, time_limit=10, seed=3)
    again = solve(graph, HW, time_limit=10, seed=3)
    parallel = solve(graph, HW, time_limit=10, seed=3, workers=2)
    assert dump(first) == dump(again) == dump(parallel)
    assert "not reproducible" not in first.stop_reason


def test_progress_reports_makespan_bound_and_time():
    lines = []
    solve(four_cores(identical=False), HW, time_limit=10, progress=lines.append)
    assert any("makespan" in line and "bound" in line for line in lines)
    assert any(line.rstrip().endswith(" s") for line in lines)
