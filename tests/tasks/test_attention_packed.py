"""Attention with packed heads (``"heads": P``, the BSHD layout a projection writes) and an
additive mask (``"mask"``): the reference against a plain per-head NumPy computation, the GM
regions of each head, the lowering replayed against the reference on the coupled and the split
chip, verified schedules with numeric replay, the JSON round trip and the bad inputs."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from common import SEED, preset
from taskcases import cli_error_lines, graph, max_error

from staticsched.api import compile_graph
from staticsched.errors import GraphError
from staticsched.frontend.lowering import lower
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.tasks.attention.tiling import requirements
from staticsched.verify import verify

A2 = preset("ascend-a2")
B, S, P, D = 2, 40, 2, 32


def _packed(b=B, sq=S, sk=S, p=P, d=D, dv=D, causal=False, mask=None, tiling=None, lead=None) -> dict:
    """q [b, sq, p*d], k [b, sk, p*d], v [b, sk, p*dv], o [b, sq, p*dv] (``lead`` replaces
    ``[b]``); ``mask``: None, a shape, or a float array (a constant of its shape)."""
    lead = [b] if lead is None else list(lead)
    task = {"id": "att", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o", "causal": causal}
    if p != 1:
        task["heads"] = p
    if tiling:
        task["tiling"] = {"block_q": tiling[0], "block_kv": tiling[1]}
    shapes = {"q": (*lead, sq, p * d), "k": (*lead, sk, p * d), "v": (*lead, sk, p * dv),
              "o": (*lead, sq, p * dv)}
    values = None
    if mask is not None:
        task["mask"] = "m"
        if isinstance(mask, np.ndarray):
            values, mask = mask, mask.shape
        shapes["m"] = tuple(mask)
    d_ = graph(shapes, task)
    if values is not None:
        d_["constants"] = {"m": {"base64": base64.b64encode(values.astype("<f2").tobytes()).decode("ascii")}}
    return d_


def _padding_mask(value: float = -10000.0) -> np.ndarray:
    """[B, 1, 1, S] (BERT's extended mask): ``value`` on the last 8 keys of batch element 1."""
    m = np.zeros((B, 1, 1, S), dtype=np.float16)
    m[1, ..., -8:] = value
    return m


def _plain(q, k, v, mask, b, p, sq, sk, d, dv, scale, causal) -> np.ndarray:
    """Attention head by head in float64 from the BSHD arrays (the obvious loops)."""
    q4 = q.astype(np.float64).reshape(b, sq, p, d)
    k4 = k.astype(np.float64).reshape(b, sk, p, d)
    v4 = v.astype(np.float64).reshape(b, sk, p, dv)
    out = np.zeros((b, sq, p, dv))
    for i in range(b):
        for h in range(p):
            s = q4[i, :, h, :] @ k4[i, :, h, :].T * scale
            if mask is not None:
                s = s + mask.astype(np.float64).reshape(-1, sk)[i if mask.size > sk else 0]
            if causal:
                s[np.triu(np.ones((sq, sk), dtype=bool), 1)] = -np.inf
            e = np.exp(s - s.max(axis=1, keepdims=True))
            out[i, :, h, :] = (e / e.sum(axis=1, keepdims=True)) @ v4[i, :, h, :]
    return out.reshape(b * sq, p * dv)


MASKS = [None, (B, S), (1, S), (B, 1, 1, S), "padding"]


def _mask(kind):
    return _padding_mask() if kind == "padding" else kind


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", MASKS)
def test_the_reference_equals_a_plain_per_head_computation(causal, mask):
    tg = taskgraph_from_dict(_packed(causal=causal, mask=_mask(mask)))
    (task,) = tg.tasks
    assert (task.heads, task.packed, task.d, task.dv) == (B * P, P, D, D)
    inputs = make_inputs(tg, 3)
    want = _plain(inputs["q"], inputs["k"], inputs["v"], inputs.get("m"), B, P, S, S, D, D, D ** -0.5, causal)
    got = reference(tg, inputs)["o"]
    assert got.shape == (B * S, P * D)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if mask == "padding":  # the masked keys carry no weight: their values do not matter
        moved = dict(inputs, v=inputs["v"].copy())
        moved["v"][2 * S - 8:] += np.float16(1)
        np.testing.assert_array_equal(reference(tg, moved)["o"], got)


def test_a_plain_layout_with_a_mask_has_one_mask_row_per_matrix():
    d = _packed(lead=(2, 3), p=1, sq=24, sk=40, d=16, dv=24, mask=(2, 3, 1, 40))
    tg = taskgraph_from_dict(d)
    inputs = make_inputs(tg, 5)
    (task,) = tg.tasks
    assert (task.heads, task.packed, task.mask_rows) == (6, 1, 6)
    want = _plain(inputs["q"], inputs["k"], inputs["v"], inputs["m"], 6, 1, 24, 40, 16, 24, 0.25, False)
    np.testing.assert_allclose(reference(tg, inputs)["o"], want, rtol=1e-5, atol=1e-5)
    assert max_error(d) <= 2e-3


def test_each_head_reads_and_writes_its_column_block_of_its_batch_rows():
    tg = taskgraph_from_dict(_packed(p=3, d=16, dv=24, tiling=(32, 32)))
    (task,) = tg.tasks
    assert task.region("q", 4, 0, 32) == ((40, 72), (16, 32))  # batch 1, head 1
    assert task.region("v", 5, 32, 40) == ((72, 80), (48, 72))  # batch 1, head 2
    assert task.region("out", 2, 32, 40) == ((32, 40), (48, 72))  # batch 0, head 2
    g = lower(tg, SEED)
    regions = {(op.attr["tensor"], op.attr["region"]) for op in g.ops if op.kind in ("load", "store")}
    for h in range(3):
        for b in range(2):
            for r0, r1 in ((0, 32), (32, 40)):
                rows = (b * 40 + r0, b * 40 + r1)
                assert ("q", (rows, (h * 16, h * 16 + 16))) in regions
                assert ("k", (rows, (h * 16, h * 16 + 16))) in regions
                assert ("v", (rows, (h * 24, h * 24 + 24))) in regions
                assert ("o", (rows, (h * 24, h * 24 + 24))) in regions


def test_one_head_per_matrix_keeps_the_whole_row_regions():
    tg = taskgraph_from_dict(_packed(p=1, lead=(2, 2), tiling=(32, 32)))
    (task,) = tg.tasks
    assert task.region("k", 3, 32, 40) == ((3 * 40 + 32, 3 * 40 + 40), (0, D))
    assert task.region("out", 1, 0, 32) == ((40, 72), (0, D))


@pytest.mark.parametrize("hw", ["seed", "a2"])
@pytest.mark.parametrize(("causal", "mask", "tiling"), [
    (False, None, None),
    (True, None, (32, 32)),
    (False, (B, S), (16, 32)),
    (True, (1, S), (32, 32)),
    (True, "padding", (16, 16)),
])
def test_packed_and_masked_lowering_replays_to_the_reference(hw, causal, mask, tiling):
    d = _packed(causal=causal, mask=_mask(mask), tiling=tiling)
    assert max_error(d, SEED if hw == "seed" else A2) <= 2e-3


def test_a_mask_loads_one_row_slice_per_kv_block_and_adds_it_after_the_scale():
    tg = taskgraph_from_dict(_packed(mask=(B, S), tiling=(16, 16)))
    g = lower(tg, SEED)
    loads = [op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "m"]
    # per matrix (2 batch x 2 heads) and Q block (3), one per K/V block (3): its batch's row
    assert len(loads) == B * P * 3 * 3
    assert {op.attr["region"] for op in loads} == {((b, b + 1), ks) for b in range(B)
                                                   for ks in ((0, 16), (16, 32), (32, 40))}
    order = [op.id for op in g.ops]
    for op in g.ops:
        if op.attr.get("op") == "bias":
            s = op.id.rsplit(".", 1)[0]
            assert op.reads[1] == f"{s}.amask"
            assert order.index(f"{s}.load_amask") < order.index(f"{s}.scale") < order.index(op.id)
            assert order.index(op.id) < order.index(f"{s}.rowmax")


def test_the_mask_rows_count_in_the_vector_buffer():
    (plain,) = taskgraph_from_dict(_packed()).tasks
    (masked,) = taskgraph_from_dict(_packed(mask=(B, S))).tasks
    need = {role: (text, n) for role, text, n in requirements(plain, 64, 128, SEED)}
    more = {role: (text, n) for role, text, n in requirements(masked, 64, 128, SEED)}
    assert more["vector"][0] == need["vector"][0] + " + mask 1x128 256 B*2 buffers"
    assert more.pop("vector")[1] == need.pop("vector")[1] + 2 * 128 * 2
    assert more == need  # the other roles do not change


@pytest.mark.parametrize(("hw", "mask"), [("seed", None), ("seed", "padding"), ("a2", (B, S)),
                                          ("a2", "padding")])
def test_packed_heads_schedule_and_verify_with_numbers(hw, mask):
    target = SEED if hw == "seed" else A2
    for causal in (False, True):
        tg = taskgraph_from_dict(_packed(causal=causal, mask=_mask(mask), tiling=(16, 32)))
        res = compile_graph(tg, target, method="list")
        report = verify(res.program, target, jitter=1, numeric=True)
        assert report.ok, report.text()
        assert report.stat["numeric_max_error"] <= 2e-3


def test_a_minus_inf_mask_is_fine_while_every_row_keeps_a_key_in_its_first_kv_block():
    d = _packed(causal=True, mask=_padding_mask(-np.inf), tiling=(16, 16))
    tg = taskgraph_from_dict(d)
    inputs = make_inputs(tg, 1)
    want = _plain(inputs["q"], inputs["k"], inputs["v"], inputs["m"], B, P, S, S, D, D, D ** -0.5, True)
    np.testing.assert_allclose(reference(tg, inputs)["o"], want, rtol=1e-5, atol=1e-5)
    assert max_error(d) <= 2e-3


def test_heads_and_mask_round_trip_and_are_written_only_when_used():
    for d in (_packed(mask=(B, 1, 1, S)), _packed(p=1), _packed(causal=True)):
        tg = taskgraph_from_dict(d)
        assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
        assert dumps_taskgraph(tg) == dumps_taskgraph(taskgraph_from_dict(taskgraph_to_dict(tg)))
    (body,) = taskgraph_to_dict(taskgraph_from_dict(_packed(mask=(1, S))))["tasks"]
    assert (body["heads"], body["mask"]) == (P, "m")
    (body,) = taskgraph_to_dict(taskgraph_from_dict(_packed(p=1)))["tasks"]
    assert "heads" not in body and "mask" not in body
    explicit = _packed(p=1)
    explicit["tasks"][0]["heads"] = 1
    assert taskgraph_from_dict(explicit) == taskgraph_from_dict(_packed(p=1))


def test_a_mask_computed_by_an_earlier_task_is_read_after_its_stores():
    """A mask an earlier task computes (an importer's ``(1 - m) * -10000``; here ``-8 * raw``):
    each row slice waits for the stores of the elementwise blocks holding it, and the whole
    graph replays to the reference."""
    d = _packed(mask=(B, S), tiling=(16, 16))
    d["tensors"]["raw"] = {"shape": [B, S]}
    d["tasks"].insert(0, {"id": "mk", "type": "elementwise", "op": "scale", "value": -8.0,
                          "inputs": ["raw"], "out": "m"})
    tg = taskgraph_from_dict(d)
    assert tg.tasks[1].reads == ("q", "k", "v", "m") and tg.tasks[1].writes == ("o",)
    g = lower(tg, SEED)
    stores = {op.id for op in g.ops if op.kind == "store" and op.attr["tensor"] == "m"}
    loads = [op for op in g.ops if op.kind == "load" and op.attr["tensor"] == "m"]
    assert stores and loads and all(op.deps and set(op.deps) <= stores for op in loads)
    assert max_error(d) <= 2e-3


def _bad_divisor() -> dict:
    d = _packed(p=3, d=16)  # q, k, v, o [2, 40, 48]
    d["tensors"]["q"]["shape"] = [2, 40, 40]
    d["tensors"]["k"]["shape"] = [2, 40, 40]
    return d


def _zero_heads() -> dict:
    d = _packed(p=1)
    d["tasks"][0]["heads"] = 0
    return d


BAD = [
    (_bad_divisor(), "heads = 3 must divide the last dim of q, k, v and out (P heads packed side by side, "
                     "[..., seq, P*dim]); it does not divide 'q' [2, 40, 40], 'k' [2, 40, 40]"),
    (_packed(mask=(B, S + 1)), "mask 'm' is [2, 41]: expected one row of Sk = 40 keys per batch element "
                               "(2 rows: a 2-D view [2, 40]) or one shared row ([1, 40])"),
    (_packed(mask=(B * P, S)), "mask 'm' is [4, 40]: expected one row of Sk = 40 keys per batch element"),
    (_zero_heads(), "'heads' = 0 is below the minimum 1"),
]


@pytest.mark.parametrize(("d", "needle"), BAD)
def test_bad_packed_or_masked_attention_is_one_line(d, needle):
    with pytest.raises(GraphError) as exc:
        taskgraph_from_dict(d, "g.json")
    assert len(exc.value.problems) == 1 and needle in exc.value.problems[0], exc.value.problems


@pytest.mark.parametrize(("d", "needle"), BAD[:2])
def test_bad_packed_or_masked_attention_is_one_line_and_exit_2(d, needle, tmp_path, capsys):
    code, lines = cli_error_lines(d, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines
