"""Program text and JSON forms: exact round trips, parse errors with line numbers, sniffing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest
from common import ROOT
from example_sets import LARGE as SLOW_EXAMPLES
from example_sets import WHOLE_CHIP, hw_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from staticsched.api import as_opgraph
from staticsched.emit import (
    dumps_program_json,
    dumps_program_text,
    finalize,
    load_program,
    loads_program,
    parse_program_text,
    program_from_dict,
    program_to_dict,
)
from staticsched.errors import ProgramError
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import Tensor
from staticsched.model.opkinds import KINDS
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.solver import solve

EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
# the 4096^3 GEMM lowers to ~170k ops, attention and the FFN to 40k-90k: round trips of them
# are long explorations
LARGE = {f"{stem}.json" for stem in WHOLE_CHIP | SLOW_EXAMPLES}


def roundtrip(program: Program) -> None:
    text = dumps_program_text(program)
    assert parse_program_text(text) == program
    assert dumps_program_text(parse_program_text(text)) == text
    data = program_to_dict(program)
    assert program_from_dict(json.loads(json.dumps(data))) == program
    js = dumps_program_json(program)
    assert json.loads(js) == data
    assert loads_program(js) == program
    assert loads_program(text) == program


def example_programs(path: Path) -> list[Program]:
    hw = load_hardware(hw_for(path.stem))
    schedule = solve(as_opgraph(path, hw), hw, method="list")
    return [finalize(schedule, mode=mode)[1] for mode in ("flags", "timed")]


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name not in LARGE], ids=lambda p: p.stem)
def test_every_example_program_round_trips(path):
    for program in example_programs(path):
        assert program.streams and any(s.instrs for s in program.streams)
        roundtrip(program)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name in LARGE], ids=lambda p: p.stem)
def test_large_example_program_round_trips(path):
    for program in example_programs(path):
        roundtrip(program)


def test_examples_exist():
    # the parametrised round trip above must not silently run on nothing
    assert {p.name for p in EXAMPLES} >= {"double_buffer.json", "matmul_gelu.json"}
    assert len([p for p in EXAMPLES if p.name not in LARGE]) >= 3


# --------------------------------------------------------------------------- random programs

TRICKY = ["", "->", "a=b", '"', "#x", "x y", "\n", "-", "é", "\\", "{}", "=", "'", "\u2028", "a\tb"]
names = st.one_of(
    st.sampled_from(TRICKY), st.text(max_size=6), st.from_regex(r"[a-z][a-z0-9_.]{0,5}", fullmatch=True)
)
ints = st.integers(-(10**15), 10**15)
regions = st.tuples(st.tuples(ints, ints), st.tuples(ints, ints))
ATTR_VALUES = {
    "int": ints,
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
    "str": names,
    "region": regions,
}


@st.composite
def micro_op(draw, kind: str) -> Instr:
    declared = list(KINDS[kind].attributes) if kind in KINDS else []
    chosen = draw(st.permutations(declared)) if declared else []
    chosen = chosen[: draw(st.integers(0, len(chosen)))]
    attr_pairs = tuple((name, draw(ATTR_VALUES[t])) for name, t in chosen)
    return Instr(
        kind,
        draw(ints),
        id=draw(names),
        duration=draw(ints),
        reads=draw(st.lists(names, max_size=3)),
        writes=draw(st.lists(names, max_size=2)),
        attrs=attr_pairs,
    )


instrs = st.one_of(
    st.sampled_from([*KINDS, "op"]).flatmap(micro_op),
    st.builds(
        lambda k, c, s, d, e: Instr(k, c, src=s, dst=d, event=e),
        st.sampled_from(["set_flag", "wait_flag"]),
        ints,
        names,
        names,
        ints,
    ),
    st.builds(
        lambda k, c, e, p: Instr(k, c, event=e, peer_core=p),
        st.sampled_from(["set_cross", "wait_cross"]),
        ints,
        ints,
        ints,
    ),
)
prog_items = st.builds(
    ProgItem,
    name=names,
    core=ints,
    space=names,
    offset=ints,
    bytes=ints,
    live_start=ints,
    live_end=ints,
    dtype=names,
    shape=st.lists(ints, max_size=3).map(tuple),
)
programs = st.builds(
    Program,
    hw=names,
    mode=names,
    makespan=ints,
    tensors=st.lists(st.builds(Tensor, names, st.lists(ints, max_size=3).map(tuple), names), max_size=3),
    items=st.lists(prog_items, max_size=4),
    streams=st.lists(st.builds(Stream, ints, names, st.lists(instrs, max_size=6)), max_size=4),
    source=st.one_of(st.just(""), st.text(max_size=40)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_random_programs_round_trip_exactly(program):
    roundtrip(program)


# --------------------------------------------------------------------------- refusals and errors


@pytest.mark.parametrize(
    ("instr", "problem"),
    [
        (Instr("set_flag", 0, id="x", src="A", dst="B", event=0), "field 'id' is not used"),
        (Instr("wait_cross", 0, src="A", event=0, peer_core=1), "field 'src' is not used"),
        (Instr("op", 0, id="x", duration=1, attrs={"m": 1}), "attribute 'm' is not declared"),
        (Instr("mmad", 0, id="x", duration=1, attrs={"m": "big"}), "attribute 'm' must be int"),
        (Instr("mmad", 0, id="x", duration=1, event=3), "field 'event' is not used"),
        (Instr("teleport", 0), "unknown kind 'teleport'"),
    ],
)
def test_instructions_that_cannot_round_trip_are_refused(instr, problem):
    program = Program("hw", "flags", 1, (), (), [Stream(0, "A", [instr])])
    for dump in (dumps_program_text, dumps_program_json):
        with pytest.raises(ProgramError) as err:
            dump(program)
        assert problem in str(err.value) and "stream core 0 unit 'A' instr 0" in str(err.value)


GOOD = """\
format staticsched.program 1
hw demo
mode flags
makespan 160
item t0 core=0 space=L1 offset=0 bytes=64 live=0:160 dtype=float16 shape=4x8
stream 0 DMA 2
  0 LOAD load0 60 -> t0 tensor=a region=0:4,0:8 transpose=0
  60 SET_FLAG DMA CUBE 0
stream 0 CUBE 2
  60 WAIT_FLAG DMA CUBE 0
  60 MMAD mm0 100 t0 t0 -> t1 m=4 n=8 k=8 init=1
end
"""


def test_a_hand_written_program_parses():
    p = parse_program_text(GOOD)
    mm = p.streams[1].instrs[1]
    assert (mm.kind, mm.reads, mm.writes, mm.attr if hasattr(mm, "attr") else dict(mm.attrs)) == (
        "mmad",
        ("t0", "t0"),
        ("t1",),
        {"m": 4, "n": 8, "k": 8, "init": True},
    )
    load = p.streams[0].instrs[0]
    assert dict(load.attrs) == {"tensor": "a", "region": ((0, 4), (0, 8)), "transpose": False}
    assert p.items[0].shape == (4, 8) and p.items[0].dtype == "float16"


def _break(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("", 1, "empty program"),
        (_break("format staticsched.program 1", "format staticsched.program 2"), 1, "format must be"),
        (_break("hw demo\n", ""), 11, "no hw line"),
        (_break("makespan 160", "makespan soon"), 4, "expected the makespan (an integer)"),
        (_break("live=0:160", "live=0-160"), 5, "field 'live' must be start:end"),
        (_break(" shape=4x8", ""), 5, "missing field(s) shape"),
        (_break("offset=0", "offset=0 offset=1"), 5, "field 'offset' given twice"),
        (
            _break("stream 0 DMA 2", "stream 0 DMA 3"),
            9,
            "expected the issue cycle (an integer), got 'stream'",
        ),
        (_break("  0 LOAD", "  0 BEAM"), 7, "expected a mnemonic"),
        (_break("load0 60 -> t0", "load0 60 t0"), 7, "expected '->'"),
        (_break("transpose=0", "transpose=maybe"), 7, "attribute 'transpose' must be bool"),
        (_break("transpose=0", "colour=red"), 7, "has no attribute 'colour'"),
        (_break("60 SET_FLAG DMA CUBE 0", "60 SET_FLAG DMA CUBE zero"), 8, "the event id (an integer)"),
        (_break("tensor=a", 'tensor="a'), 7, "cannot read a token"),
        (_break("end\n", ""), 11, "no 'end' line"),
        (_break("end\n", "end\nhw again\n"), 13, "text after 'end'"),
        (_break("hw demo", "hw demo\nhw other"), 3, "'hw' given twice"),
        (_break("mode flags", "mood flags"), 3, "unknown keyword 'mood'"),
        (_break("k=8 init=1", "k=8 init=1 left"), 11, "after the key=value fields"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 60 else None,
)
def test_parse_errors_name_the_line(text, line, problem):
    with pytest.raises(ProgramError) as err:
        parse_program_text(text)
    msg = str(err.value)
    assert msg.startswith(f"line {line}: "), msg
    assert problem in msg, msg


def test_stream_count_error_mentions_the_truncation():
    with pytest.raises(ProgramError, match=r"stream 0 DMA announces 3 instructions, the file ends after 2"):
        parse_program_text(
            GOOD.replace("stream 0 DMA 2", "stream 0 DMA 3")
            .replace("stream 0 CUBE 2\n", "")
            .replace("  60 WAIT_FLAG DMA CUBE 0\n  60 MMAD mm0 100 t0 t0 -> t1 m=4 n=8 k=8 init=1\nend\n", "")
        )


def test_comments_and_blank_lines_are_ignored():
    commented = "# a comment\n\n" + GOOD.replace("stream 0 CUBE 2\n", "stream 0 CUBE 2\n  # inside\n\n")
    assert parse_program_text(commented) == parse_program_text(GOOD)


def test_load_program_sniffs_both_forms(tmp_path):
    p = parse_program_text(GOOD)
    (tmp_path / "p.txt").write_text(dumps_program_text(p))
    (tmp_path / "p.json").write_text(dumps_program_json(p))
    (tmp_path / "p.dat").write_text("  \n" + dumps_program_json(p))
    assert load_program(tmp_path / "p.txt") == p
    assert load_program(tmp_path / "p.json") == p
    assert load_program(tmp_path / "p.dat") == p


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        (b"\xff\xfe", "cannot read"),
        (b'{"format": "staticsched.program"', "not valid JSON"),
        (b'{"format": "staticsched.program", "version": 1, "makespan": NaN}', "NaN is not allowed"),
        (b'{"format": "other", "version": 1, "hw": "x", "mode": "flags", "makespan": 1}', "'format' must be"),
        (b"format staticsched.program 1\nhw x\n", "line 2: "),
    ],
)
def test_load_program_errors_are_program_errors(tmp_path, content, problem):
    path = tmp_path / "prog"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ProgramError) as err:
        load_program(path)
    assert problem in str(err.value) and str(path) in str(err.value)


def test_json_form_reports_every_problem_at_once():
    data = program_to_dict(parse_program_text(GOOD))
    data["streams"][0]["instrs"][0]["cycle"] = "zero"
    data["streams"][1]["instrs"][1]["attrs"]["m"] = 1.5
    data["items"][0]["colour"] = "red"
    with pytest.raises(ProgramError) as err:
        program_from_dict(data, "p.json")
    lines = err.value.problems
    assert any("streams[0].instrs[0]: 'cycle' must be an integer" in x for x in lines)
    assert any("streams[1].instrs[1]: attribute 'm' must be int" in x for x in lines)
    assert any("items[0]: unknown key 'colour'" in x for x in lines)


def test_a_repeated_record_with_a_value_of_another_type_is_still_refused():
    # identical set/wait records are decoded once (program_json._interned): True == 1 and
    # hash alike in Python, but an event id of true is not an integer in the format
    data = program_to_dict(parse_program_text(GOOD))
    sync = next((s, k) for s, st in enumerate(data["streams"]) for k, ins in enumerate(st["instrs"])
                if "event" in ins and "id" not in ins)
    s, k = sync
    record = dict(data["streams"][s]["instrs"][k])
    twin = {key: (True if key == "event" and record[key] == 1 else
                  False if key == "event" and record[key] == 0 else value)
            for key, value in record.items()}
    assert twin == record and twin["event"] is not record["event"]
    data["streams"][s]["instrs"].insert(k + 1, twin)
    with pytest.raises(ProgramError) as err:
        program_from_dict(data, "p.json")
    assert any(f"streams[{s}].instrs[{k + 1}]: 'event' must be an integer" in x
               for x in err.value.problems), err.value.problems


def test_the_documented_example_parses_and_round_trips():
    doc = (ROOT / "docs" / "program-format.md").read_text()
    blocks = re.findall(r"```text\n(.*?)```", doc, re.S)
    examples = [b for b in blocks if b.startswith("format staticsched.program 1")]
    assert examples, "docs/program-format.md lost its example"
    for text in examples:
        program = parse_program_text(text)
        assert any(s.instrs for s in program.streams)
        roundtrip(program)


def test_timed_programs_keep_their_cycles_and_have_no_flags():
    (timed,) = [p for p in example_programs(ROOT / "examples" / "double_buffer.json") if p.mode == "timed"]
    assert not any(i.is_sync for s in timed.streams for i in s.instrs)
    assert parse_program_text(dumps_program_text(timed)).mode == "timed"


def test_names_needing_quotes_are_quoted_once():
    program = Program(
        'hw "x"',
        "flags",
        1,
        (),
        [ProgItem("my item", 0, "", 0, 0, 0, 1)],
        [Stream(0, "A=B", [Instr("op", 0, id="->", duration=1, writes=["my item"])])],
    )
    text = dumps_program_text(program)
    assert 'hw "hw \\"x\\""' in text and '"my item"' in text and 'stream 0 "A=B" 1' in text
    assert '0 OP "->" 1 -> "my item"' in text
    assert attrs.evolve(parse_program_text(text)) == program
