"""Dtypes (issue 25, item 7): float16, bfloat16 and float32 tensors. Small graphs of every kind
but attention verify clean, numbers included, in each dtype on both chips; fp32 Cube ops cost 4x
fp16's and fp32 Vector ops 2x; mixed operands are one line each; fp16 programs are unchanged
(golden); constants keep their dtype through both storage forms."""

from __future__ import annotations

import base64
import io
import json

import attrs
import numpy as np
import pytest
from common import GOLDEN, ROOT, preset

from staticsched.api import compile_graph
from staticsched.errors import GraphError
from staticsched.formats.program_text import dumps_program_text
from staticsched.frontend.lowering import lower
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import (
    constants_npz,
    load_taskgraph,
    taskgraph_from_dict,
    taskgraph_to_dict,
)
from staticsched.model.dtypes import numpy_dtype
from staticsched.verify import verify
from staticsched.verify.compare import DEFAULT_TOLERANCES

DTYPES = ("float16", "bfloat16", "float32")
CHIPS = ("seed-davinci", "ascend-a2")


def _doc(tensors: dict, *tasks: dict) -> dict:
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": list(tasks)}


def _t(shape, dtype: str) -> dict:
    return {"shape": list(shape), "dtype": dtype}


def elementwise_graph(dt: str, out_dt: str | None = None) -> dict:
    return _doc({"x": _t([300, 200], dt), "y": _t([300, 200], dt), "b": _t([200], dt),
                 "h": _t([300, 200], dt), "g": _t([300, 200], dt), "z": _t([300, 200], out_dt or dt)},
                {"id": "add", "type": "elementwise", "op": "add", "inputs": ["x", "y"], "out": "h"},
                {"id": "bias", "type": "elementwise", "op": "bias", "inputs": ["h", "b"], "out": "g"},
                {"id": "gelu", "type": "elementwise", "op": "gelu", "inputs": ["g"], "out": "z"})


def rowwise_graph(dt: str) -> dict:
    return _doc({"x": _t([256, 1000], dt), "ga": _t([1000], dt), "be": _t([1000], dt),
                 "s": _t([256, 1000], dt), "l": _t([256, 1000], dt), "r": _t([256, 1], dt)},
                {"id": "sm", "type": "rowwise", "op": "softmax", "input": "x", "out": "s"},
                {"id": "ln", "type": "rowwise", "op": "layernorm", "input": "x", "gamma": "ga", "beta": "be",
                 "out": "l"},
                {"id": "rs", "type": "rowwise", "op": "rowsum", "input": "x", "out": "r"})


def matmul_graph(dt: str, out_dt: str | None = None, tiling: dict | None = None) -> dict:
    out_dt = out_dt or dt
    mm = {"id": "mm", "type": "matmul", "a": "a", "b": "w", "out": "y",
          "epilogue": [{"op": "bias", "tensor": "b"}, {"op": "gelu"}]}
    if tiling:
        mm["tiling"] = tiling
    return _doc({"a": _t([256, 512], dt), "w": _t([512, 384], dt), "b": _t([384], dt),
                 "y": _t([256, 384], out_dt), "v": _t([4, 512], dt), "yv": _t([4, 384], out_dt)},
                mm,
                {"id": "gv", "type": "matmul", "a": "v", "b": "w", "out": "yv", "engine": "vector",
                 "epilogue": [{"op": "bias", "tensor": "b"}]})


def _verified(doc: dict, hw: str):
    tg = taskgraph_from_dict(doc)
    compiled = compile_graph(tg, hw, method="list")
    report = verify(compiled.program, hw, numeric=True, jitter=1)
    assert report.ok, "\n".join(f.line() for f in report.findings[:5])
    assert report.stat["numeric"] == "ok"
    return compiled, report


# --------------------------------------------------------------------------- verified clean


@pytest.mark.parametrize("hw", CHIPS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("make", [elementwise_graph, rowwise_graph, matmul_graph], ids=lambda f: f.__name__)
def test_each_kind_verifies_clean_in_each_dtype(make, dt, hw):
    compiled, report = _verified(make(dt), hw)
    items = {it.dtype for it in compiled.program.items}
    assert dt in items  # the tiles are the tensors' dtype, not fp16
    if dt != "float16":
        assert "float16" not in items
    assert report.stat["numeric_tolerance"] == DEFAULT_TOLERANCES[dt]


@pytest.mark.parametrize("hw", CHIPS)
@pytest.mark.parametrize(("dt", "out_dt"), [("float32", "float16"), ("bfloat16", "float32"),
                                            ("float16", "bfloat16")])
def test_a_matmul_converts_to_its_outputs_dtype(dt, out_dt, hw):
    _verified(matmul_graph(dt, out_dt), hw)
    splitk = _doc({"a": _t([64, 1024], dt), "w": _t([1024, 64], dt), "y": _t([64, 64], out_dt)},
                  {"id": "mm", "type": "matmul", "a": "a", "b": "w", "out": "y",
                   "tiling": {"base_m": 64, "base_n": 64, "base_k": 128, "split_k": 4}})
    _verified(splitk, hw)


@pytest.mark.parametrize("hw", CHIPS)
def test_an_elementwise_cast_writes_another_dtype(hw):
    compiled, _ = _verified(elementwise_graph("float32", "bfloat16"), hw)
    outs = [it for it in compiled.program.items if it.name.startswith("gelu.") and it.name.endswith(".out")]
    assert outs and {it.dtype for it in outs} == {"bfloat16"}


def test_a_row_epilogue_in_each_dtype():
    for dt in DTYPES:
        doc = _doc({"a": _t([128, 256], dt), "w": _t([256, 512], dt), "g": _t([512], dt),
                    "y": _t([128, 512], dt)},
                   {"id": "mm", "type": "matmul", "a": "a", "b": "w", "out": "y",
                    "epilogue": [{"op": "layernorm", "gamma": "g"}]})
        _verified(doc, "seed-davinci")


# --------------------------------------------------------------------------- costs


def _durations(doc: dict, hw: str, kind: str) -> dict[str, int]:
    g = lower(taskgraph_from_dict(doc), preset(hw))
    return {op.id: op.duration for op in g.ops if op.kind == kind}


@pytest.mark.parametrize("hw", CHIPS)
def test_fp32_cube_ops_take_four_times_fp16s_and_bf16_the_same(hw):
    tiling = {"base_m": 64, "base_n": 64, "base_k": 64}
    overhead = preset(hw).cube.overhead  # type: ignore[union-attr]
    base = _durations(matmul_graph("float16", tiling=tiling), hw, "mmad")
    assert base and base == _durations(matmul_graph("bfloat16", tiling=tiling), hw, "mmad")
    fp32 = _durations(matmul_graph("float32", tiling=tiling), hw, "mmad")
    assert fp32.keys() == base.keys()
    assert all(fp32[k] - overhead == 4 * (base[k] - overhead) for k in base)


@pytest.mark.parametrize("hw", CHIPS)
def test_fp32_vector_ops_take_twice_fp16s(hw):
    vec = preset(hw).vector
    assert vec is not None
    per = {}
    for dt in DTYPES:
        d = _durations(elementwise_graph(dt), hw, "vec")
        per[dt] = sum(x - vec.overhead for x in d.values())
    assert per["bfloat16"] == per["float16"]
    assert 1.9 <= per["float32"] / per["float16"] <= 2.1  # ceil per op: tiles differ in rows
    # and the loads move twice the bytes (their cycles past each load's fixed overhead)
    h = preset(hw)
    overhead = h.path(h.role("global"), h.role("vector")).overhead
    loads = {dt: sum(x - overhead for x in _durations(elementwise_graph(dt), hw, "load").values())
             for dt in ("float16", "float32")}
    assert 1.9 <= loads["float32"] / loads["float16"] <= 2.1


def test_fp32_matmul_makespan_follows_the_cube_rate():
    spans = {dt: compile_graph(taskgraph_from_dict(matmul_graph(dt)), "seed-davinci", method="list")
             .schedule.makespan for dt in DTYPES}
    assert spans["bfloat16"] == spans["float16"] < spans["float32"]


def test_a_cube_without_the_dtypes_rate_is_one_line():
    hw = preset("seed-davinci")
    assert hw.cube is not None
    fp16_only = attrs.evolve(hw, cube=attrs.evolve(hw.cube, macs_per_cycle={"float16": 4096}))
    with pytest.raises(GraphError) as exc:
        lower(taskgraph_from_dict(matmul_graph("float32")), fp16_only)
    assert "hardware 'seed-davinci' cannot run task 'mm': [cube] has no macs_per_cycle for float32" in \
        exc.value.problems


# --------------------------------------------------------------------------- bad combinations


def _problems(doc: dict) -> list[str]:
    with pytest.raises(GraphError) as exc:
        taskgraph_from_dict(doc, "g.json")
    return exc.value.problems


@pytest.mark.parametrize(("doc", "line"), [
    (_doc({"a": _t([64, 64], "float16"), "w": _t([64, 64], "float32"), "y": _t([64, 64], "float16")},
          {"id": "mm", "type": "matmul", "a": "a", "b": "w", "out": "y"}),
     "g.json: task 'mm': operands of different dtypes (a 'a' is float16, b 'w' is float32); a task's "
     "operands share one dtype"),
    (_doc({"a": _t([64, 64], "float32"), "w": _t([64, 64], "float32"), "b": _t([64], "bfloat16"),
           "y": _t([64, 64], "float32")},
          {"id": "mm", "type": "matmul", "a": "a", "b": "w", "out": "y",
           "epilogue": [{"op": "bias", "tensor": "b"}]}),
     "g.json: task 'mm': operands of different dtypes (a 'a' is float32, b 'w' is float32, epilogue bias "
     "'b' is bfloat16); a task's operands share one dtype"),
    (_doc({"x": _t([8, 8], "float16"), "y": _t([8, 8], "bfloat16"), "z": _t([8, 8], "float16")},
          {"id": "e", "type": "elementwise", "op": "add", "inputs": ["x", "y"], "out": "z"}),
     "g.json: task 'e': operands of different dtypes (input 0 'x' is float16, input 1 'y' is bfloat16); a "
     "task's operands share one dtype"),
    (_doc({"x": _t([8, 8], "float32"), "y": _t([8, 8], "float16")},
          {"id": "r", "type": "rowwise", "op": "softmax", "input": "x", "out": "y"}),
     "g.json: task 'r': out 'y' is float16 but input 'x' is float32; a rowwise task writes its input's dtype "
     "(convert with an elementwise 'cast' task)"),
    (_doc({"x": _t([8, 8], "float32"), "g": _t([8], "float16"), "y": _t([8, 8], "float32")},
          {"id": "r", "type": "rowwise", "op": "rmsnorm", "input": "x", "gamma": "g", "out": "y"}),
     "g.json: task 'r': operands of different dtypes (input 'x' is float32, gamma 'g' is float16); a task's "
     "operands share one dtype"),
    (_doc({"q": _t([64, 64], "float32"), "k": _t([64, 64], "float16"), "v": _t([64, 64], "float16"),
           "o": _t([64, 64], "float16")},
          {"id": "at", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o"}),
     "g.json: task 'at': attention runs in float16 only (q 'q' is float32)"),
    (_doc({"x": _t([8, 8], "int8"), "z": _t([8, 8], "float16")},
          {"id": "e", "type": "elementwise", "op": "relu", "inputs": ["x"], "out": "z"}),
     "g.json: tensor 'x': dtype 'int8' is not supported (dtypes: float16, bfloat16, float32; matmuls "
     "accumulate in fp32)"),
], ids=["matmul-a-b", "matmul-epilogue", "elementwise", "rowwise-out", "rowwise-gamma", "attention", "int8"])
def test_bad_dtype_combinations_are_one_line_each(doc, line):
    assert list(_problems(doc)) == [line]


# --------------------------------------------------------------------------- fp16 unchanged


@pytest.mark.parametrize("hw", CHIPS)
def test_fp16_programs_are_byte_identical_to_before_dtypes(hw):
    """The golden texts were emitted by the commit before dtypes existed (ascend-a2: rewritten
    when its ND2NZ cost became a model by tile shape and row stride, design refinement 48:
    every load states its stride and the durations are the model's)."""
    compiled = compile_graph(ROOT / "examples" / "matmul_bias_gelu.json", hw, method="list")
    golden = (GOLDEN / f"matmul_bias_gelu.{hw}.list.program.txt").read_text(encoding="utf-8")
    assert dumps_program_text(compiled.program) == golden


# --------------------------------------------------------------------------- inputs and constants


def test_inputs_are_drawn_once_and_rounded_to_each_tensors_dtype():
    got = {dt: make_inputs(taskgraph_from_dict(elementwise_graph(dt)), seed=3) for dt in DTYPES}
    for dt in DTYPES:
        assert {a.dtype for a in got[dt].values()} == {numpy_dtype(dt)}
    # the same draws, each rounded once: within half a spacing (and fp32's own rounding) of
    # the fp32 values
    x32 = got["float32"]["x"].astype(np.float64)
    for dt, half in (("float16", 2.0**-11), ("bfloat16", 2.0**-8)):
        x = got[dt]["x"].astype(np.float64)
        assert np.all(np.abs(x - x32) <= (half + 2.0**-24) * np.abs(x32) + 2.0**-24)


@pytest.mark.parametrize("dt", DTYPES)
def test_constants_keep_their_dtype_inline_and_in_npz(tmp_path, dt):
    doc = elementwise_graph(dt)
    rng = np.random.default_rng(0)
    w = (rng.uniform(-1, 1, (1, 200)) * 3).astype(numpy_dtype(dt))
    stored = w.view(np.uint16) if dt == "bfloat16" else w.astype(numpy_dtype(dt).newbyteorder("<"))
    inline = dict(doc, constants={"b": {"base64": base64.b64encode(stored.tobytes()).decode()}})
    tg = taskgraph_from_dict(inline)
    assert tg.constants["b"].dtype == numpy_dtype(dt)
    assert np.array_equal(tg.constants["b"], w)
    again = taskgraph_from_dict(json.loads(json.dumps(taskgraph_to_dict(tg))))
    assert np.array_equal(again.constants["b"], w)
    # the .npz form: each constant in its tensor's dtype (bf16 as its uint16 bits)
    npz = np.load(io.BytesIO(constants_npz(tg)))
    assert npz["b"].dtype == (np.dtype("<u2") if dt == "bfloat16" else numpy_dtype(dt))
    (tmp_path / "w.npz").write_bytes(constants_npz(tg))
    path = tmp_path / "g.json"
    path.write_text(json.dumps(taskgraph_to_dict(tg, constants="w.npz")))
    loaded = load_taskgraph(path)
    assert np.array_equal(loaded.constants["b"], w) and loaded.constants["b"].dtype == numpy_dtype(dt)
    ins = make_inputs(loaded)
    assert np.array_equal(ins["b"], w)
    assert reference(loaded, ins)["z"].dtype == numpy_dtype(dt)


def test_an_npz_constant_of_another_dtype_is_one_line(tmp_path):
    doc = elementwise_graph("float32")
    np.savez(tmp_path / "w.npz", b=np.zeros((1, 200), np.float16))
    path = tmp_path / "g.json"
    path.write_text(json.dumps(dict(doc, constants="w.npz")))
    with pytest.raises(GraphError) as exc:
        load_taskgraph(path)
    assert list(exc.value.problems) == [
        f"{path}: constants: 'b' is float16 in 'w.npz', tensor 'b' is float32 (stored as float32)"]
