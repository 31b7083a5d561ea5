"""Unfusing a TaskGraph into per-node kernels: the same NumPy reference outputs as the fused
graph, one task per epilogue step (``elementwise`` for a Vector op, ``rowwise`` for a row
reduction), deterministic names that avoid the graph's own, and graphs without epilogues
unchanged."""

from __future__ import annotations

import numpy as np
from common import EXAMPLES

from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import (
    dumps_taskgraph,
    load_taskgraph,
    taskgraph_from_dict,
    taskgraph_to_dict,
)
from staticsched.frontend.unfuse import unfuse


def _graph(tensors: dict, tasks: list) -> dict:
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": v} for k, v in tensors.items()}, "tasks": tasks}


#: every form of epilogue step: a col operand (bias), a full one (add), a row one (mul_row), a
#: required scalar (scale), unary ops, and the three row reductions with gamma, beta and eps;
#: batched (3-D) tensors, an attention task and a rowwise task that stay as they are
SMALL = _graph(
    {"x": [2, 24, 40], "g": [40], "be": [40], "h": [2, 24, 40], "w1": [40, 56], "b1": [56], "u": [2, 24, 56],
     "w2": [56, 40], "b2": [40], "rs": [2, 24, 1], "y": [2, 24, 40], "g2": [56], "z": [2, 24, 56],
     "q": [2, 32, 16], "k": [2, 32, 16], "v": [2, 32, 16], "o": [2, 32, 16]},
    [
        {"id": "ln", "type": "rowwise", "op": "layernorm", "input": "x", "gamma": "g", "beta": "be",
         "out": "h"},
        {"id": "up", "type": "matmul", "a": "h", "b": "w1", "out": "u",
         "epilogue": [{"op": "bias", "tensor": "b1"}, {"op": "gelu"}, {"op": "scale", "value": 0.5}]},
        {"id": "down", "type": "matmul", "a": "u", "b": "w2", "out": "y",
         "epilogue": [{"op": "bias", "tensor": "b2"}, {"op": "add", "tensor": "x"},
                      {"op": "mul_row", "tensor": "rs"},
                      {"op": "layernorm", "gamma": "g", "beta": "be", "eps": 1e-3}]},
        {"id": "sm", "type": "matmul", "a": "h", "b": "w1", "out": "z",
         "epilogue": [{"op": "softmax"}, {"op": "rmsnorm", "gamma": "g2"}]},
        {"id": "attn", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o", "causal": True},
    ],
)


def _assert_same_outputs(fused, unfused) -> None:
    inputs = make_inputs(fused, seed=5)
    assert set(make_inputs(unfused, seed=5)) == set(inputs)  # the same inputs
    want = reference(fused, inputs)
    got = reference(unfused, inputs)
    assert set(want) <= set(got)
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape and g.dtype == w.dtype
        # each step rounds to fp16 in both forms; allow a few fp16 ulps for reordered rounding
        ulp = np.spacing(np.maximum(np.abs(w.astype(np.float32)), 1e-3).astype(np.float16))
        tol = 4 * ulp.astype(np.float64)
        assert np.all(np.abs(g.astype(np.float64) - w.astype(np.float64)) <= tol), name


def test_unfused_graph_computes_the_same_outputs():
    fused = taskgraph_from_dict(SMALL)
    un = unfuse(fused)
    _assert_same_outputs(fused, un)
    kinds = [(t.id, t.type) for t in un.tasks]
    assert kinds == [
        ("ln", "rowwise"),
        ("up", "matmul"), ("up_bias1", "elementwise"), ("up_gelu2", "elementwise"),
        ("up_scale3", "elementwise"),
        ("down", "matmul"), ("down_bias1", "elementwise"), ("down_add2", "elementwise"),
        ("down_mul_row3", "elementwise"), ("down_layernorm4", "rowwise"),
        ("sm", "matmul"), ("sm_softmax1", "rowwise"), ("sm_rmsnorm2", "rowwise"),
        ("attn", "attention"),
    ]
    assert all(not getattr(t, "epilogue", ()) for t in un.tasks)
    by_id = {t.id: t for t in un.tasks}
    assert by_id["up"].out == "up.0" and by_id["up_bias1"].inputs == ("up.0", "b1")
    assert by_id["up_scale3"].value == 0.5 and by_id["up_scale3"].out == "u"
    ln = by_id["down_layernorm4"]
    assert (ln.input, ln.gamma, ln.beta, ln.eps, ln.out) == ("down.3", "g", "be", 1e-3, "y")
    assert by_id["sm_rmsnorm2"].gamma == "g2"
    assert un.tensor_map["down.3"].shape == (2, 24, 40)
    # 9 intermediates (one per step but the last), the same inputs and the original outputs still written
    assert len(un.tensors) == len(fused.tensors) + 9
    assert un.input_names == fused.input_names
    assert set(fused.output_names) <= set(un.output_names)


def test_shipped_examples_unfuse_to_the_same_outputs():
    tg = load_taskgraph(EXAMPLES / "matmul_bias_gelu.json")
    un = unfuse(tg)
    assert [t.type for t in un.tasks] == ["matmul", "elementwise", "elementwise"]
    _assert_same_outputs(tg, un)
    ffn = unfuse(load_taskgraph(EXAMPLES / "ffn_layernorm.json"))
    ids = ["ln", "up", "up_bias1", "up_gelu2", "down", "down_bias1", "down_add2"]
    assert [t.id for t in ffn.tasks] == ids


def test_names_are_deterministic_and_avoid_the_graphs_own():
    d = _graph({"x": [16, 32], "w": [32, 24], "mm.0": [16, 24], "b": [24], "y": [16, 24], "y2": [16, 24]},
               [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                 "epilogue": [{"op": "bias", "tensor": "b"}, {"op": "relu"}]},
                {"id": "mm_bias1", "type": "elementwise", "op": "add", "inputs": ["y", "mm.0"], "out": "y2"}])
    tg = taskgraph_from_dict(d)
    un = unfuse(tg)
    assert [t.id for t in un.tasks] == ["mm", "mm_bias1_2", "mm_relu2", "mm_bias1"]
    assert un.tasks[0].out == "mm.0_2"
    assert dumps_taskgraph(un) == dumps_taskgraph(unfuse(taskgraph_from_dict(d)))
    # unfusing again changes nothing: no epilogue is left
    assert dumps_taskgraph(unfuse(un)) == dumps_taskgraph(un)


def test_a_graph_without_epilogues_is_unchanged():
    tg = load_taskgraph(EXAMPLES / "attention.json")
    assert taskgraph_to_dict(unfuse(tg)) == taskgraph_to_dict(tg)
