"""The ONNX backend: prepare verifies the emitted program, run executes it on given inputs."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from staticsched.cli import main
from staticsched.errors import InputError
from staticsched.frontend.taskgraph import load_taskgraph
from staticsched.onnx.backend import StaticschedBackend

RTOL = ATOL = 2.0**-7


def _mlp():
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.normal(0, 0.2, (24, 40)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.2, (40,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Tanh", ["hb"], ["t"], name="tanh"),
             helper.make_node("Softmax", ["t"], ["y"], name="sm", axis=-1),
             helper.make_node("Sub", ["y", "x2"], ["z"], name="sub")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 24]),
                                         helper.make_tensor_value_info("x2", TensorProto.FLOAT, [2, 16, 1])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 16, 40]),
                           helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 16, 40])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("hw", ["seed-davinci", "ascend-a2"])
def test_run_matches_onnx_reference_within_fp16_tolerance(hw):
    m = _mlp()
    rep = StaticschedBackend.prepare(m, hw=hw, method="list", jitter=1)
    assert rep.report.ok
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 16, 24)).astype(np.float32)
    x2 = rng.uniform(-1, 1, (2, 16, 1)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x, "x2": x2})
    got = rep.run([x, x2])
    assert [g.dtype for g in got] == [np.float32, np.float32]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    by_name = rep.run({"x": x, "x2": x2})
    for a, b in zip(got, by_name, strict=True):
        assert np.array_equal(a, b)


def test_run_refuses_wrong_inputs_in_one_line():
    rep = StaticschedBackend.prepare(_mlp(), method="list", jitter=0)
    with pytest.raises(InputError, match="run: 1 inputs given, the model takes 2"):
        rep.run([np.zeros((2, 16, 24), np.float32)])
    with pytest.raises(InputError, match=r"run: input 'x' has shape \[16, 24\]"):
        rep.run([np.zeros((16, 24), np.float32), np.zeros((2, 16, 1), np.float32)])
    with pytest.raises(InputError, match="no value for model input 'x2'"):
        rep.run({"x": np.zeros((2, 16, 24), np.float32)})


def test_schedule_an_onnx_model_writes_fusion_txt(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(_mlp().SerializeToString())
    out = tmp_path / "out"
    args = ["schedule", str(path), "--hw", "seed-davinci", "-o", str(out), "-q", "--method", "list"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "model        : mlp.onnx: 5 nodes (opset 17)" in text
    assert "mapping      : balance points: Cube" in text
    assert (out / "fusion.txt").read_text().startswith("fusion mode: rules")
    assert "verification : clean" in text


def test_weights_nz_changes_the_cost_not_the_numbers():
    """``prepare``'s ``weights_nz`` (default True) stores the matmul's weight NZ on ascend-a2:
    its loads convert nothing, so the program is no slower, and it computes the same values
    (the import's own layouts: the layout pass would also copy the input into NZ)."""
    m = _mlp()
    nz = StaticschedBackend.prepare(m, hw="ascend-a2", method="list", jitter=0, layouts="given")
    nd = StaticschedBackend.prepare(m, hw="ascend-a2", method="list", jitter=0, weights_nz=False,
                                    layouts="given")
    assert [t.name for t in nz.imported.graph.tensors if t.layout == "NZ"] == ["w"]
    assert all(t.layout == "ND" for t in nd.imported.graph.tensors)
    assert nz.makespan <= nd.makespan
    x = np.random.default_rng(5).uniform(-1, 1, (2, 16, 24)).astype(np.float32)
    x2 = np.zeros((2, 16, 1), np.float32)
    for a, b in zip(nz.run([x, x2]), nd.run([x, x2]), strict=True):
        assert np.array_equal(a, b)


def test_float32_import_matches_onnx_reference_within_1e_5():
    """``dtype="float32"``: every tensor fp32 (the Cube at its fp32 rate), so the program's
    outputs match ONNX's reference to fp32 accuracy (the conformance suite's tolerance stays
    the fp16 one)."""
    m = _mlp()
    rep = StaticschedBackend.prepare(m, hw="seed-davinci", method="list", jitter=1, dtype="float32")
    assert rep.report.ok and rep.report.stat["numeric_tolerance"] == 1e-3
    assert {t.dtype for t in rep.imported.graph.tensors} == {"float32"}
    assert {v.dtype for v in rep.imported.graph.constants.values()} == {np.dtype(np.float32)}
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 16, 24)).astype(np.float32)
    x2 = rng.uniform(-1, 1, (2, 16, 1)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x, "x2": x2})
    got = rep.run([x, x2])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("hw", ["seed-davinci", "ascend-a2"])
def test_bfloat16_import_runs_in_bf16(hw):
    m = _mlp()
    rep = StaticschedBackend.prepare(m, hw=hw, method="list", jitter=1, dtype="bfloat16")
    assert rep.report.ok and rep.report.stat["numeric_tolerance"] == 2.0**-4
    assert {it.dtype for it in rep.program.items} >= {"bfloat16"}
    assert "float16" not in {it.dtype for it in rep.program.items}
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 16, 24)).astype(np.float32)
    x2 = rng.uniform(-1, 1, (2, 16, 1)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x, "x2": x2})
    for g, w in zip(rep.run([x, x2]), want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2.0**-4, atol=2.0**-6)  # bf16: 8 bits of mantissa


def test_import_dtype_option_writes_tensors_and_weights_in_it(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(_mlp().SerializeToString())
    out = tmp_path / "mlp.json"
    assert main(["import", str(path), "--hw", "seed-davinci", "-o", str(out), "--dtype", "bfloat16"]) == 0
    doc = json.loads(out.read_text())
    assert {t["dtype"] for t in doc["tensors"].values()} == {"bfloat16"}
    npz = np.load(tmp_path / "mlp.npz")
    assert {npz[k].dtype for k in npz.files} == {np.dtype("<u2")}  # bf16 as its bits
    tg = load_taskgraph(out)
    assert {v.dtype.name for v in tg.constants.values()} == {"bfloat16"}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["import", str(path), "--hw", "seed-davinci", "-o", str(out), "--dtype", "float64"])
    assert exc.value.code == 2
    assert "invalid choice: 'float64'" in capsys.readouterr().err


def test_schedule_an_onnx_model_in_float32(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(_mlp().SerializeToString())
    out = tmp_path / "out"
    args = ["schedule", str(path), "--hw", "ascend-a2", "-o", str(out), "-q", "--method", "list",
            "--dtype", "float32"]
    assert main(args) == 0
    assert "verification : clean" in capsys.readouterr().out
    program = json.loads((out / "program.json").read_text())
    assert {t["dtype"] for t in program["tensors"]} == {"float32"}
    assert "float16" not in {it["dtype"] for it in program["items"]}


def test_an_unknown_import_dtype_is_one_line():
    from staticsched.onnx import import_model

    with pytest.raises(InputError) as exc:
        import_model(_mlp(), dtype="int8")
    assert list(exc.value.problems) == ["import: dtype 'int8' is not one of float16, bfloat16, float32"]


def test_run_node_wraps_the_node_in_a_model():
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    (y,) = StaticschedBackend.run_node(node, [x], method="list", jitter=0)
    np.testing.assert_allclose(y, np.maximum(x, 0), rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- runner conventions


def _one(op: str, shape, elem=TensorProto.FLOAT, **attrs):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n", **attrs)], "one",
                          [helper.make_tensor_value_info("x", elem, list(shape))],
                          [helper.make_tensor_value_info("y", elem, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_is_compatible_is_false_with_the_importers_reason_logged(caplog):
    from staticsched.onnx import backend

    assert backend.is_compatible(_mlp())
    caplog.set_level(logging.INFO, logger="staticsched.onnx.backend")
    assert not StaticschedBackend.is_compatible(_one("Relu", (4, 4), TensorProto.INT32))
    assert not StaticschedBackend.is_compatible(_mlp(), device="CUDA")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["not compatible: input 'x': dtype int32 is not supported (float32 and float16 inputs "
                     "are computed in float16)",
                     "not compatible: device 'CUDA': staticsched runs on 'CPU' (its verifying executor)"]


def test_onnx_runner_skips_an_incompatible_case_and_passes_a_supported_one():
    """ONNX's own runner on the plain backend: for a model test it asks ``is_compatible`` and
    skips without an exception reaching it (a node test it prepares directly); a supported case
    runs and compares with the case's own tolerance."""
    import unittest

    import onnx.backend.test

    runner = onnx.backend.test.BackendTest(StaticschedBackend, __name__)
    runner.include(r"^test_(relu|sequence_model1)_cpu$")
    result = unittest.TestResult()
    runner.test_suite.run(result)
    assert result.errors == [] and result.failures == []
    ran = [(t.id().rsplit(".", 1)[-1], why) for t, why in result.skipped
           if why != "no matched include pattern"]
    assert ran == [("test_sequence_model1_cpu", "Not compatible with backend")]
    assert len(result.skipped) == result.testsRun - 1  # test_relu_cpu ran and passed


def test_supports_device_is_cpu_only():
    assert StaticschedBackend.supports_device("CPU")
    assert not any(StaticschedBackend.supports_device(d) for d in ("CUDA", "CUDA:0", "NPU", ""))


@pytest.mark.parametrize("elem,dtype", [(TensorProto.FLOAT, np.float32), (TensorProto.FLOAT16, np.float16)])
def test_outputs_keep_the_models_declared_dtype_and_shape(elem, dtype):
    m = _one("Sigmoid", (2, 3, 8), elem)
    x = np.linspace(-3, 3, 48).reshape(2, 3, 8).astype(dtype)
    (y,) = StaticschedBackend.run_model(m, [x], method="list", jitter=0)
    assert (y.dtype, y.shape) == (np.dtype(dtype), (2, 3, 8))
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)
    (z,) = StaticschedBackend.run_node(m.graph.node[0], [x], method="list", jitter=0)
    assert (z.dtype, z.shape) == (np.dtype(dtype), (2, 3, 8)) and np.array_equal(y, z)


def test_nan_and_inf_come_out_where_the_reference_has_them():
    """Sqrt of negatives, zero, +inf: NaN and inf where ONNX's reference has them, which
    ``assert_allclose`` (ONNX's runner's comparison) counts as equal."""
    m = _one("Sqrt", (2, 8))
    x = np.array([[-4, -1, -0.0, 0, 0.25, 1, 4, np.inf]] * 2, np.float32)
    (y,) = StaticschedBackend.run_model(m, [x], method="list", jitter=0)
    with np.errstate(invalid="ignore"):
        (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    assert np.array_equal(np.isnan(y), np.isnan(want)) and np.isnan(y).sum() == 4
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


def test_a_float64_model_is_refused_in_one_line_that_says_to_cast_it():
    from staticsched.errors import ModelError

    with pytest.raises(ModelError) as err:
        StaticschedBackend.prepare(_one("Relu", (4, 4), TensorProto.DOUBLE), method="list")
    (line,) = err.value.problems
    assert "'x', 'y' are float64" in line and line.endswith("cast the model to float32 first")
