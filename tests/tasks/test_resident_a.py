"""A matmul's A row panel resident in L1 across a row of blocks (``Tiling.resident_a``): the
derivation picks it where the panel fits and the grid keeps a group per Cube core, the lowering
loads A once per group and streams B through a ring, and the programs verify with numbers."""

from __future__ import annotations

import math

import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.errors import TilingError
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.tasks.matmul import MatmulPlan
from staticsched.tasks.matmul.task import Tiling
from staticsched.tasks.matmul.tiling import check_tiling, derive_tiling
from staticsched.verify import verify


def _graph(m: int, n: int, k: int, tiling: dict | None = None, epilogue=()) -> dict:
    task = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "epilogue": list(epilogue)}
    tensors = {"x": {"shape": [m, k]}, "w": {"shape": [k, n]}, "y": {"shape": [m, n]}}
    if any(s.get("tensor") for s in epilogue):
        tensors["b"] = {"shape": [n]}
    if tiling is not None:
        task["tiling"] = tiling
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": [task]}


def _task(m: int, n: int, k: int, hw, tiling: dict | None = None):
    return taskgraph_from_dict(_graph(m, n, k, tiling)).tasks[0]


def test_gpt2_small_projections_keep_their_a_panels():
    # the GPT-2-small block's projections on ascend-a2 (24 AICs, 8 row panels of 128): rows of
    # N/base_n / 3 blocks, 24 groups, one per AIC
    hw = preset("ascend-a2")
    for n, step in ((768, 2), (3072, 8)):
        t = derive_tiling(_task(1024, n, 768, hw), hw)
        assert (t.base_m, t.base_n, t.base_k) == (128, 128, 128)
        assert t.resident_a and (t.step_m, t.step_n) == (1, step), t
        plan = MatmulPlan(_task(1024, n, 768, hw), t)
        assert plan.blocks == 24


def test_no_resident_panel_where_it_does_not_fit_or_would_idle_cores():
    hw = preset("ascend-a2")
    # K = 3072: a 128-row panel is 768 KiB, above A2's 512 KiB L1
    assert not derive_tiling(_task(1024, 768, 3072, hw), hw).resident_a
    # one row panel of two blocks on 24 AICs: grouping would leave a core without work
    assert not derive_tiling(_task(128, 256, 256, hw), hw).resident_a


def test_a_is_loaded_once_per_group_and_b_streams_through_a_ring():
    hw = preset("ascend-a2")
    tiling = {"base_m": 128, "base_n": 128, "base_k": 128, "step_n": 3, "resident_a": True}
    m, n, k = 200, 520, 600  # tails along M, N and K
    og = lower(taskgraph_from_dict(_graph(m, n, k, tiling)), hw)
    steps, nn, nm = math.ceil(k / 128), math.ceil(n / 128), math.ceil(m / 128)
    groups = nm * math.ceil(nn / 3)
    ids = [op.id for op in og.ops]
    assert sum(i.endswith(".load_a") for i in ids) == groups * steps
    assert sum(i.endswith(".load_b") for i in ids) == nm * nn * steps
    assert sum(i.endswith(".move_a") for i in ids) == nm * nn * steps  # A moved for every block
    plan = MatmulPlan(taskgraph_from_dict(_graph(m, n, k, tiling)).tasks[0],
                      Tiling(128, 128, 128, step_n=3, resident_a=True), aivs=2)
    assert plan.op_count == len(og.ops)
    # A's GM bytes: the panel once per group (each group's row panel whole)
    a_bytes = sum(math.prod(hi - lo for lo, hi in dict(op.attrs)["region"]) * 2 for op in og.ops
                  if op.id.endswith(".load_a"))
    assert a_bytes == m * k * 2 * math.ceil(nn / 3)
    # B's L1 tiles: a ring of two items per group, written in turn
    writers: dict[str, list[str]] = {}
    for op in og.ops:
        if op.id.endswith(".load_b"):
            writers.setdefault(op.writes[0], []).append(op.id)
    assert len(writers) == 2 * groups
    rings: dict[str, list[int]] = {}
    for item, ops in writers.items():
        rings.setdefault(item[:-1], []).append(len(ops))
    assert len(rings) == groups
    assert all(len(c) == 2 and abs(c[0] - c[1]) <= 1 for c in rings.values()), rings


@pytest.mark.parametrize("hw_name", ["seed-davinci", "ascend-a2"])
def test_resident_programs_verify_with_numbers(hw_name):
    hw = preset(hw_name)
    tiling = {"base_m": 128, "base_n": 128, "base_k": 128, "step_n": 3, "resident_a": True}
    epilogue = [{"op": "bias", "tensor": "b"}, {"op": "gelu"}]
    res = compile_graph(taskgraph_from_dict(_graph(200, 520, 600, tiling, epilogue)), hw, method="list")
    report = verify(res.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()


def test_a_resident_row_with_a_row_reduction_verifies():
    # the row panel is the reduction's unit of work: resident, it is one group of every N block
    hw = preset("ascend-a2")
    tiling = {"base_m": 64, "base_n": 128, "base_k": 128, "resident_a": True}
    g = _graph(100, 384, 256, tiling, [{"op": "layernorm"}])
    res = compile_graph(taskgraph_from_dict(g), hw, method="list")
    assert sum(op.id.endswith(".load_a") for op in res.graph.ops) == 2 * 2  # 2 panels x 2 K steps
    report = verify(res.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()


def test_bad_resident_tilings_are_refused():
    hw = preset("ascend-a2")
    task = _task(512, 512, 256, hw)
    with pytest.raises(TilingError, match="resident_a with step_m = 2"):
        check_tiling(task, Tiling(128, 128, 128, step_m=2, step_n=2, resident_a=True), hw)
    with pytest.raises(TilingError, match="resident_a with split_k = 2"):
        check_tiling(task, Tiling(128, 128, 128, split_k=2, resident_a=True), hw)
    big = _task(256, 512, 8192, hw)  # a 128 x 8192 panel: 2 MiB
    with pytest.raises(TilingError, match=r"ceil\(K/base_k\)\*base_m\*base_k"):
        check_tiling(big, Tiling(128, 128, 128, step_n=2, resident_a=True), hw)


def test_labels_and_fields_name_the_resident_panel():
    from staticsched.tasks.space import tiling_fields, tiling_label

    assert tiling_label(Tiling(128, 128, 128, step_n=2, resident_a=True)) == "128/128/128 s1x2 rA"
    assert "resident_a" not in tiling_fields(Tiling(128, 128, 128))  # as a TaskGraph leaves it out
