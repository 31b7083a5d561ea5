"""OpGraph: JSON round trip, access-order edges, and one failing test per check() rule."""

from __future__ import annotations

import copy
import json

import pytest
from common import preset

from staticsched.errors import GraphError, InputError
from staticsched.model.opgraph import (
    dumps_opgraph,
    load_opgraph,
    opgraph_from_dict,
    opgraph_to_dict,
)

HW = preset("double-buffer-demo")


def _base() -> dict:
    return {
        "format": "staticsched.opgraph",
        "version": 1,
        "items": {"t0": {"space": "L1", "bytes": 1024}, "t1": {"space": "L1", "bytes": 1024}},
        "ops": [
            {"id": "ld0", "unit": "DMA", "duration": 10, "writes": ["t0"]},
            {"id": "mm0", "unit": "CUBE", "duration": 20, "reads": ["t0"], "writes": ["t1"]},
            {"id": "mm1", "unit": "CUBE", "duration": 20, "reads": ["t1"]},
        ],
    }


def _check(mutate) -> str:
    d = copy.deepcopy(_base())
    mutate(d)
    with pytest.raises(GraphError) as exc:
        opgraph_from_dict(d, "g.json").check(HW)
    return str(exc.value)


def test_valid_graph_passes_and_round_trips(tmp_path):
    g = opgraph_from_dict(_base())
    g.check(HW)
    assert opgraph_from_dict(opgraph_to_dict(g)) == g
    f = tmp_path / "g.json"
    f.write_text(dumps_opgraph(g))
    assert load_opgraph(f) == g
    assert dumps_opgraph(load_opgraph(f)) == dumps_opgraph(g)


def test_example_round_trips_exactly():
    g = load_opgraph("examples/double_buffer.json")
    g.check(HW)
    assert opgraph_from_dict(json.loads(dumps_opgraph(g))) == g
    assert len(g.ops) == 20 and len(g.items) == 10


def test_access_order_edges():
    d = _base()
    # reuse t0: ld1 overwrites it after mm0 read it -> WAR mm0->ld1, and mm1b reads the new value
    d["ops"] += [
        {"id": "ld1", "unit": "DMA", "duration": 10, "writes": ["t0"]},
        {"id": "mm2", "unit": "CUBE", "duration": 20, "reads": ["t0"]},
    ]
    g = opgraph_from_dict(d)
    g.check(HW)
    edges = {(e.src, e.dst, e.reason) for e in g.edges}
    assert ("ld0", "mm0", "raw") in edges
    assert ("mm0", "ld1", "war") in edges
    assert ("ld1", "mm2", "raw") in edges
    assert ("ld0", "mm2", "raw") not in edges  # mm2 sees ld1's write, not ld0's


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["ops"][1].update(unit="VPU"), "op 'mm0': unknown unit 'VPU'"),
        (lambda d: d["items"]["t0"].update(space="L9"), "item 't0': unknown space 'L9'"),
        (lambda d: d["ops"].append(dict(d["ops"][2])), "op 'mm1': duplicate id"),
        (
            lambda d: d["items"]["t0"].update(bytes=70000),
            "item 't0': 70000 bytes do not fit space 'L1' of 65536 bytes",
        ),
        (lambda d: d["ops"][2].update(reads=["t1", "ghost"]), "op 'mm1': unknown item 'ghost'"),
        (lambda d: d["ops"][0].update(deps=["nope"]), "op 'ld0': dependency on unknown op 'nope'"),
        (lambda d: d["ops"][0].update(deps=["ld0"]), "op 'ld0': depends on itself"),
        (lambda d: d["ops"][0].update(core=3), "op 'ld0': core 3 out of range 0..0"),
        (lambda d: d["ops"][0].update(writes=[]), "item 't0': read by op 'mm0' before any op writes it"),
        (lambda d: d["ops"][0].update(kind="teleport"), "unknown kind 'teleport'"),
    ],
)
def test_check_rule_names_offender(mutate, needle):
    assert needle in _check(mutate)


def test_cycle_is_printed():
    def mutate(d):
        d["ops"][0]["deps"] = ["mm1"]  # ld0 -> mm0 -> mm1 -> ld0

    msg = _check(mutate)
    assert "dependency cycle:" in msg
    for op in ("ld0", "mm0", "mm1"):
        assert op in msg


@pytest.mark.parametrize("duration", [0, -3])
def test_nonpositive_duration(duration):
    d = _base()
    d["ops"][1]["duration"] = duration
    with pytest.raises(GraphError, match=r"op 'mm0': 'duration' = .* below the minimum 1"):
        opgraph_from_dict(d, "g.json")


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(extra=1), "g.json: unknown key 'extra'"),
        (lambda d: d["ops"][0].update(colour="red"), "op 'ld0': unknown key 'colour'"),
        (lambda d: d["items"]["t0"].update(colour="red"), "item 't0': unknown key 'colour'"),
        (lambda d: d.update(format="other"), "'format' must be 'staticsched.opgraph'"),
        (lambda d: d["ops"][0].update(duration="10"), "'duration' must be an integer"),
        (lambda d: d["ops"][0].update(reads="t0"), "'reads' must be a list"),
        (lambda d: d.update(ops={}), "'ops' must be a list"),
    ],
)
def test_structure_errors(mutate, needle):
    d = copy.deepcopy(_base())
    mutate(d)
    with pytest.raises(GraphError) as exc:
        opgraph_from_dict(d, "g.json")
    assert needle in str(exc.value)


def test_every_problem_at_once():
    def mutate(d):
        d["ops"][1]["unit"] = "VPU"
        d["items"]["t1"]["space"] = "L9"
        d["ops"][2]["deps"] = ["nope"]

    assert len(_check(mutate).splitlines()) == 3


def test_bad_json_file(tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"format": NaN}')
    with pytest.raises(InputError, match="not valid JSON"):
        load_opgraph(f)
    with pytest.raises(InputError, match="no such file"):
        load_opgraph(tmp_path / "missing.json")
