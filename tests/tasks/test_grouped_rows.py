"""Groups of blocks along N computed K step by K step where A's panel cannot be resident
(:func:`~staticsched.tasks.matmul.tiling.grouped_rows`): the derivation picks them on a split
chip when their bound is below the plain tiling's, single buffered when only that fits, and
the programs verify with numbers."""

from __future__ import annotations

import math

import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.explore.overrides import override_hardware
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_document
from staticsched.tasks.bounds import bound_of
from staticsched.tasks.matmul.task import Tiling
from staticsched.tasks.matmul.tiling import derive_tiling, grouped_rows, misfits
from staticsched.tasks.matmul.workbound import MatmulBounds
from staticsched.verify import verify


def _graph(m: int, n: int, k: int, tiling: dict | None = None, epilogue=(), nz: bool = True) -> dict:
    task = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "epilogue": list(epilogue)}
    tensors: dict = {"x": {"shape": [m, k]}, "w": {"shape": [k, n]}, "y": {"shape": [m, n]}}
    if nz:
        tensors["x"]["layout"] = tensors["w"]["layout"] = "NZ"
    if any(s.get("tensor") for s in epilogue):
        tensors["b"] = {"shape": [n]}
    if tiling is not None:
        task["tiling"] = tiling
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": [task]}


def _task(m: int, n: int, k: int, **kw):
    return taskgraph_from_dict(_graph(m, n, k, **kw)).tasks[0]


def _bound(task, hw, tiling: Tiling) -> int:
    return bound_of([MatmulBounds(task, hw).work(tiling)], hw.cores)


def test_gpt2_small_down_projection_groups_two_blocks_single_buffered():
    # K = 3072: A's 128-row panel (768 KiB) is above A2's 512 KiB L1, so it cannot be resident;
    # two double-buffered accumulators of 128 x 128 fp32 would need 256 KiB of the 128 KiB L0C
    hw = preset("ascend-a2")
    task = _task(1024, 768, 3072)
    t = derive_tiling(task, hw)
    assert (t.base_m, t.base_n, t.base_k) == (128, 128, 128)
    assert (t.step_m, t.step_n, t.resident_a, t.double_buffer) == (1, 2, False, False), t
    plain = Tiling(128, 128, 128)
    assert misfits(task, Tiling(128, 128, 128, step_n=2), hw)
    assert _bound(task, hw, t) < _bound(task, hw, plain)
    # the plain tiling's bound is its MTE2 on one AIC: two blocks of 24 K steps, each step
    # two 32 KiB loads at 128 B/cycle
    assert _bound(task, hw, plain) >= 2 * 24 * 2 * (32768 // 128)


def test_no_grouping_on_a_coupled_core_or_where_it_would_idle_cores():
    task = _task(1024, 768, 3072)
    assert derive_tiling(task, preset("seed-davinci")) == Tiling(128, 128, 128)
    # 2 x 4 blocks on 24 AICs: a group of two would leave more cores without work
    hw = preset("ascend-a2")
    assert not derive_tiling(_task(256, 512, 3072), hw).reuses


def test_grouping_is_kept_only_when_its_bound_is_lower():
    # with MTE2 and the L2 link eight times as fast the plain tiling is bound by the Cube, which
    # a grouping does not shorten: it is not taken
    doc, where = hardware_document("ascend-a2")
    fast = override_hardware(doc, where, {"paths.GM->L1.bytes_per_cycle": 1024,
                                          "links.L2.bytes_per_cycle": 8 * 3888})
    task = _task(1024, 768, 3072)
    plain = Tiling(128, 128, 128)
    grouped = Tiling(128, 128, 128, double_buffer=False, step_n=2)
    assert _bound(task, fast, grouped) >= _bound(task, fast, plain)
    assert grouped_rows(task, fast, plain) == plain
    assert grouped_rows(task, preset("ascend-a2"), plain) == grouped


def test_the_split_chip_bound_deals_blocks_over_the_aics_only():
    # 48 blocks over 24 AICs: two each, not one each over all 72 cores
    hw = preset("ascend-a2")
    task = _task(1024, 768, 3072)
    work = MatmulBounds(task, hw).work(Tiling(128, 128, 128))
    mte2 = dict(work.per_core)["MTE2"]
    one_block = 24 * 2 * (32768 // 128)
    assert mte2 >= 2 * one_block


@pytest.mark.parametrize("m,n,k", [(256, 512, 640), (200, 520, 600)])
def test_single_buffered_groups_verify_with_numbers(m, n, k):
    # two accumulators of 128 x 128 fp32 fill A2's L0C: the next group's first mmad waits for
    # both FixPipes; tails along M, N and K in the second shape
    hw = preset("ascend-a2")
    tiling = {"base_m": 128, "base_n": 128, "base_k": 128, "step_n": 2, "double_buffer": False}
    epilogue = [{"op": "bias", "tensor": "b"}, {"op": "gelu"}]
    res = compile_graph(taskgraph_from_dict(_graph(m, n, k, tiling, epilogue, nz=False)), hw, method="list")
    ids = [op.id for op in res.graph.ops]
    steps, nn, nm = math.ceil(k / 128), math.ceil(n / 128), math.ceil(m / 128)
    assert sum(i.endswith(".load_a") for i in ids) == nm * math.ceil(nn / 2) * steps
    assert sum(i.endswith(".load_b") for i in ids) == nm * nn * steps
    report = verify(res.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()
