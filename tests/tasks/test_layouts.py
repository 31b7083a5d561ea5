"""Layouts (issue 48): a GM tensor's ``"layout"`` (ND or NZ), the chip's ND2NZ cost by tile
shape and row stride (``[cube.nd2nz]``, CATLASS's fitted model), the loads' and stores'
``nz``/``nd2nz``/``stride`` attributes, the bytes of an NZ tensor in the numeric replay, the
verifier's ``layout`` check, and nothing changing on a chip that does not price layouts."""

from __future__ import annotations

import copy
import json

import attrs
import numpy as np
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
from staticsched.model import layouts
from staticsched.model.hardware import RATE_DENOM
from staticsched.model.hardware_toml import hardware_document, hardware_from_dict
from staticsched.model.opkinds import layout_ratio, path_units
from staticsched.model.program import Program, Stream
from staticsched.verify import verify

A2 = preset("ascend-a2")


def _graph(m: int = 48, k: int = 256, n: int = 128, *, a: str = "ND", b: str = "NZ", y: str = "ND",
           tiling: bool = True) -> dict:
    tensors: dict = {"x": {"shape": [m, k]}, "w": {"shape": [k, n]}, "y": {"shape": [m, n]}}
    for name, layout in (("x", a), ("w", b), ("y", y)):
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


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["tensors"]["w"].update(layout="nz"), "tensor 'w': 'layout' = 'nz' is not one of ND, NZ"),
        (lambda d: d["tensors"]["w"].update(layout=1), "tensor 'w': 'layout' must be a string, got 1"),
    ],
)
def test_bad_layouts_are_one_line_each(edit, needle):
    doc = _graph()
    edit(doc)
    with pytest.raises(GraphError) as info:
        taskgraph_from_dict(doc, "g.json")
    assert list(info.value.problems) == [f"g.json: {needle}"]


def test_any_task_may_write_or_read_nz():
    # the DMAs move fractal runs: a task writing NZ and a Vector task reading it are fine
    doc = _graph(y="NZ")
    doc["tensors"]["z"] = {"shape": [48, 128]}
    doc["tasks"].append({"id": "act", "type": "elementwise", "op": "relu", "inputs": ["y"], "out": "z"})
    g = lower(taskgraph_from_dict(doc), A2)
    stores = [op for op in g.ops if op.kind == "store" and op.attr["tensor"] == "y"]
    loads = [op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "y"]
    assert stores and all(op.attr.get("nz") for op in stores)
    assert loads and all(op.attr.get("nz") and not op.attr.get("nd2nz") for op in loads)


def test_a_bad_layout_is_one_line_and_exit_2_from_the_cli(tmp_path, capsys):
    doc = _graph()
    doc["tensors"]["x"]["layout"] = "zN"
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    code, _, err = run_cli(["lower", path, "--hw", "ascend-a2", "-o", tmp_path / "o.json"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"staticsched: error: {path}: tensor 'x': 'layout' = 'zN' is not one of ND, NZ"]


# --------------------------------------------------------------------------- the ND2NZ model


def test_the_nd2nz_model_is_catlass_get_bandwidth():
    # the values of GetBandwidth (select_kernel_b16.h) over 80 GB/s: 256-column tiles of an
    # aligned stride convert at the NZ rate, of an odd stride at 1/3.19; narrow tiles slower
    m = A2.cube.nd2nz
    assert m is not None and A2.cube.nd2nz_derate == 0.0
    assert m.bandwidth(128, 256, 12288) == pytest.approx(80.0)
    assert m.bandwidth(128, 256, 12287) == pytest.approx(25.05, abs=0.05)
    assert m.bandwidth(128, 128, 12288) == pytest.approx(60.5, abs=0.05)
    assert m.bandwidth(128, 64, 12288 + 64) == pytest.approx(21.9, abs=0.05)
    assert A2.cube.nd2nz_ratio(128, 256, 12288) == 1.0
    assert A2.cube.nd2nz_ratio(256, 256, 4095) == pytest.approx(3.19, abs=0.01)
    assert A2.cube.nd2nz_ratio(128, 128, 256) == pytest.approx(1.323, abs=0.001)
    # few rows: the NZ reference scales by rows/16 too, and a tile of whole short rows has
    # its own rate
    assert A2.cube.nd2nz_ratio(2, 256, 256) == 1.0
    assert m.bandwidth(128, 64, 64) == pytest.approx(60.0 * 100 / 30 if 60.0 * 100 / 30 < 80 else 80.0)


def test_the_model_and_one_figure_are_read_checked_and_exclusive():
    doc, _ = hardware_document("ascend-a2")
    bad = copy.deepcopy(doc)
    bad["cube"]["nd2nz_derate"] = 1.0
    with pytest.raises(HardwareError, match=r"give 'nd2nz_derate' .one figure. or \[cube.nd2nz\]"):
        hardware_from_dict(bad, "hw.toml")
    bad = copy.deepcopy(doc)
    bad["cube"]["nd2nz"]["stride_gain"] = [[256]]
    with pytest.raises(HardwareError, match=r"hw\.toml: cube\.nd2nz: 'stride_gain' must be"):
        hardware_from_dict(bad, "hw.toml")
    bad = copy.deepcopy(doc)
    bad["cube"]["nd2nz"]["speed"] = 1
    with pytest.raises(HardwareError, match="unknown key 'speed'"):
        hardware_from_dict(bad, "hw.toml")
    seed = copy.deepcopy(hardware_document("seed-davinci")[0])
    seed["cube"]["nd2nz_derate"] = -0.5
    with pytest.raises(HardwareError, match="'nd2nz_derate' must be >= 0"):
        hardware_from_dict(seed, "hw.toml")


# --------------------------------------------------------------------------- durations


def test_one_derate_figure_still_prices_every_converting_load():
    # 96 B/cycle = 6144 rate units, a multiple of 3: a derate of 2 is exact (2048 units)
    hw = _hw("seed-davinci", **{"cube.nd2nz_derate": 2.0, "paths.GM->L1.bytes_per_cycle": 96})
    path = hw.path("GM", "L1")
    g = lower(taskgraph_from_dict(_graph()), hw)
    loads = {op.id: op for op in g.ops if op.kind == "load" and op.attr["tensor"] in ("x", "w")}
    assert path_units(hw, {"nd2nz": True, "region": ((0, 48), (0, 128))}, "GM", "L1") == 2048
    for op in loads.values():
        data = op.duration - path.overhead
        if op.attr["tensor"] == "x":  # ND: converted, 3x the full rate's data phase
            assert op.attr["nd2nz"] is True and op.attr["stride"] == 256
            assert data == 3 * -(-48 * 128 * 2 // 96)
        else:  # NZ: the full rate
            assert "nd2nz" not in op.attr and op.attr["nz"] is True
            assert data == -(-128 * 128 * 2 // 96)
    compiled = compile_graph(g, hw, method="list")
    assert verify(compiled.program, hw, jitter=1).ok


def test_the_model_prices_each_load_by_its_shape_and_stride():
    # x [48, 256]: an aligned 512-B stride, 128-column tiles: 1.32x; an odd stride (255) far more
    for k, lo, hi in ((256, 1.3, 1.35), (255, 4.0, 4.5)):
        g = lower(taskgraph_from_dict(_graph(k=k)), A2)
        path = A2.path("GM", "L1")
        for op in g.ops:
            if op.kind == "load" and op.attr["tensor"] == "x":
                (r0, r1), (c0, c1) = op.attr["region"]
                plain = path.cycles((r1 - r0) * (c1 - c0) * 2)
                ratio = layout_ratio(A2, op.attr)
                assert lo < ratio < hi
                assert op.duration - path.overhead == pytest.approx((plain - path.overhead) * ratio, rel=0.02)


def test_an_nz_access_of_few_rows_moves_short_runs():
    a = {"nz": True, "region": ((0, 4), (0, 256))}
    assert layout_ratio(A2, a) == 4.0
    assert layout_ratio(A2, {**a, "region": ((0, 16), (0, 256))}) == 1.0
    # a chip that prices no layouts moves NZ at its path's rate, whatever the rows
    assert layout_ratio(preset("seed-davinci"), a) == 1.0


def test_without_layout_costs_no_load_converts_and_nz_changes_only_the_claim():
    hw = preset("seed-davinci")
    nd = lower(taskgraph_from_dict(_graph(b="ND")), hw)
    nz = lower(taskgraph_from_dict(_graph(b="NZ")), hw)
    assert not any("nd2nz" in op.attr for op in nd.ops)
    for a, b in zip(nd.ops, nz.ops, strict=True):
        assert (a.id, a.duration) == (b.id, b.duration)
        if b.attr.get("tensor") == "w":
            assert b.attr == {**a.attr, "nz": True}


def test_a_converting_load_caps_its_rate_on_a_shared_link():
    from staticsched.model.links import op_transfer

    g = lower(taskgraph_from_dict(_graph(tiling=False)), A2)
    x = next(op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "x")
    w = next(op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "w")
    tx, tw = op_transfer(x, g, A2), op_transfer(w, g, A2)
    assert tw.path_units == 128 * RATE_DENOM
    assert tx.path_units == int(128 * RATE_DENOM / layout_ratio(A2, x.attr)) < tw.path_units
    assert tx.full == x.duration and tw.full == w.duration


# --------------------------------------------------------------------------- NZ bytes


def test_an_nz_array_holds_the_fractal_layout_byte_for_byte():
    values = np.arange(20 * 40, dtype=np.float16).reshape(20, 40)
    nz = layouts.NZArray.from_logical(values)
    assert layouts.fractal_shape(20, 40) == (3, 32, 16) and nz.flat.size == 3 * 32 * 16
    cube = nz.flat.reshape(3, 32, 16)
    # element (r, c) at column block c // 16, row r, lane c % 16; the padding zero
    assert cube[1, 5, 3] == values[5, 19] and cube[2, 19, 7] == values[19, 39]
    assert not cube[2, 19, 8:].any() and not cube[:, 20:, :].any()
    assert np.array_equal(np.asarray(nz), values)
    assert np.array_equal(nz[3:17, 10:35], values[3:17, 10:35])
    nz[0:2, 30:40] = -1
    assert np.array_equal(np.asarray(nz)[0:2, 30:40], np.full((2, 10), -1, np.float16))


def test_a_claim_that_differs_from_the_storage_reads_scrambled_bytes():
    values = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    nz = layouts.NZArray.from_logical(values)
    right = layouts.read(nz, ((0, 16), (0, 32)), nz=True)
    wrong = layouts.read(nz, ((0, 16), (0, 32)), nz=False)
    assert np.array_equal(right, values[:16])
    assert not np.array_equal(wrong, values[:16])
    # row-major bytes read as fractals, and written back so
    nd = values.copy()
    assert not np.array_equal(layouts.read(nd, ((0, 16), (0, 32)), nz=True), values[:16])
    layouts.write(nd, ((0, 1), (0, 32)), np.zeros((1, 32), np.float32), nz=True)
    assert np.count_nonzero(nd.reshape(-1)[:32] == 0) == 16  # only the first fractal row's lanes
    # past the tensor's end a read is NaN, as unwritten GM: a 4 x 32 tensor's 128 elements read
    # as fractals put columns 16-31 at 256 and beyond
    small = np.ones((4, 32), np.float32)
    out = layouts.read(small, ((0, 4), (0, 32)), nz=True)
    assert np.isfinite(out[:, :16]).all() and np.isnan(out[:, 16:]).all()


# --------------------------------------------------------------------------- program and verifier


@pytest.fixture(scope="module")
def a2_compiled():
    return compile_graph(taskgraph_from_dict(_graph(64, 384, 256, y="NZ", tiling=False)), A2, method="list")


def test_the_program_round_trips_with_the_layouts(a2_compiled):
    program = a2_compiled.program
    text, js = dumps_program_text(program), dumps_program_json(program)
    assert " nd2nz=1 " in text and " stride=384 " in text and " nz=1 " in text
    assert "layout=NZ" in text and '"layout": "NZ"' in js
    assert loads_program(text) == program and loads_program(js) == program
    assert dumps_program_text(loads_program(text)) == text


def test_a_small_matmul_with_an_nz_output_verifies_clean_with_numbers(a2_compiled):
    report = verify(loads_program(dumps_program_json(a2_compiled.program)), A2, jitter=2, numeric=True)
    assert report.ok, [f.line() for f in report.findings][:5]
    assert dict(report.stats)["numeric"] == "ok"
    (line,) = [x for x in summary_lines(a2_compiled.schedule, a2_compiled.plan) if x.startswith("layouts")]
    conversions = [op for op in a2_compiled.graph.ops if op.attr.get("nd2nz")]
    assert conversions and all(op.attr["tensor"] == "x" for op in conversions)
    assert line.startswith(f"layouts      : {len(conversions)} ND->NZ conversions on MTE2 loads, +")
    assert "of the AIC MTE2 time (the ND2NZ model of [cube.nd2nz]); NZ tensors: 2" in line


def _mutated(program: Program, pred, **change) -> Program:
    streams = []
    for st in program.streams:
        instrs = []
        for ins in st.instrs:
            if not ins.is_sync and pred(ins):
                attrs_ = {**dict(ins.attrs), **change}
                attrs_ = {k: v for k, v in attrs_.items() if v is not None}
                ins = attrs.evolve(ins, attrs=tuple(attrs_.items()))
            instrs.append(ins)
        streams.append(Stream(st.core, st.unit, instrs))
    return attrs.evolve(program, streams=streams)


@pytest.mark.parametrize(
    ("name", "pred", "change", "kind"),
    [
        ("an NZ weight read as ND", lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "w",
         {"nz": None}, "wrong_layout"),
        ("an NZ output written ND", lambda i: i.kind == "store" and dict(i.attrs).get("tensor") == "y",
         {"nz": None}, "wrong_layout"),
        ("an ND input read as NZ", lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "x",
         {"nd2nz": None, "stride": None, "nz": True}, "wrong_layout"),
        ("a conversion of an NZ tensor", lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "w",
         {"nz": None, "nd2nz": True, "stride": 256}, "double_conversion"),
        ("an ND operand not converted", lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "x",
         {"nd2nz": None, "stride": None}, "not_fractal"),
        ("a lie about the stride", lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "x",
         {"stride": 256}, "wrong_stride"),
    ],
)
def test_the_verifier_reports_every_layout_lie(a2_compiled, name, pred, change, kind):
    bad = _mutated(a2_compiled.program, pred, **change)
    report = verify(bad, A2, numeric=True)
    found = {f.kind for f in report.findings if f.check == "layout"}
    assert kind in found, (name, [f.line() for f in report.findings][:5])
    # the replay reads the bytes the access claims: the numbers are off too, unless the only lie
    # was an unconverted ND operand (the bytes are right, the Cube's view is not)
    if kind in ("wrong_layout", "double_conversion") and "written" not in name:
        assert any(f.check == "numeric" for f in report.findings), name


def test_the_unmutated_program_has_no_layout_finding(a2_compiled):
    assert not [f for f in verify(a2_compiled.program, A2).findings if f.check == "layout"]


def test_no_layouts_line_without_conversions_or_nz_tensors():
    compiled = compile_graph(taskgraph_from_dict(_graph(b="ND")), preset("seed-davinci"), method="list")
    assert not [x for x in summary_lines(compiled.schedule, compiled.plan) if x.startswith("layouts")]


def test_seed_davinci_program_text_is_unchanged():
    """The golden file was written by the code before layouts existed (list method, flags)."""
    compiled = compile_graph(EXAMPLES / "matmul_bias_gelu.json", "seed-davinci", method="list")
    golden = GOLDEN / "matmul_bias_gelu.seed-davinci.program.txt"
    assert dumps_program_text(compiled.program) == golden.read_text()
