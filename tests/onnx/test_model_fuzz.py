"""Fuzzing the importer with the shipped models: a mutated protobuf gives a clean result or a
clean refusal, never a traceback.

Each example mutates ``gpt_block.onnx`` or ``bert_layer.onnx`` once, at the byte level (a
flipped byte, a cut) or in its graph (a dim, an op type, an attribute, a rewired or dropped
input, a dropped node, an initializer's dims or element type, an output renamed onto another).
The CLI then either succeeds, or exits 2 with one ``staticsched: error:`` line per problem and
writes nothing. Exit 1 (a program that does not verify) and exit 3 (an internal error) fail.

``import`` runs on every example; ``schedule`` (list method, verified with numeric replay) on a
few by default and on fifty times as many under the thorough profile.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from common import ROOT, examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")

from staticsched.cli import main  # noqa: E402

MODELS = ("gpt_block", "bert_layer")
KINDS = (
    "flip",
    "cut",
    "dim",
    "op",
    "attr",
    "rewire",
    "drop_input",
    "drop_node",
    "init_dims",
    "init_type",
    "same_output",
)
OPS = ("Relu", "Add", "MatMul", "Softmax", "Transpose", "Reshape", "Identity", "Gemm", "Conv", "NoSuchOp")
VALUES = (0, 1, 2, 3, -1, 7, 64, 1 << 20, 1 << 40)


@functools.cache
def _proto(name: str) -> bytes:
    return (ROOT / "examples" / "onnx" / f"{name}.onnx").read_bytes()


def _pick(seq, u: float):
    return seq[min(int(u * len(seq)), len(seq) - 1)]


def mutate(data: bytes, kind: str, u: float, v: float, w: int) -> bytes:
    """``data`` mutated once: ``kind`` of :data:`KINDS`, where ``u`` and ``v`` in [0, 1) pick
    the place and ``w`` a value."""
    if kind == "flip":
        i = int(u * len(data))
        return data[:i] + bytes([data[i] ^ (1 << (w % 8))]) + data[i + 1 :]
    if kind == "cut":
        return data[: int(u * len(data))]
    m = onnx.ModelProto.FromString(data)
    g = m.graph
    node = _pick(g.node, u)
    if kind == "dim":
        vi = _pick([*g.input, *g.output, *g.value_info] or list(g.input), u)
        dims = vi.type.tensor_type.shape.dim
        if dims:
            _pick(dims, v).dim_value = _pick(VALUES, (w % 97) / 97)
    elif kind == "op":
        node.op_type = _pick(OPS, v)
    elif kind == "attr" and node.attribute:
        a = _pick(node.attribute, v)
        if a.type == onnx.AttributeProto.INT:
            a.i = _pick(VALUES, (w % 97) / 97)
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = float(_pick(VALUES, (w % 97) / 97))
        elif a.type == onnx.AttributeProto.INTS and a.ints:
            a.ints[w % len(a.ints)] = _pick(VALUES, v)
    elif kind == "rewire" and node.input:
        names = [
            *(i.name for i in g.input),
            *(t.name for t in g.initializer),
            *(o for n in g.node for o in n.output),
        ]
        node.input[w % len(node.input)] = _pick(names, v)
    elif kind == "drop_input" and node.input:
        del node.input[w % len(node.input)]
    elif kind == "drop_node":
        del g.node[min(int(u * len(g.node)), len(g.node) - 1)]
    elif kind in ("init_dims", "init_type") and g.initializer:
        t = _pick(g.initializer, u)
        if kind == "init_dims" and t.dims:
            t.dims[w % len(t.dims)] = _pick(VALUES, v)
        else:
            t.data_type = _pick((1, 7, 10, 11, 16), v)  # float, int64, float16, double, bfloat16
    elif kind == "same_output" and len(g.node) > 1:
        other = _pick(g.node, v)
        node.output[0] = other.output[0]
    return m.SerializeToString()


MUTANTS = st.tuples(
    st.sampled_from(MODELS),
    st.sampled_from(KINDS),
    st.floats(0, 0.999),
    st.floats(0, 0.999),
    st.integers(0, 10_000),
)


def _check(argv: list[str], out: Path, capsys) -> int:
    code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 2), (code, captured.err[-2000:])
    event(f"{argv[0]}: exit {code}")
    if code == 2:
        lines = captured.err.strip().splitlines()
        assert lines and all(line.startswith("staticsched: error: ") for line in lines), lines
        assert not out.exists()
    else:
        assert out.exists()
    return code


def _mutant_file(mutant, tmp_path_factory) -> Path:
    name, kind, u, v, w = mutant
    path = tmp_path_factory.mktemp("fuzz") / f"{name}.onnx"
    path.write_bytes(mutate(_proto(name), kind, u, v, w))
    return path


@settings(max_examples=examples(8), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutant=MUTANTS)
def test_a_mutated_model_imports_or_is_refused_cleanly(mutant, tmp_path_factory, capsys):
    path = _mutant_file(mutant, tmp_path_factory)
    out = path.with_name("g.json")
    _check(["import", str(path), "--hw", "seed-davinci", "-o", str(out)], out, capsys)


@settings(max_examples=examples(2), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutant=MUTANTS)
def test_a_mutated_model_is_scheduled_verified_or_refused_cleanly(mutant, tmp_path_factory, capsys):
    path = _mutant_file(mutant, tmp_path_factory)
    out = path.with_name("out")
    argv = ["schedule", str(path), "--hw", "seed-davinci", "-o", str(out), "-q", "--method", "list"]
    if _check(argv, out, capsys) == 0:
        assert (out / "program.json").exists()
