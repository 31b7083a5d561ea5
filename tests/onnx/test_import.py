"""ONNX import: the supported ops as tasks, exporters' patterns recovered, weights as
constants, fusion decisions, and one line (exit 2, nothing written) per unsupported model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from staticsched.cli import main  # noqa: E402
from staticsched.errors import ModelError  # noqa: E402
from staticsched.frontend.fusion import fuse  # noqa: E402
from staticsched.frontend.reference import make_inputs, reference  # noqa: E402
from staticsched.frontend.taskgraph import load_taskgraph, taskgraph_from_dict, taskgraph_to_dict  # noqa: E402
from staticsched.onnx import import_model  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "staticsched" / "examples" / "onnx"


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _linear_gelu(m=32, k=48, n=40):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.1, (k, n)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.1, (n,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["y"], name="act")]
    return _model(nodes, [_f("x", [m, k])], [_f("y", [m, n])], [w, b])


def test_matmul_bias_relu_fuses_into_one_task_with_the_weights_as_constants():
    im = import_model(_linear_gelu(256, 512, 256), "seed-davinci")
    assert [t.type for t in im.graph.tasks] == ["matmul"]
    (mm,) = im.graph.tasks
    assert [s.op for s in mm.epilogue] == ["bias", "relu"]
    assert set(im.graph.constants) == {mm.b, mm.epilogue[0].tensor}
    assert all(d.fused for d in im.fusion.decisions)
    assert "[balance]" in im.fusion.text(im.origin)


def test_unfused_import_keeps_one_task_per_node():
    im = import_model(_linear_gelu(), "seed-davinci", fusion="none")
    assert [t.type for t in im.graph.tasks] == ["matmul", "elementwise", "elementwise"]


def test_balance_rule_splits_off_an_epilogue_heavier_than_the_matmul():
    # K = 16: the Cube's work per output is tiny next to gelu's eight Vector passes
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.normal(0, 0.1, (16, 256)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Gelu", ["h"], ["y"], name="act", approximate="tanh")]
    m = _model(nodes, [_f("x", [256, 16])], [_f("y", [256, 256])], [w], opset=20)
    im = import_model(m, "seed-davinci")
    (d,) = im.fusion.decisions
    assert not d.fused and d.rule == "balance" and "Vector time" in d.why
    assert len(im.graph.tasks) == 2


def test_fused_and_unfused_graphs_compute_the_same_values():
    im = import_model(_linear_gelu(), "seed-davinci", fusion="none")
    fused = fuse(im.graph, __import__("staticsched").model.hardware_toml.load_hardware("seed-davinci"),
                 keep=[b.tensor for b in im.outputs])
    ins = make_inputs(im.graph, 0)
    out = im.outputs[0].tensor
    a = reference(im.graph, ins)[out].astype(np.float32)
    b = reference(fused.graph, {k: v for k, v in ins.items() if k in fused.graph.tensor_map})[out]
    np.testing.assert_allclose(b.astype(np.float32), a, atol=2e-3, rtol=2e-3)


def test_constants_travel_inline_and_in_an_npz(tmp_path):
    im = import_model(_linear_gelu(), "seed-davinci")
    doc = json.loads(json.dumps(taskgraph_to_dict(im.graph)))
    back = taskgraph_from_dict(doc)
    assert sorted(back.constants) == sorted(im.graph.constants)
    for k, v in im.graph.constants.items():
        assert np.array_equal(back.constants[k], v)
    out = tmp_path / "g.json"
    assert main(["import", str(_save(tmp_path, _linear_gelu())), "--hw", "seed-davinci", "-o", str(out)]) == 0
    loaded = load_taskgraph(out)
    assert json.loads(out.read_text())["constants"] == "g.npz"
    for k, v in im.graph.constants.items():
        assert np.array_equal(loaded.constants[k], v)
    assert (tmp_path / "g.fusion.txt").read_text().startswith("fusion mode: rules")
    # the drawn inputs keep the weights; the other inputs are drawn as before
    ins = make_inputs(loaded, 3)
    for k, v in loaded.constants.items():
        assert np.array_equal(ins[k], v)


def _save(tmp_path, m, name="m.onnx"):
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


@pytest.mark.parametrize("example", ["gpt_block", "bert_layer"])
def test_example_patterns_are_recovered(example):
    im = import_model(EXAMPLES / f"{example}.onnx", "seed-davinci")
    assert im.recovered == {"Gelu": 1, "LayerNormalization": 2, "staticsched.Attention": 1}
    kinds = sorted(t.type for t in im.graph.tasks)
    assert kinds.count("attention") == 1 and kinds.count("matmul") == 6


BAD = {
    "unsupported op": (
        _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")],
               [_f("x", [1, 1, 4, 4])], [_f("y", [1, 1, 4, 4])],
               [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")]),
        "node 'conv1' (Conv, opset 17): op type 'Conv' is not supported"),
    "dynamic shape": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_f("x", ["N", 4])], [_f("y", ["N", 4])]),
        "input 'x': shape [?, 4] is not static"),
    "a reduction's axes computed": (
        _model([helper.make_node("ReduceSum", ["x", "ax"], ["y"], name="rs", keepdims=1)],
               [_f("x", [3, 4]), helper.make_tensor_value_info("ax", TensorProto.INT64, [1])],
               [_f("y", [1, 4])]),
        "input 'ax': dtype int64 is not supported"),
    "cycle": (
        _model([helper.make_node("Relu", ["z"], ["y"], name="a"),
                helper.make_node("Relu", ["y"], ["z"], name="b")],
               [_f("x", [2, 2])], [_f("y", [2, 2])]),
        "form a cycle"),
    "integer dtype": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
               [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 2])],
               [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 2])]),
        "input 'x': dtype int32 is not supported"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_models_get_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    model, want = BAD[case]
    with pytest.raises(ModelError) as err:
        import_model(model, "seed-davinci")
    assert len(err.value.problems) == 1 and want in err.value.problems[0], err.value.problems
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "g.json"
    assert main(["import", str(path), "--hw", "seed-davinci", "-o", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and want in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]
    assert main(["schedule", str(path), "--hw", "seed-davinci", "-o", str(tmp_path / "out"), "-q"]) == 2
    assert not (tmp_path / "out").exists()


def test_matmul_weights_are_stored_nz_by_default_and_nd_on_request(tmp_path, capsys):
    im = import_model(_linear_gelu(256, 512, 256), "ascend-a2")
    (mm,) = im.graph.tasks
    layouts = {t.name: t.layout for t in im.graph.tensors}
    assert layouts[mm.b] == "NZ" and mm.b_nz and not mm.a_nz
    # the bias is a constant too, read by the Vector epilogue: it stays ND
    assert {name for name, lay in layouts.items() if lay == "NZ"} == {mm.b}
    # the values stay row-major: the same constants either way
    plain = import_model(_linear_gelu(256, 512, 256), "ascend-a2", weights_nz=False)
    assert all(t.layout == "ND" for t in plain.graph.tensors)
    assert set(plain.graph.constants) == set(im.graph.constants)
    assert all((plain.graph.constants[n] == v).all() for n, v in im.graph.constants.items())
    # the CLI: --weights-nz is the default, --no-weights-nz turns it off
    path = tmp_path / "lin.onnx"
    onnx.save(_linear_gelu(256, 512, 256), path)
    for flag, want in (([], {"w": {"shape": [512, 256], "dtype": "float16", "layout": "NZ"}}),
                       (["--no-weights-nz"], {"w": {"shape": [512, 256], "dtype": "float16"}})):
        out = tmp_path / f"g{len(flag)}.json"
        assert main(["import", str(path), "--hw", "ascend-a2", "-o", str(out), *flag]) == 0
        assert "weights      : " in capsys.readouterr().out
        tensors = json.loads(out.read_text())["tensors"]
        assert {k: v for k, v in tensors.items() if k == "w"} == want


def test_a_weight_the_vector_engine_reads_stays_nd():
    """The rule moves a GEMV to the Vector engine, which reads row-major tiles: its weight is
    not converted (declared NZ by the import, ND again once mapped)."""
    from staticsched.frontend.onnx_import import import_unfused

    assert any(t.layout == "NZ" for t in import_unfused(_linear_gelu(1, 512, 256)).graph.tensors)
    im = import_model(_linear_gelu(1, 512, 256), "ascend-a2")
    assert [getattr(t, "engine", "") for t in im.graph.tasks] == ["vector"]
    assert all(t.layout == "ND" for t in im.graph.tensors)


def test_cap_rule_stops_an_epilogue_at_the_hardwares_limit():
    from staticsched.model.hardware_toml import load_hardware

    hw = load_hardware("seed-davinci")
    assert hw.max_fused_ops == 6
    im = import_model(_linear_gelu(256, 512, 256), "seed-davinci", fusion="none")
    fused = fuse(im.graph, hw, keep=[b.tensor for b in im.outputs], max_steps=1)
    assert [d.rule for d in fused.decisions] == ["balance", "cap"]
    assert "the cap is 1 per task" in fused.decisions[1].why
