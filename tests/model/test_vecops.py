"""The Vector ops the ONNX import needs (``staticsched/model/vecops.py``): each new row's form,
cost and float32 semantics against NumPy and ``math``, ``erf`` against ``math.erf``, and every
new op end to end (lowered, scheduled on seed-davinci, verified with numbers): elementwise
tasks and matmul epilogues with the new column and row operands."""

from __future__ import annotations

import math

import numpy as np
import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.errors import GraphError
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.opkinds import KINDS as OPKINDS
from staticsched.model.opkinds import item_shape
from staticsched.model.vecops import USER_OPS, VECOPS, erf
from staticsched.tasks.elementwise import OPS as ELEMENTWISE_OPS
from staticsched.tasks.matmul import EPILOGUE_OPS
from staticsched.verify import verify

#: op -> (operand forms, default passes, ascend-a2 passes, scalar, float64 reference of (x, y, value))
NEW: dict[str, tuple[tuple[str, ...], float, float, str, object]] = {
    "sigmoid": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: 1 / (1 + np.exp(-x))),
    "tanh": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: np.tanh(x)),
    "erf": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: np.vectorize(math.erf)(x)),
    "gelu_erf": (("full",), 6.0, 8.0, "ignored",
                 lambda x, y, v: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    "sqrt": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: np.sqrt(x)),
    "reciprocal": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: 1 / x),
    "square": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: x * x),
    "neg": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: -x),
    "rsubs": (("full",), 1.0, 1.0, "required", lambda x, y, v: v - x),
    "rdivs": (("full",), 2.0, 4.0, "required", lambda x, y, v: v / x),
    "sub_col": (("full", "col"), 1.0, 1.0, "ignored", lambda x, y, v: x - y),
    "div_col": (("full", "col"), 2.0, 4.0, "ignored", lambda x, y, v: x / y),
    "rsub_col": (("full", "col"), 1.0, 1.0, "ignored", lambda x, y, v: y - x),
    "rdiv_col": (("full", "col"), 2.0, 4.0, "ignored", lambda x, y, v: y / x),
    "rsub_row": (("full", "row"), 1.0, 1.0, "ignored", lambda x, y, v: y - x),
    "rdiv_row": (("full", "row"), 2.0, 4.0, "ignored", lambda x, y, v: y / x),
    # the rest of ONNX's unary float ops; a2 prices each exp, log, sqrt or division at 4, not 2
    "abs": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: np.abs(x)),
    "sign": (("full",), 2.0, 2.0, "ignored", lambda x, y, v: np.sign(x)),
    "floor": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: np.floor(x)),
    "ceil": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: np.ceil(x)),
    "round": (("full",), 1.0, 1.0, "ignored", lambda x, y, v: np.vectorize(round)(x).astype(float)),
    "log": (("full",), 2.0, 4.0, "ignored", lambda x, y, v: np.vectorize(math.log)(x)),
    "sin": (("full",), 8.0, 8.0, "ignored", lambda x, y, v: np.vectorize(math.sin)(x)),
    "cos": (("full",), 8.0, 8.0, "ignored", lambda x, y, v: np.vectorize(math.cos)(x)),
    "tan": (("full",), 18.0, 20.0, "ignored", lambda x, y, v: np.vectorize(math.tan)(x)),
    "atan": (("full",), 10.0, 12.0, "ignored", lambda x, y, v: np.vectorize(math.atan)(x)),
    "asin": (("full",), 16.0, 22.0, "ignored", lambda x, y, v: np.vectorize(math.asin)(x)),
    "acos": (("full",), 16.0, 22.0, "ignored", lambda x, y, v: np.vectorize(math.acos)(x)),
    "sinh": (("full",), 6.0, 10.0, "ignored", lambda x, y, v: np.vectorize(math.sinh)(x)),
    "cosh": (("full",), 6.0, 10.0, "ignored", lambda x, y, v: np.vectorize(math.cosh)(x)),
    "asinh": (("full",), 7.0, 11.0, "ignored", lambda x, y, v: np.vectorize(math.asinh)(x)),
    "acosh": (("full",), 7.0, 11.0, "ignored", lambda x, y, v: np.vectorize(math.acosh)(x)),
    "atanh": (("full",), 7.0, 11.0, "ignored", lambda x, y, v: np.vectorize(math.atanh)(x)),
    "softplus": (("full",), 9.0, 13.0, "ignored", lambda x, y, v: np.log1p(np.exp(x))),
    "softsign": (("full",), 4.0, 6.0, "ignored", lambda x, y, v: x / (1 + np.abs(x))),
    "mish": (("full",), 12.0, 18.0, "ignored", lambda x, y, v: x * np.tanh(np.log1p(np.exp(x)))),
    "leaky_relu": (("full",), 2.0, 2.0, "required", lambda x, y, v: np.where(x >= 0, x, v * x)),
    "thresholded_relu": (("full",), 2.0, 2.0, "required", lambda x, y, v: np.where(x > v, x, 0.0)),
    "elu": (("full",), 5.0, 7.0, "required", lambda x, y, v: np.where(x > 0, x, v * (np.exp(x) - 1))),
    "celu": (("full",), 8.0, 10.0, "required",
             lambda x, y, v: np.maximum(0, x) + np.minimum(0, v * (np.exp(x / v) - 1))),
    "hard_swish": (("full",), 4.0, 4.0, "ignored", lambda x, y, v: x * np.clip(x / 6 + 0.5, 0, 1)),
    "swish": (("full",), 4.0, 6.0, "required", lambda x, y, v: x / (1 + np.exp(-v * x))),
    "maxs": (("full",), 1.0, 1.0, "required", lambda x, y, v: np.maximum(x, v)),
    "mins": (("full",), 1.0, 1.0, "required", lambda x, y, v: np.minimum(x, v)),
    "prelu_col": (("full", "col"), 2.0, 2.0, "ignored", lambda x, y, v: np.where(x >= 0, x, y * x)),
}

#: ops whose operand the semantics test keeps in [-1, 1] (their domain)
UNIT_DOMAIN = ("asin", "acos", "atanh")

#: the passes of the ops that were there before (examples' outputs depend on them)
OLD_PASSES = {"add": 1.0, "sub": 1.0, "mul": 1.0, "div": 2.0, "max": 1.0, "scale": 1.0, "adds": 1.0,
              "relu": 1.0, "gelu": 8.0, "cast": 1.0, "exp": 2.0, "rsqrt": 2.0, "bias": 1.0, "mul_col": 1.0,
              "add_row": 1.0, "sub_row": 1.0, "mul_row": 1.0, "div_row": 2.0, "rowmax": 1.0, "rowsum": 1.0,
              "rowsumsq": 2.0, "mask_causal": 1.0}


def test_erf_matches_math_erf_on_a_grid():
    x = np.concatenate([np.linspace(-8.0, 8.0, 200_001, dtype=np.float32),
                        np.float32([0.0, -0.0, 1e-30, -1e-8, 0.84375, 1.25, 1 / 0.35, 6.0, -6.0])])
    got = erf(x)
    want = np.array([math.erf(float(v)) for v in x])
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.max(np.abs(got.astype(np.float64) - want)) < 2e-6
    # in fact within one float32 rounding everywhere, and odd down to the zero's sign
    assert np.max(np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-30)) < 1.2e-7
    assert np.signbit(erf(np.float32([-0.0]))).all()
    assert erf(np.float32([np.inf, -np.inf, 100.0])).tolist() == [1.0, -1.0, 1.0]
    assert np.isnan(erf(np.float32([np.nan]))).all()
    # any shape, blocks of any size
    big = np.random.default_rng(0).standard_normal((300, 700)).astype(np.float32)
    assert np.array_equal(erf(big), erf(big.ravel()).reshape(big.shape))


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_op_rows(name):
    forms, passes, a2_passes, scalar, _ = NEW[name]
    vop = VECOPS[name]
    assert (vop.operands, vop.out, vop.passes, vop.scalar, vop.user) == (forms, "full", passes, scalar, True)
    assert not vop.reduces and not vop.combine and vop.formula
    assert name in USER_OPS and name in ELEMENTWISE_OPS and name in EPILOGUE_OPS
    # the seed presets take the table's passes, ascend-a2 its own
    assert dict(preset("seed-davinci").vector.passes).get(name, vop.passes) == passes
    assert dict(preset("ascend-a2").vector.passes).get(name, vop.passes) == a2_passes


def test_existing_ops_keep_their_passes():
    assert {k: VECOPS[k].passes for k in OLD_PASSES} == OLD_PASSES
    a2 = dict(preset("ascend-a2").vector.passes)
    assert {k: a2[k] for k in ("bias", "add", "scale", "relu", "cast", "mul", "exp", "gelu")} == {
        "bias": 1.0, "add": 1.0, "scale": 1.0, "relu": 1.0, "cast": 2.0, "mul": 1.0, "exp": 4.0, "gelu": 8.0}


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_op_semantics_against_numpy(name):
    forms, _, _, _, ref = NEW[name]
    rng = np.random.default_rng(1)
    rows, cols = 9, 13
    x = rng.uniform(-4.0, 4.0, (rows, cols)).astype(np.float32)
    if VECOPS[name].positive:
        x = np.abs(x) + np.float32(VECOPS[name].least) + np.float32(0.25)  # in the domain, away from 0
    if name in UNIT_DOMAIN:
        x = x / np.float32(4.5)
    args = [x]
    y = None
    if len(forms) > 1:
        shape = (1, cols) if forms[1] == "col" else (rows, 1)
        y = rng.uniform(0.5, 3.0, shape).astype(np.float32) * rng.choice([-1, 1], shape).astype(np.float32)
        args.append(y)
    value = -1.75
    got = VECOPS[name].apply(args, {"scalar": value})
    assert got.dtype == np.float32 and got.shape == (rows, cols)
    want = ref(x.astype(np.float64), None if y is None else y.astype(np.float64), value)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)


def test_sigmoid_does_not_overflow_and_saturates():
    x = np.float32([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is fine
        got = VECOPS["sigmoid"].apply([x], {})
    want = np.array([1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in x.astype(np.float64)])
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-44)
    assert got[3] == 0.5 and got[-1] == 1.0 and got[0] == 0.0


def test_new_ops_cost_their_passes_on_the_vector_unit():
    vec = OPKINDS["vec"]
    full16 = item_shape("UB", 64 * 128 * 2, "float16", (64, 128))
    col16 = item_shape("UB", 128 * 2, "float16", (1, 128))
    # cycles = 8 + ceil(bytes * passes / 256)
    for hw, name, passes in (("seed-davinci", "div_col", 2), ("ascend-a2", "div_col", 4),
                             ("seed-davinci", "rsub_col", 1), ("seed-davinci", "gelu_erf", 6),
                             ("ascend-a2", "erf", 4)):
        reads = [full16, col16] if VECOPS[name].arity == 2 else [full16]
        a = {"op": name, "rows": 64, "cols": 128}
        assert vec.duration(preset(hw), a, reads, [full16]) == 8 + 64 * 128 * 2 * passes // 256


# --------------------------------------------------------------------------- end to end

ROWS, COLS, K = 40, 72, 48


def _graph() -> dict:
    """Every new op as an elementwise task, and two matmuls with the new column and row ops in
    their epilogues; divisors and square roots read ``1 + u * u`` (in [1, 2])."""
    tensors: dict[str, list[int]] = {"u": [ROWS, COLS], "x": [ROWS, COLS], "sq": [ROWS, COLS],
                                     "pos": [ROWS, COLS], "g0": [COLS], "g0sq": [COLS], "g": [COLS],
                                     "c": [COLS], "r": [ROWS, 1], "a": [ROWS, K], "w": [K, COLS],
                                     "mm1": [ROWS, COLS], "mm2": [ROWS, COLS]}
    tasks: list[dict] = [
        {"id": "sq", "type": "elementwise", "op": "square", "inputs": ["u"], "out": "sq"},
        {"id": "pos", "type": "elementwise", "op": "adds", "inputs": ["sq"], "out": "pos", "value": 1.0},
        {"id": "g0sq", "type": "elementwise", "op": "square", "inputs": ["g0"], "out": "g0sq"},
        {"id": "g", "type": "elementwise", "op": "adds", "inputs": ["g0sq"], "out": "g", "value": 1.0},
    ]
    for name, (forms, *_rest) in NEW.items():
        divides = bool(VECOPS[name].positive)
        inputs = ["pos" if divides else "x"]
        if len(forms) > 1:
            inputs.append({"col": "g" if name == "div_col" else "c", "row": "r"}[forms[1]])
        out = f"y_{name}"
        tensors[out] = [ROWS, COLS]
        task = {"id": f"e_{name}", "type": "elementwise", "op": name, "inputs": inputs, "out": out}
        if NEW[name][3] == "required":
            task["value"] = -1.5
        tasks.append(task)
    tasks += [
        {"id": "mm1", "type": "matmul", "a": "a", "b": "w", "out": "mm1",
         "epilogue": [{"op": "sub_col", "tensor": "c"}, {"op": "div_col", "tensor": "g"},
                      {"op": "tanh"}]},
        {"id": "mm2", "type": "matmul", "a": "a", "b": "w", "out": "mm2",
         "tiling": {"base_m": 16, "base_n": 32, "base_k": 16},
         "epilogue": [{"op": "rsub_col", "tensor": "c"}, {"op": "rsub_row", "tensor": "r"},
                      {"op": "gelu_erf"}, {"op": "rsubs", "value": 2.0}, {"op": "rdiv_col", "tensor": "g"}]},
    ]
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": v} for k, v in tensors.items()}, "tasks": tasks}


def test_new_ops_schedule_and_verify_with_numbers_on_seed_davinci():
    hw = preset("seed-davinci")
    tg = taskgraph_from_dict(_graph())
    res = compile_graph(tg, hw, method="list")
    ops = {dict(ins.attrs).get("op") for st in res.program.streams for ins in st.instrs if ins.kind == "vec"}
    assert set(NEW) <= ops
    report = verify(res.program, hw, jitter=1, numeric=True)
    assert report.ok, report.text()
    assert report.stat["numeric_max_error"] <= 4e-3


def test_epilogue_operand_of_a_new_form_is_shape_checked():
    d = _graph()
    d["tasks"] = [t for t in d["tasks"] if t["id"] == "mm1"]
    d["tasks"][0]["epilogue"] = [{"op": "div_col", "tensor": "r"}]
    with pytest.raises(GraphError, match=r"epilogue\[0\] 'div_col' tensor 'r' is \[40, 1\], expected \[72\]"):
        taskgraph_from_dict(d)
    d["tasks"][0]["epilogue"] = [{"op": "rdivs"}]
    with pytest.raises(GraphError, match="op 'rdivs' needs a 'value'"):
        taskgraph_from_dict(d)
