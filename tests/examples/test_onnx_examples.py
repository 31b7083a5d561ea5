"""The shipped ONNX examples (``examples/onnx``): ``make_examples.py`` rebuilds them byte for byte,
and ONNX's reference evaluator runs them to finite outputs of the right shape that match a
NumPy transformer written out here from the initializers."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from common import EXAMPLES

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install -e '.[onnx]')")
from onnx import numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ONNX_DIR = EXAMPLES / "onnx"
SCRIPT = ONNX_DIR / "make_examples.py"
SHAPE = (1, 128, 256)


def _load_script():
    spec = importlib.util.spec_from_file_location("staticsched_examples_make_onnx", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_examples = _load_script()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("onnx_examples")
    return {path.name: path for path in make_examples.write_models(out)}


def _inputs(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    feeds = {"x": rng.standard_normal(SHAPE).astype(np.float32)}
    if name == "bert_layer.onnx":
        mask = np.zeros((1, 1, 1, SHAPE[1]), dtype=np.float32)
        mask[..., 100:] = -10000.0  # the last 28 positions are padding
        feeds["mask"] = mask
    return feeds


# --- a NumPy oracle, in float64, from the models' initializers ---------------------------------


def _ln(w: dict[str, np.ndarray], p: str, x: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w[f"{p}.weight"] + w[f"{p}.bias"]


def _linear(w: dict[str, np.ndarray], p: str, x: np.ndarray) -> np.ndarray:
    return x @ w[f"{p}.weight"] + w[f"{p}.bias"]


def _attention(w: dict[str, np.ndarray], x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    def heads(name: str) -> np.ndarray:  # [1, 4, 128, 64]
        return _linear(w, f"attn/{name}_proj", x).reshape(1, 128, 4, 64).transpose(0, 2, 1, 3)

    q, k, v = heads("q"), heads("k"), heads("v")
    s = q @ k.transpose(0, 1, 3, 2) / 8.0 + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    ctx = (s / s.sum(-1, keepdims=True)) @ v
    return _linear(w, "attn/out_proj", ctx.transpose(0, 2, 1, 3).reshape(SHAPE))


def _oracle(name: str, w: dict[str, np.ndarray], feeds: dict[str, np.ndarray]) -> np.ndarray:
    x = feeds["x"].astype(np.float64)
    if name == "gpt_block.onnx":
        causal = np.triu(np.full((128, 128), -10000.0), k=1)
        h = x + _attention(w, _ln(w, "ln_1", x), causal)
        u = _linear(w, "mlp/up_proj", _ln(w, "ln_2", h))
        u = 0.5 * u * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u**3)))
        return h + _linear(w, "mlp/down_proj", u)
    h = _ln(w, "ln_1", x + _attention(w, x, feeds["mask"].astype(np.float64)))
    u = _linear(w, "ffn/up_proj", h)
    erf = np.vectorize(math.erf)
    u = 0.5 * u * (1.0 + erf(u / math.sqrt(2.0)))
    return _ln(w, "ln_2", h + _linear(w, "ffn/down_proj", u))


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(make_examples.MODELS))
def test_rebuilt_model_is_the_shipped_file_byte_for_byte(built, name):
    assert (ONNX_DIR / name).exists(), f"{name} is not shipped: run python {SCRIPT}"
    assert built[name].read_bytes() == (ONNX_DIR / name).read_bytes(), (
        f"{name} differs from what {SCRIPT.name} builds: regenerate it (python {SCRIPT})"
    )


@pytest.mark.parametrize(("name", "nodes"), [("gpt_block.onnx", 54), ("bert_layer.onnx", 50)])
def test_shipped_model_form(name, nodes):
    model = onnx.load(ONNX_DIR / name)
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert len(model.graph.node) == nodes
    names = [n.name for n in model.graph.node]
    assert len(set(names)) == len(names) and all(names)
    ops = {n.op_type for n in model.graph.node}
    assert not ops & {"LayerNormalization", "Gelu", "Split", "Constant"}
    assert [o.name for o in model.graph.output] == ["y"]


@pytest.mark.parametrize("name", sorted(make_examples.MODELS))
def test_reference_evaluator_runs_the_model(name):
    model = onnx.load(ONNX_DIR / name)
    feeds = _inputs(name)
    (y,) = ReferenceEvaluator(model).run(None, feeds)
    assert y.shape == SHAPE and y.dtype == np.float32
    assert np.all(np.isfinite(y))
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    want = _oracle(name, weights, feeds)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
