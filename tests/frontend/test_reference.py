"""NumPy reference: seeded inputs are deterministic and well scaled; outputs match a direct
NumPy computation written out here with its own GELU."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from common import EXAMPLES

from staticsched.errors import InputError
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import load_taskgraph, taskgraph_from_dict

F16, F32 = np.float16, np.float32


def _gelu(x: np.ndarray) -> np.ndarray:
    """tanh-form GELU in float64, an oracle independent of opkinds."""
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _close(got: np.ndarray, want: np.ndarray) -> None:
    """Within 2 fp16 ulps of the value (the oracle rounds differently inside the step)."""
    assert got.dtype == F16 and got.shape == want.shape
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert float(np.max(err - 2 * np.spacing(np.abs(want.astype(F16))).astype(np.float64))) <= 0


def test_make_inputs_is_deterministic_and_covers_the_inputs():
    tg = load_taskgraph(EXAMPLES / "chain.json")
    a = make_inputs(tg, seed=3)
    b = make_inputs(load_taskgraph(EXAMPLES / "chain.json"), seed=3)
    assert sorted(a) == ["r", "w", "x"]  # y, o, o2 are written by tasks
    for name in a:
        assert a[name].dtype == F16 and a[name].ndim == 2 and a[name].flags.c_contiguous
        assert a[name].tobytes() == b[name].tobytes()
    c = make_inputs(tg, seed=4)
    assert all(not np.array_equal(a[n], c[n]) for n in a)


def test_make_inputs_scales_weights_by_one_over_sqrt_k():
    tg = load_taskgraph(EXAMPLES / "gemv_m1.json")
    inputs = make_inputs(tg)
    assert inputs["b"].shape == (1, 4096)  # the 1-D bias as a row
    w = inputs["w"].astype(np.float64)
    assert np.abs(w).max() <= 1 / math.sqrt(4096) * (1 + 2**-10)
    assert np.abs(inputs["x"].astype(np.float64)).max() > 0.9  # unscaled, uniform in [-1, 1)
    y = reference(tg, inputs)["y"].astype(np.float64)
    # the pre-activation x.w + b has std ~ sqrt(1/9 + 1/3); gelu keeps it O(1), nowhere near fp16 limits
    assert 0.2 < y.std() < 1.5 and np.isfinite(y).all()


def test_matmul_bias_gelu_matches_direct_numpy():
    tg = load_taskgraph(EXAMPLES / "matmul_bias_gelu.json")
    inp = make_inputs(tg, seed=1)
    acc = inp["x"].astype(F32) @ inp["w"].astype(F32)  # fp32 accumulation
    y = acc.astype(F16)  # FixPipe fp32 -> fp16
    y = (y.astype(F32) + inp["b"].astype(F32)).astype(F16)  # bias, broadcast over rows
    y = _gelu(y).astype(F16)
    out = reference(tg, inp)
    assert sorted(out) == ["y"]
    _close(out["y"], y)


def _graph(epilogue, *, transpose_b=False) -> dict:
    m, n, k = 40, 24, 56
    return {
        "format": "staticsched.taskgraph",
        "version": 1,
        "tensors": {
            "x": {"shape": [m, k]},
            "w": {"shape": [n, k] if transpose_b else [k, n]},
            "b": {"shape": [n]},
            "r": {"shape": [m, n]},
            "y": {"shape": [m, n]},
        },
        "tasks": [
            {
                "id": "mm",
                "type": "matmul",
                "a": "x",
                "b": "w",
                "out": "y",
                "transpose_b": transpose_b,
                "epilogue": epilogue,
            }
        ],
    }


def test_every_epilogue_step_rounds_to_fp16_in_order():
    steps = [
        {"op": "bias", "tensor": "b"},
        {"op": "scale", "value": 3.0},
        {"op": "add", "tensor": "r"},
        {"op": "relu"},
        {"op": "cast"},
        {"op": "gelu"},
    ]
    tg = taskgraph_from_dict(_graph(steps, transpose_b=True))
    inp = make_inputs(tg, seed=7)
    y = (inp["x"].astype(F32) @ inp["w"].astype(F32).T).astype(F16)
    y = (y.astype(F32) + inp["b"].astype(F32)).astype(F16)
    y = (y.astype(F32) * F32(3.0)).astype(F16)
    y = (y.astype(F32) + inp["r"].astype(F32)).astype(F16)
    y = np.maximum(y, F16(0))
    y = _gelu(y).astype(F16)
    _close(reference(tg, inp)["y"], y)


def test_chain_evaluates_in_dependency_order():
    d = json.loads((EXAMPLES / "chain.json").read_text())
    d["tasks"].reverse()  # act2, act, mm: the reference must still run mm first
    tg = taskgraph_from_dict(d)
    inp = make_inputs(tg)
    out = reference(tg, inp)
    y = np.maximum((inp["x"].astype(F32) @ inp["w"].astype(F32)).astype(F16), F16(0))
    o = (y.astype(F32) + inp["r"].astype(F32)).astype(F16)
    o2 = _gelu(o).astype(F16)
    assert sorted(out) == ["o", "o2", "y"]
    _close(out["y"], y)
    _close(out["o"], o)
    _close(out["o2"], o2)


def test_one_dimensional_inputs_may_be_given_flat():
    tg = load_taskgraph(EXAMPLES / "matmul_bias_gelu.json")
    inp = make_inputs(tg)
    flat = dict(inp, b=inp["b"].reshape(-1))
    assert np.array_equal(reference(tg, flat)["y"], reference(tg, inp)["y"])


def test_missing_or_misshapen_inputs_are_named():
    tg = load_taskgraph(EXAMPLES / "matmul_bias_gelu.json")
    inp = make_inputs(tg)
    del inp["b"]
    inp["x"] = inp["x"][:, :100]
    with pytest.raises(InputError) as exc:
        reference(tg, inp)
    assert exc.value.problems == (
        "reference: no value for input tensor 'b' [1, 300]",
        "reference: input 'x' has shape [200, 100], expected [200, 176]",
    )
