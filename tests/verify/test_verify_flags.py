"""Flag checks, deadlocks and jitter on small hand-written streams."""

from __future__ import annotations

import attrs
from common import SEED, preset

from benchmarks.samples import pingpong_program
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.verify import retime, verify

HW = SEED


def op(op_id: str, duration: int = 10, **kw) -> Instr:
    return Instr("op", 0, id=op_id, duration=duration, **kw)


def setf(src: str, dst: str, event: int = 0) -> Instr:
    return Instr("set_flag", 0, src=src, dst=dst, event=event)


def waitf(src: str, dst: str, event: int = 0) -> Instr:
    return Instr("wait_flag", 0, src=src, dst=dst, event=event)


def program(streams: dict, items=(), hw=HW, core: int = 0) -> Program:
    order = {u: i for i, u in enumerate(hw.unit_names)}
    st = [
        Stream(core, u, instrs) for u, instrs in sorted(streams.items(), key=lambda kv: order.get(kv[0], 99))
    ]
    return retime(Program(hw.name, "flags", 0, (), items, st), hw)


def test_two_pipe_wait_cycle_is_an_hb_cycle_with_its_chain():
    p = program(
        {
            "MTE2": [waitf("MTE1", "MTE2"), op("x"), setf("MTE2", "MTE1")],
            "MTE1": [waitf("MTE2", "MTE1"), op("y"), setf("MTE1", "MTE2")],
        }
    )
    report = verify(p, HW)
    (dl,) = report.by_check("deadlock")
    assert dl.kind == "hb_cycle"
    assert dl.cycle == 0
    assert set(dl.pipes) == {"MTE1", "MTE2"}
    assert "every unfinished pipe waits" in dl.message
    assert "WAIT_FLAG MTE2->MTE1 id 0 (core 0 MTE1#0, before 'y')" in dl.message
    assert "SET_FLAG MTE1->MTE2 id 0 (core 0 MTE1#2, after 'y')" in dl.message
    assert "back to" in dl.message
    # the counts match, so this is not an unpaired flag
    assert not report.by_check("flag")


def test_three_pipe_cycle_names_every_pipe():
    p = program(
        {
            "CUBE": [waitf("MTE2", "CUBE"), op("c"), setf("CUBE", "MTE1")],
            "MTE1": [waitf("CUBE", "MTE1"), op("m1"), setf("MTE1", "MTE2")],
            "MTE2": [waitf("MTE1", "MTE2"), op("m2"), setf("MTE2", "CUBE")],
        }
    )
    (dl,) = verify(p, HW).by_check("deadlock")
    assert dl.kind == "hb_cycle"
    assert set(dl.pipes) == {"CUBE", "MTE1", "MTE2"}
    assert len(dl.ops) == 3


def test_wait_without_set_is_stuck_and_unpaired():
    p = program({"MTE2": [op("x")], "MTE1": [op("y"), waitf("MTE2", "MTE1", 5), op("z")]})
    report = verify(p, HW)
    kinds = report.kinds()
    assert ("flag", "unpaired_wait") in kinds
    (dl,) = report.by_check("deadlock")
    assert dl.kind == "stuck"
    assert dl.cycle == 10  # MTE1 reaches the wait after 'y'
    assert "but the program has only 0 sets of it" in dl.message
    # the replay forces the wait open and goes on, so 'z' still ran
    assert report.stat["replay_makespan"] == 20


def test_static_flag_misuse_kinds():
    demo = preset("double-buffer-demo")
    p = program(
        {
            "DMA": [
                op("a"),
                setf("DMA", "CUBE", 9),  # id out of range (event_ids = 8)
                setf("DMA", "DMA", 1),  # to itself
                setf("DMA", "VECTOR", 2),  # no such pipe
                setf("CUBE", "DMA", 3),  # a CUBE->DMA set sitting in DMA's stream
            ],
            "CUBE": [waitf("DMA", "CUBE", 9), op("b")],
        },
        hw=demo,
    )
    report = verify(p, demo)
    kinds = {f.kind for f in report.by_check("flag")}
    assert {"id_out_of_range", "self_flag", "unknown_unit", "wrong_pipe", "unpaired_set"} <= kinds
    (oor,) = [f for f in report.findings if f.kind == "id_out_of_range"]
    assert "id 9 is outside 0..7" in oor.message
    (unk,) = [f for f in report.findings if f.kind == "unknown_unit"]
    assert "'VECTOR'" in unk.message


def test_cross_flag_ids_use_the_cross_budget():
    p = program({"MTE3": [op("s"), Instr("set_cross", 0, event=16, peer_core=0)]})
    report = verify(p, HW)
    kinds = {f.kind for f in report.by_check("flag")}
    assert {"id_out_of_range", "self_flag", "unpaired_set"} <= kinds
    assert any("cross_core_event_ids = 16" in f.message for f in report.findings)


def test_double_set_in_the_nominal_replay():
    # two sets of one id before the consumer gets to its first wait
    p = program(
        {
            "MTE2": [op("l0"), setf("MTE2", "MTE1"), op("l1"), setf("MTE2", "MTE1")],
            "MTE1": [op("busy", 100), waitf("MTE2", "MTE1"), op("m0"), waitf("MTE2", "MTE1"), op("m1")],
        }
    )
    report = verify(p, HW)
    (ds,) = [f for f in report.findings if f.kind == "double_set"]
    assert ds.check == "flag" and ds.cycle == 20
    assert "still set by SET_FLAG MTE2->MTE1 id 0 (core 0 MTE2#1, after 'l0')" in ds.message
    assert ("flag", "reuse_rule") in report.kinds()


def test_jitter_exposes_a_double_set_the_nominal_timing_hides():
    # nominally the second set (cycle 110) comes after the first wait (cycle 100); a faster
    # 'l1' or a slower 'busy' reverses that
    p = program(
        {
            "MTE2": [op("l0", 60), setf("MTE2", "MTE1"), op("l1", 50), setf("MTE2", "MTE1")],
            "MTE1": [op("busy", 100), waitf("MTE2", "MTE1"), op("m0"), waitf("MTE2", "MTE1"), op("m1")],
        }
    )
    nominal = verify(p, HW)
    assert not [f for f in nominal.findings if f.kind == "double_set"]
    assert ("flag", "reuse_rule") in nominal.kinds()
    jittered = verify(p, HW, jitter=10, seed=1)
    found = [f for f in jittered.findings if f.check == "jitter" and f.kind == "double_set"]
    assert found
    assert "jitter replay" in found[0].message
    assert verify(p, HW, jitter=10, seed=1).to_dict() == jittered.to_dict()


def test_correct_programs_stay_clean_under_jitter():
    report = verify(pingpong_program(), "double-buffer-demo", jitter=25, seed=3)
    assert report.ok, report.text()
    assert report.stat["jitter_replays"] == 25


def test_flags_in_a_timed_program_are_reported():
    p = attrs.evolve(pingpong_program(tiles=3), mode="timed")
    report = verify(p, "double-buffer-demo")
    assert ("flag", "flag_in_timed_mode") in report.kinds()


def test_timed_program_races_when_a_cycle_is_moved_earlier():
    items = [ProgItem("t", 0, "L1", 0, 64, 0, 30)]
    st = [
        Stream(0, "MTE1", [Instr("op", 10, id="r", duration=20, reads=("t",))]),
        Stream(0, "MTE2", [Instr("op", 0, id="w", duration=10, writes=("t",))]),
    ]
    p = Program(HW.name, "timed", 30, (), items, st)
    assert verify(p, HW).ok
    early = attrs.evolve(p, streams=[Stream(0, "MTE1", [attrs.evolve(st[0].instrs[0], cycle=5)]), st[1]])
    (race,) = verify(early, HW).by_check("race")
    assert race.kind == "RAW" and race.ops == ("w", "r")
    # exact timing is all a timed program has: slower writes break it
    jit = verify(p, HW, jitter=10)
    assert any(f.check == "jitter" and f.kind == "RAW" for f in jit.findings)
