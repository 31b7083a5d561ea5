"""Data-movement nodes as ``move`` tasks: each op (a general transpose, a row-changing reshape,
concat, split, slice with steps, pad in every mode, tile, expand, depth/space, gathers by
constant indices, triangles, a constant-condition ``Where``) against ONNX's reference
evaluator through the backend (scheduled, emitted, read back, verified with numbers); a view
stays a view; operands that broadcast both ways; a computed parameter is one line."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from staticsched.errors import ModelError  # noqa: E402
from staticsched.onnx import import_model  # noqa: E402
from staticsched.onnx.backend import prepare  # noqa: E402

SHAPE = [2, 3, 4, 5]


def _f(name, shape=None):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _i(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _model(node, inputs=None, inits=(), outputs=("y",)):
    g = helper.make_graph([node], "g", inputs or [_f("x", SHAPE)], [_f(o) for o in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _n(op, inputs, outputs=("y",), **kw):
    return helper.make_node(op, list(inputs), list(outputs), name="n", **kw)


CASES = {
    "Transpose 0213": _model(_n("Transpose", ["x"], perm=[0, 2, 1, 3])),
    "Transpose 3012": _model(_n("Transpose", ["x"], perm=[3, 0, 1, 2])),
    "Transpose reversed": _model(_n("Transpose", ["x"])),
    "Flatten axis 2": _model(_n("Flatten", ["x"], axis=2)),
    "Reshape to 10 x 12": _model(_n("Reshape", ["x", "s"]), inits=[_i("s", [10, 12])]),
    "Concat axis 1": _model(_n("Concat", ["x", "z"], axis=1), [_f("x", SHAPE), _f("z", [2, 2, 4, 5])]),
    "Concat last axis with a constant": _model(
        _n("Concat", ["x", "c"], axis=-1), inits=[numpy_helper.from_array(
            np.linspace(-1, 1, 2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2), "c")]),
    "Split axis 2": _model(_n("Split", ["x", "sp"], ["y", "w"], axis=2), inits=[_i("sp", [1, 3])],
                           outputs=("y", "w")),
    "Slice with steps": _model(_n("Slice", ["x", "st", "en", "ax", "stp"]),
                               inits=[_i("st", [3, 0]), _i("en", [-100, 5]), _i("ax", [2, 3]),
                                      _i("stp", [-2, 2])]),
    "Pad constant": _model(_n("Pad", ["x", "p", "v"], mode="constant"),
                           inits=[_i("p", [0, 1, 0, 2, 1, 0, 1, 0]),
                                  numpy_helper.from_array(np.asarray(1.5, np.float32), "v")]),
    "Pad reflect": _model(_n("Pad", ["x", "p"], mode="reflect"), inits=[_i("p", [0, 0, 1, 2, 0, 0, 2, 1])]),
    "Pad edge": _model(_n("Pad", ["x", "p"], mode="edge"), inits=[_i("p", [0, 0, 0, 2, 0, 0, 0, 3])]),
    "Tile": _model(_n("Tile", ["x", "r"]), inits=[_i("r", [1, 2, 1, 3])]),
    "Expand a column": _model(_n("Expand", ["x", "s"]), [_f("x", [3, 1])], [_i("s", [2, 3, 6])]),
    "DepthToSpace": _model(_n("DepthToSpace", ["x"], blocksize=2, mode="CRD"), [_f("x", [1, 8, 2, 3])]),
    "SpaceToDepth": _model(_n("SpaceToDepth", ["x"], blocksize=2), [_f("x", [1, 2, 4, 6])]),
    "Gather rows by constant indices": _model(_n("Gather", ["x", "ix"], axis=2),
                                              inits=[_i("ix", [3, 0, 0, -1])]),
    "Trilu lower": _model(_n("Trilu", ["x"], upper=0)),
    "Where with a constant condition": _model(
        _n("Where", ["c", "x", "z"]), [_f("x", SHAPE), _f("z", [5])],
        [numpy_helper.from_array(np.arange(np.prod(SHAPE)).reshape(SHAPE) % 3 == 0, "c")]),
    "Add of [3, 1, 5] and [1, 4, 5]": _model(_n("Add", ["x", "z"]), [_f("x", [3, 1, 5]), _f("z", [1, 4, 5])]),
}


def _feeds(model):
    rng = np.random.default_rng(7)
    inits = {t.name for t in model.graph.initializer}
    dims = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input}
    return {vi.name: rng.uniform(-2, 2, dims[vi.name]).astype(np.float32)
            for vi in model.graph.input if vi.name not in inits}


@pytest.mark.parametrize("hw", ["seed-davinci", "ascend-a2"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_move_matches_the_reference_evaluator(name, hw):
    model = CASES[name]
    feeds = _feeds(model)
    want = ReferenceEvaluator(model).run(None, feeds)
    rep = prepare(model, hw=hw, method="list", dtype="float32")
    got = rep.run(feeds)
    kinds = {type(t).__name__ for t in rep.imported.graph.tasks}
    assert "MoveTask" in kinds or name.startswith("Add"), kinds
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        # a move copies: the fp32 program's outputs are the inputs' own values
        np.testing.assert_array_equal(g, w)


def test_a_reshape_that_keeps_the_row_length_stays_a_view():
    model = _model(_n("Reshape", ["x", "s"]), inits=[_i("s", [6, 4, 5])])
    imported = import_model(model, "seed-davinci")
    assert not any(type(t).__name__ == "MoveTask" for t in imported.graph.tasks)


def test_a_transposed_view_read_by_an_elementwise_op_is_moved_once():
    g = helper.make_graph([_n("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),
                           helper.make_node("Relu", ["t"], ["r"], name="r"),
                           helper.make_node("Neg", ["t"], ["y"], name="g")],
                          "g", [_f("x", SHAPE)], [_f("r"), _f("y")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model, "seed-davinci")
    assert sum(type(t).__name__ == "MoveTask" for t in imported.graph.tasks) == 1
    feeds = _feeds(model)
    got = prepare(model, method="list", dtype="float32").run(feeds)
    for w, x in zip(ReferenceEvaluator(model).run(None, feeds), got, strict=True):
        np.testing.assert_allclose(x, w, rtol=1e-6, atol=1e-6)


def test_a_parameter_from_an_integer_input_is_one_line():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="r"), _n("Tile", ["r", "k"])],
                          "g", [_f("x", [2, 3]), helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
                          [_f("y")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError) as exc:
        import_model(model, "seed-davinci")
    assert len(exc.value.problems) == 1 and "node 'n' (Tile" in exc.value.problems[0], exc.value.problems
