"""Broken programs give ``input`` findings (or a StaticschedError), never a crash."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.samples import matmul_program
from staticsched.errors import StaticschedError
from staticsched.model.program import Instr, Program, Stream
from staticsched.verify import Report, verify

HW = "seed-davinci"
BASE = matmul_program(m=48, n=32, k=64)
R = ((0, 32), (0, 32))


def edit_instr(p: Program, op_id: str, **changes) -> Program:
    streams = [
        Stream(s.core, s.unit, [attrs.evolve(i, **changes) if i.id == op_id else i for i in s.instrs])
        for s in p.streams
    ]
    return attrs.evolve(p, streams=streams)


def edit_item(p: Program, name: str, **changes) -> Program:
    return attrs.evolve(p, items=[attrs.evolve(it, **changes) if it.name == name else it for it in p.items])


def input_kinds(report: Report) -> set[str]:
    return {f.kind for f in report.by_check("input")}


@pytest.mark.parametrize(
    ("mutant", "kind", "text"),
    [
        (attrs.evolve(BASE, hw="ascend-a2-like"), "hw_mismatch", "'ascend-a2-like'"),
        (attrs.evolve(BASE, mode="fast"), "bad_mode", "'fast'"),
        (edit_instr(BASE, "c0_mvA0", reads=("nosuch",)), "unknown_item", "'nosuch'"),
        (edit_instr(BASE, "c0_mvA0", kind="teleport"), "unknown_kind", "'teleport'"),
        (edit_instr(BASE, "c0_mvA0", id="c0_mvB0"), "duplicate_op", "'c0_mvB0'"),
        (edit_instr(BASE, "c0_mvA0", duration=0), "bad_duration", "got 0"),
        (edit_instr(BASE, "c0_mvA0", cycle=-4), "bad_cycle", "-4"),
        (
            edit_instr(BASE, "c0_ldA0", attrs={"tensor": "Q", "region": ((0, 32), (0, 32))}),
            "unknown_tensor",
            "'Q'",
        ),
        (
            edit_instr(BASE, "c0_ldA0", attrs={"tensor": "A", "region": ((5, 5), (0, 32))}),
            "bad_region",
            "region",
        ),
        (edit_instr(BASE, "c0_ldA0", attrs={"region": ((0, 32), (0, 32))}), "missing_attr", "'tensor'"),
        (edit_item(BASE, "c0_la0", space="L9"), "unknown_space", "'L9'"),
        (edit_item(BASE, "c0_la0", core=3), "wrong_core", "core 3"),
        (edit_item(BASE, "c0_la0", core=99), "unknown_core", "core 99"),
        (edit_item(BASE, "c0_la0", shape=(64, 64)), "bad_shape", "needs 8192 bytes"),
        (edit_item(BASE, "c0_la0", dtype="float8"), "bad_dtype", "'float8'"),
        (attrs.evolve(BASE, items=[*BASE.items, BASE.items[0]]), "duplicate_item", "declared twice"),
        (attrs.evolve(BASE, streams=[*BASE.streams, Stream(0, "TPU", [])]), "unknown_unit", "'TPU'"),
        (attrs.evolve(BASE, streams=[*BASE.streams, Stream(40, "CUBE", [])]), "unknown_core", "core 40"),
        (attrs.evolve(BASE, streams=[*BASE.streams, Stream(0, "CUBE", [])]), "duplicate_stream", "CUBE"),
    ],
)
def test_input_problems_are_findings(mutant, kind, text):
    report = verify(mutant, HW, numeric=True, jitter=1)
    hits = [f for f in report.by_check("input") if f.kind == kind]
    assert hits, report.text()
    assert text in hits[0].message
    assert verify(BASE, HW).ok


def test_gm_region_outside_its_tensor_is_out_of_bounds():
    p = edit_instr(BASE, "c0_ldA0", attrs={"tensor": "A", "region": ((40, 72), (0, 32)), "transpose": False})
    (f,) = verify(p, HW).by_check("memory")
    assert f.kind == "out_of_bounds"
    assert "GM A[40:72, 0:32] is outside tensor 'A' of shape [48, 64]" in f.message


def test_unknown_hardware_is_an_error():
    with pytest.raises(StaticschedError):
        verify(BASE, "no-such-hardware")


# --------------------------------------------------------------------------- fuzzing

INTS = st.sampled_from([-1, 0, 1, 3, 7, 8, 16, 40, 10**9])
NAMES = st.sampled_from(["", "MTE2", "CUBE", "L1", "GM", "A", "C", "c0_la0", "c0_c0", "zz"])
INSTR_FIELDS = {
    "kind": st.sampled_from(["op", "load", "mmad", "store", "vec", "set_flag", "wait_cross", "bogus"]),
    "cycle": INTS,
    "duration": INTS,
    "id": NAMES,
    "reads": st.lists(NAMES, max_size=3).map(tuple),
    "writes": st.lists(NAMES, max_size=2).map(tuple),
    "src": NAMES,
    "dst": NAMES,
    "event": INTS,
    "peer_core": INTS,
    "attrs": st.sampled_from(
        [
            {},
            {"tensor": "A"},
            {"tensor": "C", "region": ((0, 16), (0, 16))},
            {"tensor": "A", "region": "0:16,0:16"},
            {"op": "nope"},
            {"m": 32, "n": 32, "k": 32, "init": False},
        ]
    ),
}
ITEM_FIELDS = {
    "core": INTS,
    "space": NAMES,
    "offset": INTS,
    "bytes": INTS,
    "live_start": INTS,
    "live_end": INTS,
    "dtype": st.sampled_from(["", "float16", "float32", "int8", "weird"]),
    "shape": st.sampled_from([(), (32, 32), (16,), (0, 4), (-1, 2), (2, 2, 2)]),
}


@st.composite
def corrupted(draw) -> Program:
    p = BASE
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            s = draw(st.integers(0, len(p.streams) - 1))
            i = draw(st.integers(0, len(p.streams[s].instrs) - 1))
            field = draw(st.sampled_from(sorted(INSTR_FIELDS)))
            streams = list(p.streams)
            instrs = list(streams[s].instrs)
            instrs[i] = attrs.evolve(instrs[i], **{field: draw(INSTR_FIELDS[field])})
            streams[s] = Stream(streams[s].core, streams[s].unit, instrs)
            p = attrs.evolve(p, streams=streams)
        else:
            j = draw(st.integers(0, len(p.items) - 1))
            field = draw(st.sampled_from(sorted(ITEM_FIELDS)))
            items = list(p.items)
            items[j] = attrs.evolve(items[j], **{field: draw(ITEM_FIELDS[field])})
            p = attrs.evolve(p, items=items)
    return p


@settings(max_examples=150, deadline=None)
@given(corrupted())
def test_corrupted_programs_never_crash(p):
    report = verify(p, HW, numeric=True, jitter=1)
    assert isinstance(report, Report)
    assert report.text()


def test_a_sync_instruction_is_recognised_by_kind_only():
    p = Program(HW, "flags", 0, (), (), [Stream(0, "CUBE", [Instr("set_flag", 0, src="CUBE", dst="MTE1")])])
    report = verify(p, HW)
    assert ("flag", "unpaired_set") in report.kinds()
