"""``Schedule.verify()``: nothing on a valid timetable, one named line per kind of violation."""


import attrs
import pytest
from common import EXAMPLES, preset

from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph, load_opgraph
from staticsched.model.schedule import OpTime, Placement, Schedule, SyncEvent
from staticsched.solver import solve


@pytest.fixture(scope="module")
def good() -> Schedule:
    graph = load_opgraph(EXAMPLES / "double_buffer.json")
    return solve(graph, preset("double-buffer-demo"), time_limit=10)


def _op(s: Schedule, op_id: str, **changes) -> Schedule:
    ops = [attrs.evolve(o, **changes) if o.id == op_id else o for o in s.ops]
    return attrs.evolve(s, ops=ops)


def _item(s: Schedule, name: str, **changes) -> Schedule:
    items = [attrs.evolve(p, **changes) if p.item == name else p for p in s.items]
    return attrs.evolve(s, items=items)


def _one(lines: tuple[str, ...], *needles: str) -> None:
    assert lines, "the violation was not reported"
    assert any(all(n in line for n in needles) for line in lines), lines


def test_valid_schedule_reports_nothing(good):
    assert good.verify() == ()


def test_ops_overlapping_on_a_pipe(good):
    mm0 = good.op_time("mm0")
    bad = _op(good, "mm1", start=mm0.start + 50, end=mm0.start + 150)
    _one(bad.verify(), "'mm0'", "'mm1'", "overlap", "CUBE")


def test_wrong_duration(good):
    load0 = good.op_time("load0")
    _one(_op(good, "load0", end=load0.end + 1).verify(), "'load0'", "61 cycles", "duration is 60")


def test_edge_violated(good):
    # mm0 moved before its load finished (and nothing else moved)
    bad = _op(good, "mm0", start=30, end=130)
    _one(bad.verify(), "'load0' -> 'mm0'", "ends at 60", "starts at 30")


def test_items_sharing_bytes_while_live(good):
    t0 = good.items[0]
    bad = _item(good, "t1", offset=t0.offset)
    _one(bad.verify(), "'t0'", "'t1'", "share bytes")


def test_misaligned_and_out_of_bounds_offsets(good):
    _one(_item(good, "t0", offset=16).verify(), "'t0'", "not a multiple", "32")
    _one(_item(good, "t0", offset=65536).verify(), "'t0'", "outside L1")


def test_capacity_exceeded_over_time(good):
    small = Hardware("small", 1, good.hw.units, [Space("GM", 0), Space("L1", 40000, 32)], good.hw.sync)
    lines = attrs.evolve(good, hw=small).verify()
    _one(lines, "L1", "holds 65536 B", "capacity 40000 B")


def test_live_range_must_cover_accesses(good):
    mm0 = good.op_time("mm0")
    _one(_item(good, "t0", end=mm0.end - 1).verify(), "'t0'", "does not cover")


def test_unbounded_item_must_sit_at_zero():
    graph = OpGraph([Item("g", "GM", 64)], [Op("w", "DMA", 5, writes=["g"])])
    hw = preset("double-buffer-demo")
    s = solve(graph, hw)
    assert s.verify() == ()
    _one(_item(s, "g", offset=64).verify(), "'g'", "unbounded", "offset 64")


def test_address_reuse_needs_the_flag_latency():
    # t0 and t1 share bytes; mm0 (CUBE) reads t0 last and load1 (DMA) overwrites it, so load1
    # must wait for mm0's end plus the flag latency 5 -- here it starts right at that end
    hw = Hardware("lat", 1, [Unit("DMA"), Unit("CUBE")], [Space("L1", 1024, 32)], SyncModel(flag_latency=5))
    graph = OpGraph(
        [Item("t0", "L1", 1024), Item("t1", "L1", 1024)],
        [
            Op("load0", "DMA", 60, writes=["t0"]),
            Op("mm0", "CUBE", 100, reads=["t0"]),
            Op("load1", "DMA", 60, writes=["t1"]),
        ],
    )
    ops = [
        OpTime("load0", 0, "DMA", 0, 60),
        OpTime("mm0", 0, "CUBE", 65, 165),
        OpTime("load1", 0, "DMA", 165, 225),
    ]
    items = [Placement("t0", 0, "L1", 0, 1024, 0, 165), Placement("t1", 0, "L1", 0, 1024, 165, 225)]
    s = Schedule(graph, hw, ops, items, (), 225, 225, "feasible")
    _one(s.verify(), "'t1' reuses bytes of 't0'", "'load1'", "165", "latency 5")
    fixed = attrs.evolve(
        s,
        ops=[*ops[:2], OpTime("load1", 0, "DMA", 170, 230)],
        items=[items[0], attrs.evolve(items[1], start=170, end=230)],
        makespan=230,
        lower_bound=230,
    )
    assert fixed.verify() == ()


def _event(**kw) -> SyncEvent:
    base = {
        "kind": "flag",
        "core": 0,
        "src": "DMA",
        "dst": "CUBE",
        "event": 0,
        "producer": "load0",
        "consumer": "mm0",
        "set_cycle": 60,
        "wait_cycle": 60,
    }
    return SyncEvent(**{**base, **kw})


def test_event_ids_in_range_and_not_shared_while_live(good):
    assert attrs.evolve(good, events=[_event()]).verify() == ()
    _one(attrs.evolve(good, events=[_event(event=8)]).verify(), "load0 -> mm0", "id out of range 0..7")
    clash = [
        _event(set_cycle=60, wait_cycle=160),
        _event(producer="load1", consumer="mm1", set_cycle=120, wait_cycle=160),
    ]
    _one(attrs.evolve(good, events=clash).verify(), "use one id at once", "set at 120")
    _one(attrs.evolve(good, events=[_event(dst="DMA")]).verify(), "to itself")
    _one(attrs.evolve(good, events=[_event(kind="cross", dst_core=0)]).verify(), "within core 0")


def test_summary_numbers(good):
    _one(attrs.evolve(good, makespan=good.makespan + 1).verify(), "makespan 1061", "last op end 1060")
    _one(attrs.evolve(good, lower_bound=good.makespan + 1).verify(), "lower bound 1061 exceeds")
    _one(attrs.evolve(good, status="great").verify(), "status 'great'")


def test_timing_for_the_wrong_op_or_core(good):
    _one(attrs.evolve(good, ops=good.ops[:-1]).verify(), "19 ops", "graph has 20")
    _one(_op(good, "load0", core=1).verify(), "'load0' timed on core 1")
    _one(_item(good, "t0", core=1).verify(), "'t0' placed on core 1")
