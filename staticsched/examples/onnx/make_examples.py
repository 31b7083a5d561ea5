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

import attrs
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


@attrs.frozen
class Dims:
    """A block's shapes: batch, sequence, model width, heads and MLP width."""

    batch: int = BATCH
    seq: int = SEQ
    d_model: int = D_MODEL
    heads: int = HEADS
    d_ff: int = D_FF

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads

    @property
    def act(self) -> tuple[int, int, int]:
        return (self.batch, self.seq, self.d_model)


@attrs.frozen
class Variant:
    """A block's form: where the norms sit, which norm, which MLP, which mask."""

    #: ``"pre"``: ``h = x + Attn(N1(x))``, ``y = h + MLP(N2(h))``; ``"post"``:
    #: ``h = N1(x + Attn(x))``, ``y = N2(h + MLP(h))``
    placement: str = "pre"
    #: ``"layernorm"`` or ``"rmsnorm"`` (decomposed either way)
    norm: str = "layernorm"
    #: ``"gelu_tanh"``, ``"gelu_erf"`` or ``"swiglu"`` (gate and up projections, SiLU, no biases)
    mlp: str = "gelu_tanh"
    #: ``"causal"`` (a baked additive mask) or ``"input"`` (a ``mask`` input, [B, 1, 1, S])
    mask: str = "causal"
    #: the MLP's node prefix (the exporter's module path)
    mlp_prefix: str = "mlp"


GPT = Variant()
BERT = Variant(placement="post", mlp="gelu_erf", mask="input", mlp_prefix="ffn")


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


def rms_norm(g: GraphBuilder, p: str, x: str, n: int) -> str:
    """RMSNorm over the last axis as a Llama-style module exports it:
    ``x * rsqrt(mean(x^2) + eps) * weight``, rsqrt as ``Div(1, Sqrt(.))``."""
    gamma = g.gamma(f"{p}.weight", n)
    sq = g.op("Pow", f"{p}/Pow", [x, g.scalar(f"{p}/Constant", 2.0)])
    var = g.op("ReduceMean", f"{p}/ReduceMean", [sq], axes=[-1], keepdims=1)
    var_eps = g.op("Add", f"{p}/Add", [var, g.scalar(f"{p}/Constant_1", LN_EPS)])
    std = g.op("Sqrt", f"{p}/Sqrt", [var_eps])
    inv = g.op("Div", f"{p}/Div", [g.scalar(f"{p}/Constant_2", 1.0), std])
    xhat = g.op("Mul", f"{p}/Mul", [x, inv])
    return g.op("Mul", f"{p}/Mul_1", [gamma, xhat])


NORMS: dict[str, Callable[[GraphBuilder, str, str, int], str]] = {
    "layernorm": layer_norm, "rmsnorm": rms_norm}


def linear(g: GraphBuilder, p: str, x: str, n_in: int, n_out: int, *, bias: bool = True) -> str:
    """``x @ W + b`` as the exporter gives ``nn.Linear`` on a 3-d input: MatMul, then Add(bias, .)."""
    w = g.weight(f"{p}.weight", (n_in, n_out))
    if not bias:
        return g.op("MatMul", f"{p}/MatMul", [x, w])
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


def mlp(g: GraphBuilder, p: str, x: str, dims: Dims, kind: str) -> str:
    """The MLP: up, activation, down (GELU forms), or SwiGLU's ``down(silu(gate(x)) * up(x))``
    with SiLU as torch exports it, ``Mul(x, Sigmoid(x))``."""
    if kind == "swiglu":
        gate = linear(g, f"{p}/gate_proj", x, dims.d_model, dims.d_ff, bias=False)
        up = linear(g, f"{p}/up_proj", x, dims.d_model, dims.d_ff, bias=False)
        sig = g.op("Sigmoid", f"{p}/act/Sigmoid", [gate])
        silu = g.op("Mul", f"{p}/act/Mul", [gate, sig])
        h = g.op("Mul", f"{p}/Mul", [silu, up])
        return linear(g, f"{p}/down_proj", h, dims.d_ff, dims.d_model, bias=False)
    m = linear(g, f"{p}/up_proj", x, dims.d_model, dims.d_ff)
    m = {"gelu_tanh": gelu_tanh, "gelu_erf": gelu_erf}[kind](g, f"{p}/act", m)
    return linear(g, f"{p}/down_proj", m, dims.d_ff, dims.d_model)


def attention(g: GraphBuilder, p: str, x: str, mask: str, dims: Dims = Dims()) -> str:
    """Multi-head self-attention with an additive ``mask`` ([1, 1, 1|SEQ, SEQ]), output projection."""
    heads: dict[str, str] = {}
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        h = linear(g, f"{p}/{name}_proj", x, dims.d_model, dims.d_model)
        shape = g.shape(f"{p}/{name}_proj/Constant", (dims.batch, dims.seq, dims.heads, dims.d_head))
        h = g.op("Reshape", f"{p}/{name}_proj/Reshape", [h, shape])
        heads[name] = g.op("Transpose", f"{p}/{name}_proj/Transpose", [h], perm=perm)
    scores = g.op("MatMul", f"{p}/MatMul", [heads["q"], heads["k"]])
    scores = g.op("Div", f"{p}/Div", [scores, g.scalar(f"{p}/Constant", math.sqrt(dims.d_head))])
    scores = g.op("Add", f"{p}/Add", [scores, mask])
    probs = g.op("Softmax", f"{p}/Softmax", [scores], axis=-1)
    ctx = g.op("MatMul", f"{p}/MatMul_1", [probs, heads["v"]])
    ctx = g.op("Transpose", f"{p}/Transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", f"{p}/Reshape", [ctx, g.shape(f"{p}/Constant_1", dims.act)])
    return linear(g, f"{p}/out_proj", ctx, dims.d_model, dims.d_model)


def causal_mask(seq: int = SEQ) -> np.ndarray:
    """[1, 1, seq, seq] float32: 0 on and below the diagonal, -10000 above it."""
    above = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    return np.where(above, F32(MASK_NEG), F32(0.0)).astype(F32).reshape(1, 1, seq, seq)


def _tensor(name: str, shape: Sequence[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(shape))


def _model(
    g: GraphBuilder, name: str, doc: str, inputs: list[onnx.ValueInfoProto], out: str,
    dims: Dims = Dims(),
) -> onnx.ModelProto:
    """Close the graph: rename the last node's output ``y``, set the opset and IR version, infer shapes."""
    last = g.nodes[-1]
    assert last.output[0] == out
    last.output[0] = "y"
    graph = helper.make_graph(
        g.nodes, name, inputs, [_tensor("y", dims.act)], g.initializers, doc_string=doc
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


def build_block(name: str, dims: Dims, variant: Variant, doc: str = "") -> onnx.ModelProto:
    """One transformer block of ``dims`` in the form ``variant`` says (the shipped two and the
    family the benchmarks check: pre- or post-norm, LayerNorm or RMSNorm, GELU or SwiGLU)."""
    g = GraphBuilder(np.random.default_rng(SEED))
    norm = NORMS[variant.norm]
    inputs = [_tensor("x", dims.act)]
    if variant.mask == "causal":
        mask = g.const("attn/causal_mask", causal_mask(dims.seq))
    else:
        mask = "mask"
        inputs.append(_tensor("mask", (dims.batch, 1, 1, dims.seq)))
    pm = variant.mlp_prefix
    if variant.placement == "pre":
        a = attention(g, "attn", norm(g, "ln_1", "x", dims.d_model), mask, dims)
        h = g.op("Add", "residual_1/Add", ["x", a])
        m = mlp(g, pm, norm(g, "ln_2", h, dims.d_model), dims, variant.mlp)
        y = g.op("Add", "residual_2/Add", [h, m])
    else:
        a = attention(g, "attn", "x", mask, dims)
        h = norm(g, "ln_1", g.op("Add", "residual_1/Add", ["x", a]), dims.d_model)
        f = mlp(g, pm, h, dims, variant.mlp)
        y = norm(g, "ln_2", g.op("Add", "residual_2/Add", [h, f]), dims.d_model)
    if not doc:
        doc = (f"transformer block ({variant.placement}-norm {variant.norm}, {variant.mlp}, "
               f"{variant.mask} mask), seq {dims.seq}, d {dims.d_model}, {dims.heads} heads, "
               f"MLP {dims.d_ff}")
    return _model(g, name, doc, inputs, y, dims)


def build_gpt_block() -> onnx.ModelProto:
    """GPT-style pre-LN block: ``h = x + Attn(LN1(x))`` (causal), ``y = h + MLP(LN2(h))``, tanh GELU."""
    doc = "GPT-style pre-LN transformer block (causal self-attention, tanh GELU), seq 128, d 256, 4 heads"
    return build_block("gpt_block", Dims(), GPT, doc)


def build_bert_layer() -> onnx.ModelProto:
    """BERT-style post-LN layer: ``h = LN1(x + Attn(x, mask))``, ``y = LN2(h + FFN(h))``, erf GELU."""
    doc = "BERT-style post-LN encoder layer (additive mask input, erf GELU), seq 128, d 256, 4 heads"
    return build_block("bert_layer", Dims(), BERT, doc)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "gpt_block.onnx": build_gpt_block,
    "bert_layer.onnx": build_bert_layer,
}

#: GPT-2 small's block (seq 1024, d 768, 12 heads, MLP 3072): ``--gpt2-small`` writes it
GPT2_SMALL = Dims(batch=1, seq=1024, d_model=768, heads=12, d_ff=3072)

#: the block family the benchmarks check beside the shipped two (``--family``): other norms,
#: MLPs, placements, sequence lengths and widths
FAMILY: dict[str, tuple[Dims, Variant]] = {
    "gpt2_small_block": (GPT2_SMALL, GPT),
    "llama_block": (Dims(seq=256, d_model=512, heads=8, d_ff=1376),
                    Variant(norm="rmsnorm", mlp="swiglu")),
    "post_ln_rmsnorm_block": (Dims(seq=512, d_model=384, heads=6, d_ff=1536),
                              Variant(placement="post", norm="rmsnorm", mlp="gelu_erf")),
    "bert_wide_layer": (Dims(seq=256, d_model=1024, heads=16, d_ff=4096), BERT),
    "gpt_short_block": (Dims(seq=64, d_model=512, heads=8, d_ff=2048), GPT),
}


def op_histogram(model: onnx.ModelProto) -> list[tuple[str, int]]:
    """(op_type, count), most frequent first, ties by name."""
    counts = Counter(n.op_type for n in model.graph.node)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def save(model: onnx.ModelProto, path: Path) -> Path:
    """Check ``model`` and write it to ``path`` (overwriting)."""
    onnx.checker.check_model(model, full_check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def write_models(outdir: Path) -> dict[Path, onnx.ModelProto]:
    """Build, check and save every shipped model into ``outdir`` (overwriting); returns them by path."""
    written: dict[Path, onnx.ModelProto] = {}
    for filename, build in MODELS.items():
        model = build()
        written[save(model, outdir / filename)] = model
    return written


def write_family(outdir: Path, names: Sequence[str]) -> dict[Path, onnx.ModelProto]:
    """Build, check and save the blocks of :data:`FAMILY` named ``names`` into ``outdir``."""
    written: dict[Path, onnx.ModelProto] = {}
    for name in names:
        dims, variant = FAMILY[name]
        model = build_block(name, dims, variant)
        written[save(model, outdir / f"{name}.onnx")] = model
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, default=HERE, help="where to write (default: %(default)s)")
    parser.add_argument("--gpt2-small", action="store_true",
                        help="write gpt2_small_block.onnx (seq 1024, d 768, 12 heads, MLP 3072) "
                             "instead of the shipped two")
    parser.add_argument("--family", metavar="NAMES",
                        help=f"comma-separated blocks of the family, or 'all': {', '.join(FAMILY)}")
    parser.add_argument("--block", metavar="NAME",
                        help="write one block NAME.onnx of the shapes and form below")
    for flag, default in (("--batch", BATCH), ("--seq", SEQ), ("--d-model", D_MODEL),
                          ("--heads", HEADS), ("--d-ff", D_FF)):
        parser.add_argument(flag, type=int, default=default, help="with --block (default: %(default)s)")
    parser.add_argument("--placement", choices=("pre", "post"), default="pre")
    parser.add_argument("--norm", choices=tuple(NORMS), default="layernorm")
    parser.add_argument("--mlp", choices=("gelu_tanh", "gelu_erf", "swiglu"), default="gelu_tanh")
    parser.add_argument("--mask", choices=("causal", "input"), default="causal")
    args = parser.parse_args(argv)
    if args.block:
        dims = Dims(args.batch, args.seq, args.d_model, args.heads, args.d_ff)
        if dims.d_model % dims.heads:
            parser.error(f"--d-model {dims.d_model} is not a multiple of --heads {dims.heads}")
        variant = Variant(args.placement, args.norm, args.mlp, args.mask)
        model = build_block(args.block, dims, variant)
        written = {save(model, args.outdir / f"{args.block}.onnx"): model}
    elif args.gpt2_small or args.family:
        names = ["gpt2_small_block"] if args.gpt2_small else []
        if args.family:
            names += list(FAMILY) if args.family == "all" else args.family.split(",")
        unknown = [n for n in names if n not in FAMILY]
        if unknown:
            parser.error(f"unknown block(s) {', '.join(unknown)}; the family: {', '.join(FAMILY)}")
        written = write_family(args.outdir, list(dict.fromkeys(names)))
    else:
        written = write_models(args.outdir)
    for path, model in written.items():
        hist = ", ".join(f"{op} {n}" for op, n in op_histogram(model))
        print(f"{path}: {len(model.graph.node)} nodes, {path.stat().st_size} bytes")
        print(f"  {hist}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
