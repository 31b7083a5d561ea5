"""The attention kind: FlashAttention-2-style fused attention against the float32 reference
(tails, causal skipping and masking), its tiling, the balance of causal Q blocks over the
cores, a verified schedule with jittered replays, its bad inputs and its examples."""

from __future__ import annotations

import json
import math

import pytest
from common import ROOT
from taskcases import SEED, cli_error_lines, graph, max_error

from staticsched.api import compile_graph
from staticsched.errors import GraphError, TilingError
from staticsched.frontend.lowering import estimate_ops, lower, plan_tasks
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.verify import verify


def _attention(lead, sq, sk, d, dv, causal, tiling=None, scale=None) -> dict:
    task = {"id": "att", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o", "causal": causal}
    if tiling:
        task["tiling"] = tiling
    if scale is not None:
        task["scale"] = scale
    shapes = {"q": (*lead, sq, d), "k": (*lead, sk, d), "v": (*lead, sk, dv), "o": (*lead, sq, dv)}
    return graph(shapes, task)


@pytest.mark.parametrize(("args", "tiling"), [
    (((2,), 100, 100, 64, 64, True), None),
    (((2,), 70, 130, 24, 40, False), {"block_q": 16, "block_kv": 32}),
    (((), 150, 150, 16, 16, True), {"block_q": 64, "block_kv": 16}),   # masked rows in later blocks
    (((2, 2), 33, 33, 128, 128, True), None),
])
def test_attention_matches_the_float32_reference_with_tails(args, tiling):
    assert max_error(_attention(*args, tiling=tiling)) <= 2e-3


def test_causal_attention_skips_blocks_above_the_diagonal_and_masks_the_diagonal():
    tg = taskgraph_from_dict(_attention((), 256, 256, 16, 16, True, {"block_q": 64, "block_kv": 64}))
    g = lower(tg, SEED)
    qk = [op.id for op in g.ops if op.id.endswith(".qk")]
    masks = [op for op in g.ops if op.attr.get("op") == "mask_causal"]
    assert len(qk) == 1 + 2 + 3 + 4  # Q block i sees K/V blocks 0..i
    offsets = sorted((m.attr["row0"], m.attr["col0"]) for m in masks)
    assert offsets == [(0, 0), (64, 64), (128, 128), (192, 192)]
    # nothing but the output ever goes to GM
    assert {op.attr["tensor"] for op in g.ops if op.kind == "store"} == {"o"}


def test_causal_q_blocks_are_balanced_over_the_cores_by_their_work():
    tg = taskgraph_from_dict(_attention((16,), 1024, 1024, 64, 64, True))
    g = lower(tg, SEED)
    work = {}
    for op in g.ops:
        if op.id.endswith(".qk"):
            work[op.core] = work.get(op.core, 0) + 1
    assert max(work.values()) - min(work.values()) <= 1


@pytest.mark.parametrize(("d", "needle"), [
    (_attention((2,), 64, 64, 64, 64, False) | {"tensors": {
        "q": {"shape": [2, 64, 64]}, "k": {"shape": [2, 64, 32]}, "v": {"shape": [2, 64, 64]},
        "o": {"shape": [2, 64, 64]}}},
     "mismatched head dimensions: q 'q' [2, 64, 64] has d = 64 but k 'k' [2, 64, 32] has d = 32"),
    (_attention((2,), 64, 80, 64, 64, True),
     "a causal mask needs a square attention (as many queries as keys); q 'q' has 64 and k 'k' has 80"),
])
def test_bad_attention_tasks_are_one_line_each(d, needle):
    with pytest.raises(GraphError) as exc:
        taskgraph_from_dict(d, "g.json")
    assert len(exc.value.problems) == 1 and needle in exc.value.problems[0], exc.value.problems


def test_attention_derives_64_by_128_blocks_for_d_128_and_checks_given_ones():
    tg = taskgraph_from_dict(_attention((16,), 2048, 2048, 128, 128, True))
    (plan,) = plan_tasks(tg, SEED)
    assert (plan.tiling.block_q, plan.tiling.block_kv) == (64, 128)
    with pytest.raises(TilingError, match=r"block_q 128, block_kv 128: .* > UB 262144 B"):
        plan_tasks(taskgraph_from_dict(_attention((16,), 2048, 2048, 128, 128, True,
                                                  {"block_q": 128, "block_kv": 128})), SEED)


def test_mask_offsets_round_trip_through_the_program_text_and_json():
    from staticsched.emit import dumps_program_json, dumps_program_text, loads_program, parse_program_text

    tg = taskgraph_from_dict(_attention((), 80, 80, 16, 16, True, {"block_q": 32, "block_kv": 32}))
    res = compile_graph(tg, SEED, method="list")
    instrs = [ins for st in res.program.streams for ins in st.instrs]
    masks = [ins for ins in instrs if dict(ins.attrs).get("op") == "mask_causal"]
    assert {(dict(i.attrs)["row0"], dict(i.attrs)["col0"]) for i in masks} == {(0, 0), (32, 32), (64, 64)}
    assert parse_program_text(dumps_program_text(res.program)) == res.program
    assert loads_program(dumps_program_json(res.program)) == res.program


def test_small_attention_schedules_and_verifies_with_jitter_and_numbers():
    d = _attention((2, 2), 200, 200, 64, 64, True)
    res = compile_graph(taskgraph_from_dict(d), SEED, method="list")
    report = verify(res.program, SEED, jitter=3, numeric=True)
    assert report.ok, report.text()
    assert report.stat["numeric_max_error"] <= 2e-3




@pytest.mark.parametrize(("d", "needle"), [
    (_attention((2,), 64, 64, 64, 64, False) | {"tensors": {
        "q": {"shape": [2, 64, 64]}, "k": {"shape": [2, 64, 32]}, "v": {"shape": [2, 64, 64]},
        "o": {"shape": [2, 64, 64]}}}, "mismatched head dimensions"),
    (_attention((2,), 64, 80, 64, 64, True), "a causal mask needs a square"),
])
def test_bad_attention_input_is_one_line_and_exit_2(d, needle, tmp_path, capsys):
    code, lines = cli_error_lines(d, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines


@pytest.mark.parametrize("name", ["attention", "attention_tail"])
def test_examples_read_round_trip_and_plan(name):
    tg = taskgraph_from_dict(json.loads((ROOT / "examples" / f"{name}.json").read_text()))
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
    assert dumps_taskgraph(tg) == dumps_taskgraph(taskgraph_from_dict(taskgraph_to_dict(tg)))
    ops = estimate_ops(plan_tasks(tg, SEED))
    # per (batch, head): 4 ops per Q block (load, move Q; normalise, store O), 16 per (Q, K/V)
    # block pair, 5 more per pair after a Q block's first (rescales), 1 per masked diagonal block
    # causal 2048 / 64x128 blocks: 32 Q blocks, Q block i sees i // 2 + 1 K/V blocks (272 pairs)
    # 1000, not causal: 16 Q blocks x 8 K/V blocks
    want = {"attention": 16 * (32 * 4 + 272 * 16 + (272 - 32) * 5 + 32),
            "attention_tail": 16 * (16 * 4 + 128 * 16 + (128 - 16) * 5)}
    assert ops == want[name]
    if name == "attention":
        (att,) = tg.tasks
        assert att.causal and att.heads == 16 and (att.sq, att.d) == (2048, 128) and math.isclose(
            att.softmax_scale, 128**-0.5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["attention", "attention_tail"])
def test_attention_examples_verify_clean_with_3_jittered_replays_and_error_below_2e3(name):
    """The acceptance run (a minute each on 2 cores with single-threaded BLAS): the list
    schedule's program verifies clean with 3 jittered replays and numeric replay, max element
    error <= 2e-3 against the float32 reference."""
    res = compile_graph(ROOT / "examples" / f"{name}.json", SEED, method="list")
    report = verify(res.program, SEED, jitter=3, numeric=True)
    assert report.ok, report.text()
    assert report.stat["jitter_replays"] == 3
    assert report.stat["numeric_max_error"] <= 2e-3
