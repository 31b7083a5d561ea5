"""L1 reuse in matmul tiling: ``step_m x step_n`` blocks computed together, one A tile load
serving ``step_n`` blocks and one B tile load ``step_m`` (Ascend's ``stepM``/``stepN``)."""

from __future__ import annotations

import math

import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.errors import TilingError
from staticsched.frontend.lowering import estimate_ops, lower, plan_tasks, tiling_info
from staticsched.frontend.taskgraph import taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.traffic import gm_traffic
from staticsched.verify import verify


def _graph(m=300, k=200, n=290, tiling=None, epilogue=None) -> dict:
    if epilogue is None:
        epilogue = [{"op": "bias", "tensor": "bias"}, {"op": "relu"}]
    task = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "epilogue": epilogue}
    if tiling is not None:
        task["tiling"] = tiling
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"x": {"shape": [m, k]}, "w": {"shape": [k, n]}, "bias": {"shape": [n]},
                        "y": {"shape": [m, n]}},
            "tasks": [task]}


def _tiling(sm, sn, base=64):
    return {"base_m": base, "base_n": base, "base_k": base, "step_m": sm, "step_n": sn}


def _loads(og, name):
    return [op for op in og.ops if op.kind == "load" and op.id.endswith(name)]


@pytest.mark.parametrize(("sm", "sn"), [(1, 1), (2, 1), (1, 3), (2, 3), (1, 5)])
def test_one_load_serves_a_row_or_column_of_the_group(sm, sn):
    hw = preset("seed-davinci")
    tg = taskgraph_from_dict(_graph(tiling=_tiling(sm, sn)))
    og = lower(tg, hw)
    nm, nn, nk = math.ceil(300 / 64), math.ceil(290 / 64), math.ceil(200 / 64)
    groups = [(min(sm, nm - i), min(sn, nn - j)) for i in range(0, nm, sm) for j in range(0, nn, sn)]
    assert len(_loads(og, "load_a")) == nk * sum(gm for gm, _ in groups)
    assert len(_loads(og, "load_b")) == nk * sum(gn for _, gn in groups)
    assert len(og.ops) == estimate_ops(plan_tasks(tg, hw))
    # A is read once per group column, B once per group row
    read = dict(gm_traffic(og, hw).tensors)
    assert read["x"][0] == 300 * 200 * 2 * math.ceil(nn / sn)
    assert read["w"][0] == 200 * 290 * 2 * math.ceil(nm / sm)


def test_grouped_blocks_go_to_one_core_and_verify_with_numbers():
    hw = preset("seed-davinci")
    res = compile_graph(taskgraph_from_dict(_graph(tiling=_tiling(2, 3))), hw, method="list")
    cores = {}
    for op in res.graph.ops:
        if op.kind == "mmad":
            cores.setdefault(op.id.split(".")[1], set()).add(op.core)
    assert all(len(c) == 1 for c in cores.values())
    assert len({next(iter(c)) for c in cores.values()}) == 6  # six groups, six cores
    report = verify(res.program, hw, numeric=True)
    assert report.ok, report.text()


def test_steps_round_trip_and_default_to_one():
    tg = taskgraph_from_dict(_graph(tiling=_tiling(2, 3)))
    assert taskgraph_to_dict(tg)["tasks"][0]["tiling"]["step_m"] == 2
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
    plain = taskgraph_to_dict(taskgraph_from_dict(_graph(tiling=_tiling(1, 1))))
    assert "step_m" not in plain["tasks"][0]["tiling"]


def test_summary_info_names_the_steps():
    hw = preset("seed-davinci")
    (info,) = tiling_info(taskgraph_from_dict(_graph(tiling=_tiling(2, 3))), hw)
    assert "L1 reuse step m x n 2x3, 6 groups of blocks" in info.text()
    assert info.as_dict()["steps"] == [2, 3]
    (plain,) = tiling_info(taskgraph_from_dict(_graph(tiling=_tiling(1, 1))), hw)
    assert "steps" not in plain.as_dict()


@pytest.mark.parametrize(
    ("tiling", "epilogue", "line"),
    [
        (_tiling(6, 1), None, "tiling step_m = 6 exceeds the 5 blocks along M (M = 300, base_m = 64)"),
        ({**_tiling(2, 2, 128), "base_k": 64}, None,
         "step_m*step_n*base_m*base_n*4 B*2 buffers = 2*2*128*128*4*2 = 524288 B > L0C 262144 B"),
        (_tiling(2, 1), [{"op": "softmax"}], "a row reduction in the epilogue"),
    ],
)
def test_bad_steps_are_one_line_each(tiling, epilogue, line):
    with pytest.raises(TilingError) as exc:
        lower(taskgraph_from_dict(_graph(tiling=tiling, epilogue=epilogue)), preset("seed-davinci"))
    assert any(line in p for p in exc.value.problems), exc.value.problems


def test_step_zero_is_refused_when_reading():
    from staticsched.errors import InputError

    with pytest.raises(InputError) as exc:
        taskgraph_from_dict(_graph(tiling=_tiling(0, 1)))
    assert "'step_m' = 0 is below the minimum 1" in str(exc.value)
