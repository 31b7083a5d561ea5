"""Layouts (issue 25, item 8): a GM tensor's ``"layout"`` (ND or NZ), the Cube's
``nd2nz_derate`` and the ``nd2nz`` attribute of the loads that convert an ND operand on the
fly; one definition of the derated duration that the lowering, the solver, the program and
the verifier share; nothing changes on a chip without the derate."""

from __future__ import annotations

import copy
import json
import math

import pytest
from common import EXAMPLES, GOLDEN, preset
from taskcases import run_cli

from staticsched.api import compile_graph
from staticsched.emit import summary_lines
from staticsched.errors import GraphError, HardwareError
from staticsched.explore.overrides import override_hardware
from staticsched.formats import dumps_program_json, dumps_program_text, loads_program
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware import RATE_DENOM
from staticsched.model.hardware_toml import hardware_document, hardware_from_dict
from staticsched.model.opkinds import path_units
from staticsched.verify import verify


def _graph(m: int = 48, k: int = 256, n: int = 128, *, a: str = "ND", b: str = "NZ",
           tiling: bool = True) -> dict:
    tensors: dict = {"x": {"shape": [m, k]}, "w": {"shape": [k, n]}, "y": {"shape": [m, n]}}
    for name, layout in (("x", a), ("w", b)):
        if layout != "ND":
            tensors[name]["layout"] = layout
    task: dict = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y"}
    if tiling:
        task["tiling"] = {"base_m": 48, "base_n": 128, "base_k": 128}
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": [task]}


def _hw(name: str, **overrides):
    doc, where = hardware_document(name)
    return override_hardware(doc, where, overrides)


# --------------------------------------------------------------------------- the TaskGraph key


def test_layout_is_read_and_written_only_when_nz():
    tg = taskgraph_from_dict(_graph())
    assert {t.name: t.layout for t in tg.tensors} == {"x": "ND", "w": "NZ", "y": "ND"}
    (mm,) = tg.tasks
    assert (mm.a_nz, mm.b_nz) == (False, True)
    doc = taskgraph_to_dict(tg)
    assert doc["tensors"]["w"]["layout"] == "NZ"
    assert "layout" not in doc["tensors"]["x"] and "layout" not in doc["tensors"]["y"]
    assert taskgraph_from_dict(doc) == tg
    # an explicit ND reads as the default and is not written back
    nd = _graph(b="ND")
    nd["tensors"]["w"]["layout"] = "ND"
    assert "layout" not in taskgraph_to_dict(taskgraph_from_dict(nd))["tensors"]["w"]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["tensors"]["w"].update(layout="nz"), "tensor 'w': 'layout' = 'nz' is not one of ND, NZ"),
        (lambda d: d["tensors"]["w"].update(layout=1), "tensor 'w': 'layout' must be a string, got 1"),
        (lambda d: d["tensors"]["y"].update(layout="NZ"),
         "tensor 'y': layout 'NZ' is for inputs of the graph (converted before it runs, like a weight at "
         "load time); task 'mm' writes it"),
        (lambda d: d["tasks"][0].update(engine="vector", tiling=None) or d["tasks"][0].pop("tiling"),
         "tensor 'w': layout 'NZ' (the Cube's fractal format) is read only as a Cube matmul's 'a' or 'b'; "
         "task 'mm' (matmul) reads it otherwise"),
    ],
)
def test_bad_layouts_are_one_line_each(edit, needle):
    doc = _graph()
    edit(doc)
    with pytest.raises(GraphError) as info:
        taskgraph_from_dict(doc, "g.json")
    assert list(info.value.problems) == [f"g.json: {needle}"]


def test_an_nz_tensor_read_by_a_vector_task_is_refused():
    doc = _graph()
    doc["tensors"]["z"] = {"shape": [256, 128]}
    doc["tasks"].append({"id": "act", "type": "elementwise", "op": "relu", "inputs": ["w"], "out": "z"})
    with pytest.raises(GraphError, match="task 'act' \\(elementwise\\) reads it otherwise"):
        taskgraph_from_dict(doc)


def test_a_bad_layout_is_one_line_and_exit_2_from_the_cli(tmp_path, capsys):
    doc = _graph()
    doc["tensors"]["x"]["layout"] = "zN"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    code, _, err = run_cli(["lower", path, "--hw", "ascend-a2", "-o", tmp_path / "o.json"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"staticsched: error: {path}: tensor 'x': 'layout' = 'zN' is not one of ND, NZ"]


# --------------------------------------------------------------------------- the hardware field


def test_nd2nz_derate_is_read_checked_and_defaults_to_zero():
    assert preset("ascend-a2").cube.nd2nz_derate == pytest.approx(130.77 / 22.85 - 1, abs=0.005)
    for name in ("seed-davinci", "seed-davinci-hbm"):
        assert preset(name).cube.nd2nz_derate == 0.0
    doc, _ = hardware_document("seed-davinci")
    bad = copy.deepcopy(doc)
    bad["cube"]["nd2nz_derate"] = -0.5
    with pytest.raises(HardwareError) as info:
        hardware_from_dict(bad, "hw.toml")
    assert list(info.value.problems) == [
        "hw.toml: cube: 'nd2nz_derate' must be >= 0 (an ND operand's load takes 1 + derate times as long), "
        "got -0.5"]
    bad["cube"]["nd2nz_derate"] = "fast"
    with pytest.raises(HardwareError, match="'nd2nz_derate' must be a number"):
        hardware_from_dict(bad, "hw.toml")


# --------------------------------------------------------------------------- durations


def test_a_derate_of_2_makes_nd_loads_three_times_as_long_and_nz_loads_not():
    # 96 B/cycle = 6144 rate units, a multiple of 3: the derated rate is exact (2048 units)
    hw = _hw("seed-davinci", **{"cube.nd2nz_derate": 2.0, "paths.GM->L1.bytes_per_cycle": 96})
    path = hw.path("GM", "L1")
    g = lower(taskgraph_from_dict(_graph()), hw)
    loads = {op.id: op for op in g.ops if op.kind == "load" and op.attr["tensor"] in ("x", "w")}
    a_tile, b_tile = 48 * 128 * 2, 128 * 128 * 2
    assert path_units(hw, {"nd2nz": True}, "GM", "L1") == 6144 // 3 == path.units // 3
    for op in loads.values():
        data = op.duration - path.overhead
        if op.attr["tensor"] == "x":  # ND: converted, 3x the full rate's data phase
            assert op.attr["nd2nz"] is True
            assert data == 3 * math.ceil(a_tile / 96) == 384
        else:  # NZ: the full rate
            assert "nd2nz" not in op.attr
            assert data == math.ceil(b_tile / 96) == 342
    # the solver's timetable keeps those durations, and the program states them
    compiled = compile_graph(g, hw, method="list")
    timed = {t.id: t.end - t.start for t in compiled.schedule.ops}
    assert all(timed[i] >= op.duration for i, op in loads.items())
    assert verify(compiled.program, hw, jitter=1).ok
    # ND b: every load converts
    g_nd = lower(taskgraph_from_dict(_graph(b="ND")), hw)
    operands = [op for op in g_nd.ops if op.kind == "load" and op.attr["tensor"] in ("x", "w")]
    assert all(op.attr.get("nd2nz") for op in operands)


def test_without_a_derate_no_load_is_marked_and_nz_changes_nothing():
    hw = preset("seed-davinci")
    nd = lower(taskgraph_from_dict(_graph(b="ND")), hw)
    nz = lower(taskgraph_from_dict(_graph(b="NZ")), hw)
    assert not any("nd2nz" in op.attr for op in nd.ops)
    same = [(op.id, op.duration, op.attr) for op in nd.ops]
    assert same == [(op.id, op.duration, op.attr) for op in nz.ops]


def test_the_derate_caps_the_loads_rate_on_a_shared_link():
    from staticsched.model.links import op_transfer

    hw = preset("ascend-a2")
    g = lower(taskgraph_from_dict(_graph(tiling=False)), hw)
    x = next(op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "x")
    w = next(op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "w")
    tx, tw = op_transfer(x, g, hw), op_transfer(w, g, hw)
    assert tw.path_units == 128 * RATE_DENOM
    assert tx.path_units == int(128 * RATE_DENOM / (1 + hw.cube.nd2nz_derate)) == 1432
    assert tx.full == x.duration and tw.full == w.duration


# --------------------------------------------------------------------------- program and verifier


@pytest.fixture(scope="module")
def a2_compiled():
    hw = preset("ascend-a2")
    return hw, compile_graph(taskgraph_from_dict(_graph(64, 384, 256, tiling=False)), hw, method="list")


def test_the_program_round_trips_with_the_attribute(a2_compiled):
    _, compiled = a2_compiled
    program = compiled.program
    text, js = dumps_program_text(program), dumps_program_json(program)
    assert " nd2nz=1 " in text and '"nd2nz": true' in js
    assert loads_program(text) == program and loads_program(js) == program
    assert dumps_program_text(loads_program(text)) == text


def test_a_small_matmul_verifies_clean_with_numbers_on_ascend_a2(a2_compiled):
    hw, compiled = a2_compiled
    report = verify(loads_program(dumps_program_json(compiled.program)), hw, jitter=2, numeric=True)
    assert report.ok, [f.line() for f in report.findings][:5]
    assert dict(report.stats)["numeric"] == "ok"
    (line,) = [x for x in summary_lines(compiled.schedule, compiled.plan) if x.startswith("layouts")]
    conversions = [op for op in compiled.graph.ops if op.attr.get("nd2nz")]
    assert conversions and all(op.attr["tensor"] == "x" for op in conversions)
    assert line.startswith(f"layouts      : {len(conversions)} ND->NZ conversions on MTE2 loads, +")
    assert line.endswith("cycles of MTE2 time (nd2nz_derate 4.72); NZ operands: 1 tensor")


def test_the_verifier_prices_the_attribute_from_the_hardware(a2_compiled):
    """The program's derated durations are the cost model's on ascend-a2 and nowhere else: on
    the same chip without the derate every converting load is a duration mismatch."""
    _, compiled = a2_compiled
    plain = _hw("ascend-a2", **{"cube.nd2nz_derate": 0.0})
    report = verify(compiled.program, plain, jitter=0)
    mismatched = {f.ops[0] for f in report.findings if f.kind == "duration_mismatch"}
    converting = {op.id for op in compiled.graph.ops if op.attr.get("nd2nz")}
    assert mismatched == converting


def test_no_layouts_line_without_a_derate_or_nz_tensors():
    compiled = compile_graph(taskgraph_from_dict(_graph(b="ND")), preset("seed-davinci"), method="list")
    assert not [x for x in summary_lines(compiled.schedule, compiled.plan) if x.startswith("layouts")]
    compiled = compile_graph(taskgraph_from_dict(_graph()), preset("seed-davinci"), method="list")
    assert "layouts      : no ND->NZ conversion priced (nd2nz_derate 0); NZ operands: 1 tensor" in \
        summary_lines(compiled.schedule, compiled.plan)


def test_seed_davinci_program_text_is_unchanged():
    """The golden file was written by the code before layouts existed (list method, flags)."""
    compiled = compile_graph(EXAMPLES / "matmul_bias_gelu.json", "seed-davinci", method="list")
    golden = GOLDEN / "matmul_bias_gelu.seed-davinci.program.txt"
    assert dumps_program_text(compiled.program) == golden.read_text()
