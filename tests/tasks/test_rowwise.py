"""The rowwise kind: softmax, layernorm, rmsnorm, rowmax and rowsum over the last axis, with one
block per row or streamed over column blocks (tails included), against NumPy; its bad inputs;
and the FFN example built on it."""

from __future__ import annotations

import json

import pytest
from common import ROOT
from taskcases import SEED, cli_error_lines, graph, max_error, with_task

from staticsched.errors import GraphError
from staticsched.frontend.lowering import estimate_ops, lower, plan_tasks, tiling_info
from staticsched.frontend.taskgraph import taskgraph_from_dict, taskgraph_to_dict


def _rowwise(op: str, shape, *, tiling=None, gamma=False, beta=False, eps=None) -> dict:
    out = shape if op not in ("rowmax", "rowsum") else (*shape[:-1], 1)
    tensors = {"x": shape, "y": out, "g": (shape[-1],), "b": (shape[-1],)}
    task = {"id": "r", "type": "rowwise", "op": op, "input": "x", "out": "y"}
    if gamma:
        task["gamma"] = "g"
    if beta:
        task["beta"] = "b"
    if eps is not None:
        task["eps"] = eps
    if tiling:
        task["tiling"] = tiling
    return graph(tensors, task)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layernorm", "rmsnorm", "rowmax", "rowsum"])
@pytest.mark.parametrize("tiling", [None, {"rows": 7, "cols": 48}])
def test_row_reductions_one_block_and_streamed_match_numpy(op, tiling):
    params = {"gamma": op in ("layernorm", "rmsnorm"), "beta": op == "layernorm"}
    d = _rowwise(op, (2, 19, 130), tiling=tiling, **params)
    assert max_error(d) <= 4e-3
    (info,) = tiling_info(taskgraph_from_dict(d), SEED)
    want = "single" if tiling is None else {"layernorm": "two-pass", "rmsnorm": "two-pass"}.get(op, "online")
    assert info.combine == want


def test_a_row_too_long_for_the_vector_buffer_is_streamed_in_blocks():
    tg = taskgraph_from_dict(_rowwise("softmax", (4, 40000)))
    (plan,) = plan_tasks(tg, SEED)
    assert plan.streamed and plan.combine == "online" and plan.tiling.cols < 40000
    assert len(lower(tg, SEED).ops) == estimate_ops([plan])


@pytest.mark.parametrize(("d", "needle"), [
    (lambda: with_task(_rowwise("softmax", (4, 8)), axis=2),
     "reduction over axis 2 of input 'x' [4, 8], which has no such dimension (axes -2..1)"),
    (lambda: with_task(_rowwise("rowsum", (4, 8)), axis=0),
     "only the last axis (-1) is reduced"),
    (lambda: _rowwise("softmax", (4, 8), gamma=True), "op 'softmax' takes no 'gamma'"),
    (lambda: _rowwise("rowmax", (4, 8), eps=0.1), "op 'rowmax' takes no 'eps'"),
])
def test_bad_rowwise_tasks_are_one_line_each(d, needle):
    with pytest.raises(GraphError) as exc:
        taskgraph_from_dict(d(), "g.json")
    assert len(exc.value.problems) == 1 and needle in exc.value.problems[0], exc.value.problems


@pytest.mark.parametrize(("kind", "op", "owner"), [("elementwise", "softmax", "rowwise"),
                                                   ("rowwise", "relu", "elementwise")])
def test_a_task_with_an_op_of_another_kind_names_that_kind(kind, op, owner):
    d = graph({"x": (4, 4), "y": (4, 4)},
               {"id": "t", "type": kind, "op": op, "inputs": ["x"], "out": "y"})
    hint = rf"\('{op}' is an op of '{owner}' tasks\)"
    with pytest.raises(GraphError, match=rf"'op' = '{op}' is not one of .*" + hint):
        taskgraph_from_dict(d)




@pytest.mark.parametrize(("d", "needle"), [
    (with_task(_rowwise("rowsum", (4, 8)), axis=5),
     "reduction over axis 5 of input 'x' [4, 8], which has no such dimension"),
    (with_task(_rowwise("softmax", (4, 8)), op="logsoftmax"),
     "'op' = 'logsoftmax' is not one of softmax, log_softmax, layernorm, rmsnorm, rowmax, rowsum"),
])
def test_bad_rowwise_input_is_one_line_and_exit_2(d, needle, tmp_path, capsys):
    code, lines = cli_error_lines(d, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines


def test_ffn_example_reads_round_trips_and_plans():
    tg = taskgraph_from_dict(json.loads((ROOT / "examples" / "ffn_layernorm.json").read_text()))
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
    assert [t.type for t in tg.ordered_tasks] == ["rowwise", "matmul", "matmul"]
    info = tiling_info(tg, SEED)
    assert info[0].combine == "single" and estimate_ops(plan_tasks(tg, SEED)) > 0
