"""The ONNX ops that became Vector op sequences: which elementwise tasks each one imports as
(one op, or the composed chain of ``Selu``, ``HardSigmoid``, ``Clip`` and the N-ary
``Sum``/``Mean``/``Max``/``Min``), the values that reach each task, and their numbers against
ONNX's reference evaluator; ``LogSoftmax`` on rows whose exps underflow; and the one-line
refusals of what stays out."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from staticsched.errors import ModelError  # noqa: E402
from staticsched.onnx import import_model  # noqa: E402
from staticsched.onnx.backend import prepare  # noqa: E402

SHAPE = [3, 4, 5]


def _f(name, shape=SHAPE):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, [_f("y")], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


CASES = {
    "Selu": (_model([helper.make_node("Selu", ["x"], ["y"], name="n", alpha=2.0, gamma=3.0)], [_f("x")]),
             [("elu", 2.0), ("scale", 3.0)]),
    "HardSigmoid": (_model([helper.make_node("HardSigmoid", ["x"], ["y"], name="n", alpha=0.5, beta=0.6)],
                           [_f("x")]),
                    [("scale", 0.5), ("adds", 0.6), ("maxs", 0.0), ("mins", 1.0)]),
    "Clip, both bounds": (_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="n")], [_f("x")],
                                 [_const("lo", -0.25), _const("hi", 0.5)]),
                          [("maxs", -0.25), ("mins", 0.5)]),
    "Clip, the upper bound only": (_model([helper.make_node("Clip", ["x", "", "hi"], ["y"], name="n")],
                                          [_f("x")], [_const("hi", 0.5)]),
                                   [("mins", 0.5)]),
    "LeakyRelu": (_model([helper.make_node("LeakyRelu", ["x"], ["y"], name="n", alpha=0.25)], [_f("x")]),
                  [("leaky_relu", 0.25)]),
    "Celu": (_model([helper.make_node("Celu", ["x"], ["y"], name="n", alpha=2.0)], [_f("x")]),
             [("celu", 2.0)]),
    "PRelu, a scalar slope": (_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="n")], [_f("x")],
                                     [_const("s", [0.3])]),
                              [("leaky_relu", 0.3)]),
    "PRelu, a slope per column": (_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="n")],
                                         [_f("x"), _f("s", [5])]),
                                  [("prelu_col", None)]),
    "Mean of three": (_model([helper.make_node("Mean", ["a", "b", "c"], ["y"], name="n")],
                             [_f("a"), _f("b", [5]), _f("c")]),
                      [("bias", None), ("add", None), ("scale", 1.0 / 3.0)]),
    "Max of three": (_model([helper.make_node("Max", ["a", "b", "c"], ["y"], name="n")],
                            [_f("a"), _f("b"), _f("c")]),
                     [("max", None), ("max", None)]),
    "Min with a scalar": (_model([helper.make_node("Min", ["a", "k"], ["y"], name="n")], [_f("a")],
                                 [_const("k", 0.125)]),
                          [("mins", 0.125)]),
    "Acos": (_model([helper.make_node("Acos", ["x"], ["y"], name="n")], [_f("x")]), [("acos", None)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_op_imports_as_its_vector_op_sequence(case):
    model, want = CASES[case]
    im = import_model(model, "seed-davinci", fusion="none")
    assert [(t.type, t.op, t.value) for t in im.graph.tasks] == [
        ("elementwise", op, pytest.approx(v) if v is not None else None) for op, v in want]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_op_matches_onnx_reference_evaluator(case):
    model, _ = CASES[case]
    rng = np.random.default_rng(3)
    feeds = {i.name: rng.uniform(-0.95, 0.95, [d.dim_value for d in i.type.tensor_type.shape.dim]
                                 ).astype(np.float32) for i in model.graph.input}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    rep = prepare(model, "CPU", hw="seed-davinci", method="list", dtype="float32")
    got = rep.run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


BAD = {
    "a computed Clip bound": (
        _model([helper.make_node("Clip", ["x", "lo"], ["y"], name="n")], [_f("x"), _f("lo", [])]),
        "node 'n' (Clip, opset 17): bound 'lo' is computed: only constant bounds are supported"),
    "a slope that does not broadcast": (
        _model([helper.make_node("PRelu", ["x", "s"], ["y"], name="n")], [_f("x")], [_const("s", [1.0] * 3)]),
        "node 'n' (PRelu, opset 17): operand 's' [3] does not broadcast to the output [3, 4, 5]"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_what_stays_out_is_refused_in_one_line(case):
    model, want = BAD[case]
    with pytest.raises(ModelError) as err:
        import_model(model, "seed-davinci")
    assert len(err.value.problems) == 1 and want in err.value.problems[0], err.value.problems


@pytest.mark.parametrize("cols", [4, 40000])
def test_log_softmax_keeps_x_where_its_exps_underflow(cols):
    """x - log-sum-exp from the tile's own x: exp(-30 - 5) is 0 in fp16, and log(exp(x - max))
    would be -inf there; one block, and a row too long for the vector buffer, streamed in
    blocks."""
    model = _model([helper.make_node("LogSoftmax", ["x"], ["y"], name="n", axis=-1)], [_f("x", [2, cols])])
    model.graph.output[0].CopyFrom(_f("y", [2, cols]))
    x = np.zeros((2, cols), np.float32)
    x[:, :4] = [[0.0, -30.0, -60.0, 5.0], [1.0, 1.0, -20.0, -40.0]]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert np.isfinite(want).all()
    rep = prepare(model, "CPU", hw="seed-davinci", method="list")
    got = rep.run({"x": x})[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-2)
