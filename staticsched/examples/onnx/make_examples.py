"""Build the shipped ONNX examples ``gpt_block.onnx`` and ``bert_layer.onnx``.

Both graphs are written node by node with ``onnx.helper`` and ``onnx.numpy_helper`` (no
download, no torch), in the form a TorchScript exporter (``torch.onnx.export``, opset 17) gives
a transformer written out op by op:

- ``gpt_block``: a GPT-style pre-LN block, ``y = h + MLP(LN2(h))`` with ``h = x + Attn(LN1(x))``,
  causal attention (a baked ``[1, 1, 128, 128]`` additive mask) and tanh GELU;
- ``bert_layer``: a BERT-style post-LN layer, ``h = LN1(x + Attn(x, mask))``,
  ``y = LN2(h + FFN(h))``, the additive ``mask`` a graph input, erf GELU.

Shapes: batch 1, sequence 128, d_model 256, 4 heads of 64, MLP width 1024, all static.

The forms, as the exporter emits them (``c/...`` a scalar float32 constant):

- LayerNorm, decomposed: ``ReduceMean(axes=[-1]) -> Sub -> Pow(2.0) -> ReduceMean(axes=[-1])
  -> Add(1e-5) -> Sqrt -> Div -> Mul(gamma) -> Add(beta)``;
- linear layer: ``MatMul(x, W[in, out]) -> Add(bias, .)`` (the weight stored transposed, as
  the exporter folds ``W.t()``);
- tanh GELU, torch's ``gelu(approximate="tanh")`` symbolic for opsets 9-19:
  ``Mul(x, x) -> Mul(x, .) -> Mul(0.044715, .) -> Add(x, .) -> Mul(sqrt(2/pi), .) -> Tanh
  -> Add(1.0, .) -> Mul(x, .) -> Mul(0.5, .)`` (the cube as two Muls, no Pow);
- erf GELU, torch's ``gelu(approximate="none")``: ``Div(x, 1.4142135) -> Erf -> Add(., 1.0)
  -> Mul(x, .) -> Mul(., 0.5)``;
- attention: per Q/K/V a linear layer, ``Reshape [1, 128, 4, 64]`` and ``Transpose`` (perm
  ``[0, 2, 1, 3]``; for K ``[0, 2, 3, 1]``, so ``q @ k.transpose(-2, -1)`` is a plain MatMul),
  ``MatMul -> Div(8.0) -> Add(mask) -> Softmax(axis=-1) -> MatMul(., v)``, then
  ``Transpose [0, 2, 1, 3] -> Reshape [1, 128, 256]`` and the output projection.

Every constant (scalars, Reshape shapes, the causal mask) is an initializer; the graph holds
the inferred shapes of all intermediate tensors as ``value_info``. Weights are deterministic
(``numpy.random.default_rng(0)``), scaled like a trained model: weights N(0, 0.02), biases and
LayerNorm betas N(0, 0.02), gammas 1 + N(0, 0.05), so that a mix-up in any of them shows.

Usage: ``python examples/onnx/make_examples.py [--outdir DIR]`` (default: this directory);
writes (overwrites) both models, checks them (``onnx.checker.check_model(full_check=True)``)
and prints each one's node count and op histogram.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = Path(__file__).resolve().parent

OPSET = 17
# the IR version torch.onnx.export writes with opset 17 (onnx 1.12's)
IR_VERSION = 8
PRODUCER = "staticsched examples/onnx/make_examples.py"
PRODUCER_VERSION = "1"

BATCH, SEQ, D_MODEL, HEADS, D_HEAD, D_FF = 1, 128, 256, 4, 64, 1024
LN_EPS = 1e-5
MASK_NEG = -10000.0
WEIGHT_STD, BIAS_STD, GAMMA_STD = 0.02, 0.02, 0.05
SEED = 0

F32 = np.float32


class GraphBuilder:
    """Accumulates nodes and initializers; every name must be new."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()

    def _claim(self, name: str) -> str:
        if name in self._names:
            raise ValueError(f"duplicate name {name!r}")
        self._names.add(name)
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        """An initializer holding ``value`` (dtype and shape as given)."""
        self.initializers.append(numpy_helper.from_array(value, self._claim(name)))
        return name

    def scalar(self, name: str, value: float) -> str:
        """A 0-d float32 initializer, the form the exporter gives a Python scalar."""
        return self.const(name, np.array(value, dtype=F32))

    def shape(self, name: str, dims: Sequence[int]) -> str:
        return self.const(name, np.array(dims, dtype=np.int64))

    def weight(self, name: str, shape: Sequence[int]) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * WEIGHT_STD).astype(F32))

    def bias(self, name: str, n: int) -> str:
        return self.const(name, (self.rng.standard_normal(n) * BIAS_STD).astype(F32))

    def gamma(self, name: str, n: int) -> str:
        return self.const(name, (1.0 + self.rng.standard_normal(n) * GAMMA_STD).astype(F32))

    def op(self, op_type: str, name: str, inputs: Sequence[str], **attrs: object) -> str:
        """Append node ``name``; returns its single output, ``<name>_output_0``."""
        out = self._claim(f"{name}_output_0")
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self._claim(name), **attrs))
        return out


# --- the pieces -----------------------------------------------------------------------------


def layer_norm(g: GraphBuilder, p: str, x: str, n: int) -> str:
    """LayerNorm over the last axis, decomposed; parameters ``<p>.weight`` / ``<p>.bias``."""
    gamma = g.gamma(f"{p}.weight", n)
    beta = g.bias(f"{p}.bias", n)
    mean = g.op("ReduceMean", f"{p}/ReduceMean", [x], axes=[-1], keepdims=1)
    d = g.op("Sub", f"{p}/Sub", [x, mean])
    sq = g.op("Pow", f"{p}/Pow", [d, g.scalar(f"{p}/Constant", 2.0)])
    var = g.op("ReduceMean", f"{p}/ReduceMean_1", [sq], axes=[-1], keepdims=1)
    var_eps = g.op("Add", f"{p}/Add", [var, g.scalar(f"{p}/Constant_1", LN_EPS)])
    std = g.op("Sqrt", f"{p}/Sqrt", [var_eps])
    xhat = g.op("Div", f"{p}/Div", [d, std])
    scaled = g.op("Mul", f"{p}/Mul", [xhat, gamma])
    return g.op("Add", f"{p}/Add_1", [scaled, beta])


def linear(g: GraphBuilder, p: str, x: str, n_in: int, n_out: int) -> str:
    """``x @ W + b`` as the exporter gives ``nn.Linear`` on a 3-d input: MatMul, then Add(bias, .)."""
    w = g.weight(f"{p}.weight", (n_in, n_out))
    b = g.bias(f"{p}.bias", n_out)
    mm = g.op("MatMul", f"{p}/MatMul", [x, w])
    return g.op("Add", f"{p}/Add", [b, mm])


def gelu_tanh(g: GraphBuilder, p: str, x: str) -> str:
    """torch's ``gelu(approximate="tanh")`` symbolic (opsets 9-19), node for node."""
    x2 = g.op("Mul", f"{p}/Mul", [x, x])
    x3 = g.op("Mul", f"{p}/Mul_1", [x, x2])
    kx3 = g.op("Mul", f"{p}/Mul_2", [g.scalar(f"{p}/Constant", 0.044715), x3])
    inner = g.op("Add", f"{p}/Add", [x, kx3])
    scaled = g.op("Mul", f"{p}/Mul_3", [g.scalar(f"{p}/Constant_1", math.sqrt(2.0 / math.pi)), inner])
    t = g.op("Tanh", f"{p}/Tanh", [scaled])
    t1 = g.op("Add", f"{p}/Add_1", [g.scalar(f"{p}/Constant_2", 1.0), t])
    xt = g.op("Mul", f"{p}/Mul_4", [x, t1])
    return g.op("Mul", f"{p}/Mul_5", [g.scalar(f"{p}/Constant_3", 0.5), xt])


def gelu_erf(g: GraphBuilder, p: str, x: str) -> str:
    """torch's ``gelu(approximate="none")`` symbolic (opsets 9-19), node for node."""
    d = g.op("Div", f"{p}/Div", [x, g.scalar(f"{p}/Constant", math.sqrt(2.0))])
    e = g.op("Erf", f"{p}/Erf", [d])
    e1 = g.op("Add", f"{p}/Add", [e, g.scalar(f"{p}/Constant_1", 1.0)])
    xe = g.op("Mul", f"{p}/Mul", [x, e1])
    return g.op("Mul", f"{p}/Mul_1", [xe, g.scalar(f"{p}/Constant_2", 0.5)])


def attention(g: GraphBuilder, p: str, x: str, mask: str) -> str:
    """Multi-head self-attention with an additive ``mask`` ([1, 1, 1|SEQ, SEQ]), output projection."""
    heads: dict[str, str] = {}
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        h = linear(g, f"{p}/{name}_proj", x, D_MODEL, D_MODEL)
        shape = g.shape(f"{p}/{name}_proj/Constant", (BATCH, SEQ, HEADS, D_HEAD))
        h = g.op("Reshape", f"{p}/{name}_proj/Reshape", [h, shape])
        heads[name] = g.op("Transpose", f"{p}/{name}_proj/Transpose", [h], perm=perm)
    scores = g.op("MatMul", f"{p}/MatMul", [heads["q"], heads["k"]])
    scores = g.op("Div", f"{p}/Div", [scores, g.scalar(f"{p}/Constant", math.sqrt(D_HEAD))])
    scores = g.op("Add", f"{p}/Add", [scores, mask])
    probs = g.op("Softmax", f"{p}/Softmax", [scores], axis=-1)
    ctx = g.op("MatMul", f"{p}/MatMul_1", [probs, heads["v"]])
    ctx = g.op("Transpose", f"{p}/Transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", f"{p}/Reshape", [ctx, g.shape(f"{p}/Constant_1", (BATCH, SEQ, D_MODEL))])
    return linear(g, f"{p}/out_proj", ctx, D_MODEL, D_MODEL)


def causal_mask() -> np.ndarray:
    """[1, 1, SEQ, SEQ] float32: 0 on and below the diagonal, -10000 above it."""
    above = np.triu(np.ones((SEQ, SEQ), dtype=bool), k=1)
    return np.where(above, F32(MASK_NEG), F32(0.0)).astype(F32).reshape(1, 1, SEQ, SEQ)


def _tensor(name: str, shape: Sequence[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(shape))


def _model(
    g: GraphBuilder, name: str, doc: str, inputs: list[onnx.ValueInfoProto], out: str
) -> onnx.ModelProto:
    """Close the graph: rename the last node's output ``y``, set the opset and IR version, infer shapes."""
    last = g.nodes[-1]
    assert last.output[0] == out
    last.output[0] = "y"
    graph = helper.make_graph(
        g.nodes, name, inputs, [_tensor("y", (BATCH, SEQ, D_MODEL))], g.initializers, doc_string=doc
    )
    model = helper.make_model(
        graph,
        ir_version=IR_VERSION,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name=PRODUCER,
        producer_version=PRODUCER_VERSION,
    )
    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


# --- the models -----------------------------------------------------------------------------


def build_gpt_block() -> onnx.ModelProto:
    """GPT-style pre-LN block: ``h = x + Attn(LN1(x))`` (causal), ``y = h + MLP(LN2(h))``, tanh GELU."""
    g = GraphBuilder(np.random.default_rng(SEED))
    mask = g.const("attn/causal_mask", causal_mask())
    a = attention(g, "attn", layer_norm(g, "ln_1", "x", D_MODEL), mask)
    h = g.op("Add", "residual_1/Add", ["x", a])
    m = linear(g, "mlp/up_proj", layer_norm(g, "ln_2", h, D_MODEL), D_MODEL, D_FF)
    m = gelu_tanh(g, "mlp/act", m)
    m = linear(g, "mlp/down_proj", m, D_FF, D_MODEL)
    y = g.op("Add", "residual_2/Add", [h, m])
    doc = "GPT-style pre-LN transformer block (causal self-attention, tanh GELU), seq 128, d 256, 4 heads"
    return _model(g, "gpt_block", doc, [_tensor("x", (BATCH, SEQ, D_MODEL))], y)


def build_bert_layer() -> onnx.ModelProto:
    """BERT-style post-LN layer: ``h = LN1(x + Attn(x, mask))``, ``y = LN2(h + FFN(h))``, erf GELU."""
    g = GraphBuilder(np.random.default_rng(SEED))
    a = attention(g, "attn", "x", "mask")
    h = layer_norm(g, "ln_1", g.op("Add", "residual_1/Add", ["x", a]), D_MODEL)
    f = linear(g, "ffn/up_proj", h, D_MODEL, D_FF)
    f = gelu_erf(g, "ffn/act", f)
    f = linear(g, "ffn/down_proj", f, D_FF, D_MODEL)
    y = layer_norm(g, "ln_2", g.op("Add", "residual_2/Add", [h, f]), D_MODEL)
    doc = "BERT-style post-LN encoder layer (additive mask input, erf GELU), seq 128, d 256, 4 heads"
    inputs = [_tensor("x", (BATCH, SEQ, D_MODEL)), _tensor("mask", (BATCH, 1, 1, SEQ))]
    return _model(g, "bert_layer", doc, inputs, y)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "gpt_block.onnx": build_gpt_block,
    "bert_layer.onnx": build_bert_layer,
}


def op_histogram(model: onnx.ModelProto) -> list[tuple[str, int]]:
    """(op_type, count), most frequent first, ties by name."""
    counts = Counter(n.op_type for n in model.graph.node)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def write_models(outdir: Path) -> dict[Path, onnx.ModelProto]:
    """Build, check and save every model into ``outdir`` (overwriting); returns them by path."""
    outdir.mkdir(parents=True, exist_ok=True)
    written: dict[Path, onnx.ModelProto] = {}
    for filename, build in MODELS.items():
        model = build()
        onnx.checker.check_model(model, full_check=True)
        path = outdir / filename
        path.write_bytes(model.SerializeToString())
        written[path] = model
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, default=HERE, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    for path, model in write_models(args.outdir).items():
        hist = ", ".join(f"{op} {n}" for op, n in op_histogram(model))
        print(f"{path}: {len(model.graph.node)} nodes, {path.stat().st_size} bytes")
        print(f"  {hist}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
