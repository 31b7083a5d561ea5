"""Memory checks on declared placements and live ranges."""

from __future__ import annotations

import attrs

from benchmarks.samples import pingpong_program
from staticsched.verify import verify

DEMO = "double-buffer-demo"


def test_access_outside_the_declared_live_range():
    p = pingpong_program(tiles=4)
    # 'a2' is written by load2 at [160, 220) and read by mm2 at [260, 360) (see test below)
    items = [attrs.evolve(it, live_start=it.live_start + 5) if it.name == "a2" else it for it in p.items]
    (f,) = verify(attrs.evolve(p, items=items), DEMO).by_check("memory")
    assert f.kind == "outside_live_range"
    assert f.ops == ("load2",)
    assert "'load2' (core 0 DMA) accesses item 'a2' at cycles [160, 220)" in f.message
    assert "[165, 360)" in f.message


def test_live_ranges_of_the_pingpong_program():
    p = pingpong_program(tiles=4)
    live = {it.name: (it.live_start, it.live_end) for it in p.items}
    # load k+2 reuses slot k % 2 after mm k: loads at 0, 60, 160, 260; computes 60, 160, 260, 360
    assert live == {"a0": (0, 160), "a1": (60, 260), "a2": (160, 360), "a3": (260, 460)}


def test_items_sharing_bytes_while_live():
    p = pingpong_program(tiles=4)
    items = [attrs.evolve(it, offset=16384) if it.name == "a1" else it for it in p.items]
    report = verify(attrs.evolve(p, items=items), DEMO)
    overlaps = [f for f in report.by_check("memory") if f.kind == "item_overlap"]
    assert [f.message.split(" share ")[0] for f in overlaps] == [
        "items 'a0' [0, 32768) and 'a1' [16384, 49152)",
        "items 'a1' [16384, 49152) and 'a2' [0, 32768)",
    ]  # a1 [60, 260) and a3 [260, 460) share bytes but are never live together
    assert "bytes [16384, 32768) of L1 on core 0" in overlaps[0].message
    # the placements overlap, and so do the accesses: the race check agrees
    assert report.by_check("race")


def test_items_sharing_bytes_one_after_the_other_are_fine():
    # slot reuse: a0 and a2 share [0, 32768) but a2 is only live after a0 is dead
    p = pingpong_program(tiles=4)
    assert {it.offset for it in p.items if it.name in ("a0", "a2")} == {0}
    assert verify(p, DEMO).ok
