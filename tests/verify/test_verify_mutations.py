"""Every mutation of a correct program is caught with the right finding; the original is clean."""

from __future__ import annotations

import functools

import attrs
import pytest
from common import preset
from mutations import PROGRAM_MUTATIONS, corrupt_load_region, shrink_capacity

from benchmarks.samples import matmul_program, pingpong_program
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import Tensor
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.verify import retime, verify


@functools.cache
def programs() -> dict[str, tuple[Program, str]]:
    return {
        "pingpong": (pingpong_program(tiles=6), "double-buffer-demo"),
        "pingpong3": (pingpong_program(tiles=7, slots=3, tile_bytes=16384), "double-buffer-demo"),
        "matmul": (matmul_program(m=80, n=64, k=96), "seed-davinci"),
        "matmul2core": (matmul_program(m=64, n=96, k=64, cores=2), "seed-davinci"),
    }


def has(report, check: str, kind: str) -> bool:
    return any(f.check == check and (not kind or f.kind == kind) for f in report.findings)


@pytest.mark.parametrize("prog", ["pingpong", "pingpong3", "matmul", "matmul2core"])
def test_unmutated_programs_report_nothing(prog):
    p, hw = programs()[prog]
    report = verify(p, hw, jitter=2)
    assert report.ok, report.text()


@pytest.mark.parametrize("prog", ["pingpong", "pingpong3", "matmul", "matmul2core"])
@pytest.mark.parametrize("mutation", sorted(PROGRAM_MUTATIONS))
def test_mutation_is_caught(prog, mutation):
    p, hw = programs()[prog]
    fn, (check, kind) = PROGRAM_MUTATIONS[mutation]
    for seed in range(4):
        mutant = fn(p, seed)
        assert mutant != p
        report = verify(mutant, hw)
        assert has(report, check, kind), f"seed {seed}:\n{report.text()}"


@pytest.mark.parametrize("prog", ["pingpong", "matmul"])
def test_retimed_mutants_are_still_caught(prog):
    # re-timing removes the conformance and live-range noise: the sync bug alone must show
    p, hw = programs()[prog]
    for mutation in ("delete_wait", "hoist_above_wait", "swap_ops", "reuse_id_early"):
        fn, (check, kind) = PROGRAM_MUTATIONS[mutation]
        mutant = retime(fn(p, 1), load_hardware(hw))
        report = verify(mutant, hw)
        assert has(report, check, kind), f"{mutation}:\n{report.text()}"
        assert not report.by_check("conformance")


@pytest.mark.parametrize("prog", ["pingpong", "matmul"])
def test_shrunk_space_is_out_of_bounds(prog):
    p, hw = programs()[prog]
    small = shrink_capacity(load_hardware(hw), p)
    report = verify(p, small)
    assert has(report, "memory", "out_of_bounds"), report.text()
    assert verify(p, hw).ok


def test_misaligned_item():
    p, hw = programs()["pingpong"]
    items = [attrs.evolve(it, offset=it.offset + 16) if it.name == "a1" else it for it in p.items]
    report = verify(attrs.evolve(p, items=items), hw)
    (f,) = [f for f in report.findings if f.kind == "misaligned"]
    assert f.check == "memory"
    assert "offset 32784" in f.message and "alignment 32" in f.message


def test_corrupted_load_region_is_not_a_sync_bug():
    # same-size region: sync, memory and timing stay clean; only numbers can catch it
    p, hw = programs()["matmul"]
    report = verify(corrupt_load_region(p, 0), hw)
    assert report.ok


def test_overlapping_stores_of_two_cores_race_inter_core():
    p, hw = programs()["matmul2core"]
    streams = list(p.streams)
    first_store = {}
    for s, st in enumerate(streams):
        for i, ins in enumerate(st.instrs):
            if ins.kind == "store" and st.core not in first_store:
                first_store[st.core] = (s, i, ins)
    region0 = dict(first_store[0][2].attrs)["region"]
    s, i, ins = first_store[1]
    instrs = list(streams[s].instrs)
    instrs[i] = attrs.evolve(ins, attrs=dict(dict(ins.attrs), region=region0))
    streams[s] = Stream(streams[s].core, streams[s].unit, instrs)
    report = verify(attrs.evolve(p, streams=streams), hw)
    races = report.by_check("race")
    assert [f.kind for f in races] == ["WAW"]
    assert "inter-core" in races[0].message and "GM C[0:32, 0:32]" in races[0].message
    assert races[0].core == -1


def test_cross_core_flag_orders_gm_producer_and_consumer():
    # core 0 stores a tile of C, tells core 1, which loads it back: the cross flag is the only
    # thing ordering the two GM accesses
    region = ((0, 16), (0, 16))

    def build(with_wait: bool) -> Program:
        at = {"tensor": "C", "region": region}
        hw = preset("seed-davinci")
        store, load = hw.path("UB", "GM").cycles(512), hw.path("GM", "L1").cycles(512)
        st0 = [
            Instr("op", 0, id="mk", duration=1, writes=("u0",)),  # produce the UB tile
            Instr("store", 0, id="st", duration=store, reads=("u0",), attrs=at),
            Instr("set_cross", 0, event=3, peer_core=1),
        ]
        st1 = [Instr("wait_cross", 0, event=3, peer_core=0)] if with_wait else []
        st1.append(Instr("load", 0, id="ld", duration=load, writes=("l1",), attrs=at))
        items = [
            ProgItem("u0", 0, "UB", 0, 512, 0, 0, "float16", (16, 16)),
            ProgItem("l1", 1, "L1", 0, 512, 0, 0, "float16", (16, 16)),
        ]
        tensors = [Tensor("C", (16, 16))]
        streams = [Stream(0, "MTE3", st0), Stream(1, "MTE2", st1)]
        return retime(
            Program("seed-davinci", "flags", 0, tensors, items, streams), preset("seed-davinci")
        )

    assert verify(build(True), "seed-davinci").ok
    report = verify(build(False), "seed-davinci")
    kinds = report.kinds()
    # unordered, the load can run before the store: which of the two is first in the replay
    # decides the name (RAW or WAR); either way it is an inter-core race
    assert {("race", "RAW"), ("race", "WAR")} & kinds
    assert ("flag", "unpaired_set") in kinds
    assert "inter-core" in report.by_check("race")[0].message
