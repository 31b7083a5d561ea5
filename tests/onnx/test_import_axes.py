"""Reductions, softmax and layer norm over any axes: the axes moved last by move tasks (a view
when they already are the trailing ones), the row task, the result moved back; every
reduction of ONNX's set but ``ReduceProd``, with and without ``keepdims``; against ONNX's
reference evaluator in fp32 through the backend; and parameter inputs (integer graph inputs:
axes, shapes) bound at the first run, one program per set of values."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from staticsched.errors import InputError, ModelError  # noqa: E402
from staticsched.onnx import import_model  # noqa: E402
from staticsched.onnx.backend import SpecializedRep, StaticschedBackend, prepare  # noqa: E402

X = np.random.default_rng(3).uniform(-2, 2, (3, 4, 5)).astype(np.float32)
REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2",
              "ReduceLogSumExp"]


def _model(node, inits=(), inputs=None, opset=18):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])]
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _axes(values):
    return numpy_helper.from_array(np.asarray(values, np.int64), "a")


def _check(model, feeds=None, tol=1e-5):
    feeds = feeds or {"x": X}
    want = ReferenceEvaluator(model).run(None, feeds)
    got = prepare(model, method="list", dtype="float32").run(feeds)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [[0], [1], [0, 2], [-1], []])
@pytest.mark.parametrize("op", REDUCTIONS)
def test_a_reduction_over_any_axes_matches_the_reference(op, axes, keepdims):
    x = np.abs(X) + 0.5 if op == "ReduceLogSum" else X
    _check(_model(helper.make_node(op, ["x", "a"] if axes else ["x"], ["y"], keepdims=keepdims),
                  [_axes(axes)] if axes else []), {"x": x})


def test_log_sum_and_empty_axes_as_a_noop():
    # the verifier's drawn inputs are signed, and a log of a negative sum is NaN on both sides,
    # which it counts as a mismatch: the program is checked without its numbers, which are
    # then compared on positive inputs here
    model = _model(helper.make_node("ReduceLogSum", ["x", "a"], ["y"], keepdims=0), [_axes([1])])
    x = np.abs(X) + 0.5
    got = prepare(model, method="list", dtype="float32", numeric=False).run({"x": x})[0]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5)
    model = _model(helper.make_node("ReduceSum", ["x", "a"], ["y"], noop_with_empty_axes=1),
                   [numpy_helper.from_array(np.zeros(0, np.int64), "a")])
    assert import_model(model, "seed-davinci").graph.tasks[0].type != "rowwise"
    _check(model)


@pytest.mark.parametrize(("axes", "tasks"), [
    ([2], ["rowwise"]), ([-1], ["rowwise"]), ([1, 2], ["move", "rowwise"]),
    ([0], ["move", "rowwise", "move"])])
def test_the_last_axis_is_reduced_in_place_the_others_moved_first(axes, tasks):
    imported = import_model(_model(helper.make_node("ReduceSum", ["x", "a"], ["y"]), [_axes(axes)]),
                            "seed-davinci")
    assert [t.type for t in imported.graph.tasks] == tasks


@pytest.mark.parametrize("axis", [0, 1, -2])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_over_another_axis(op, axis):
    _check(_model(helper.make_node(op, ["x"], ["y"], axis=axis)))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_layer_norm_over_the_trailing_axes_from_any_axis(axis):
    inner = X.shape[axis:]
    n = int(np.prod(inner))
    g = numpy_helper.from_array(np.linspace(0.5, 1.5, n, dtype=np.float32).reshape(inner), "g")
    b = numpy_helper.from_array(np.linspace(-1, 1, n, dtype=np.float32).reshape(inner), "b")
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis)
    _check(_model(node, [g, b], opset=17))


def _with_axes_input():
    return _model(helper.make_node("ReduceMax", ["x", "a"], ["y"], keepdims=1),
                  inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
                          helper.make_tensor_value_info("a", TensorProto.INT64, [1])])


def test_parameter_inputs_are_bound_at_the_first_run_one_program_per_value():
    model = _with_axes_input()
    assert StaticschedBackend.is_compatible(model)
    rep = prepare(model, method="list")
    assert isinstance(rep, SpecializedRep) and not rep.reps
    ref = ReferenceEvaluator(model)
    for axis in (0, 2, 0):
        a = np.array([axis], np.int64)
        got = rep.run([X, a])[0]
        np.testing.assert_allclose(got, ref.run(None, {"x": X, "a": a})[0], rtol=2**-10, atol=2**-10)
    assert len(rep.reps) == 2  # axis 0 came twice: one program
    assert all(r.report.ok for r in rep.reps.values())


@pytest.mark.parametrize(("value", "needle"), [
    (np.array([0.5]), "parameter input 'a' must hold int64 values, got float64"),
    (np.array([0, 1], np.int64), "parameter input 'a' has shape [2], the model declares [1]"),
])
def test_a_bad_parameter_value_is_one_line(value, needle):
    rep = prepare(_with_axes_input(), method="list")
    with pytest.raises(InputError) as exc:
        rep.run({"x": X, "a": value})
    assert exc.value.problems == (f"run: {needle}",) or needle in exc.value.problems[0], exc.value.problems


def test_a_parameter_value_outside_the_supported_set_is_the_importers_line():
    rep = prepare(_with_axes_input(), method="list")
    with pytest.raises(ModelError, match="axis must be in"):
        rep.run({"x": X, "a": np.array([7], np.int64)})
