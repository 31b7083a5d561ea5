"""A matmul whose A is an earlier task's output and whose B is not loads B's tiles ahead of
A's in program order on a split chip (``MatmulPlan._prefetch``): they wait for no task, so
they load while the producer of A still runs."""

from __future__ import annotations

import math

import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.verify import verify

K2 = 1024  # the second matmul's K: 8 steps of 128


def _chain(b2_produced: bool = False) -> dict:
    """``h = x @ w1``; ``y = h @ w2`` (``w2`` a graph input, or a third matmul's output)."""
    tensors = {"x": {"shape": [128, 256]}, "w1": {"shape": [256, K2]}, "h": {"shape": [128, K2]},
               "w2": {"shape": [K2, 256]}, "y": {"shape": [128, 256]}}
    tasks = [{"id": "mm1", "type": "matmul", "a": "x", "b": "w1", "out": "h"},
             {"id": "mm2", "type": "matmul", "a": "h", "b": "w2", "out": "y"}]
    if b2_produced:
        tensors["u"] = {"shape": [K2, 256]}
        tensors["v"] = {"shape": [256, 256]}
        tasks.insert(0, {"id": "mm0", "type": "matmul", "a": "u", "b": "v", "out": "w2"})
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": tasks}


def _positions(og, task: str) -> dict[str, int]:
    return {op.id: k for k, op in enumerate(og.ops) if op.id.startswith(task + ".")}


def _blocks(pos: dict[str, int]) -> list[str]:
    return sorted({i.split(".")[1] for i in pos})


def test_b_tiles_come_ahead_of_a_on_a_split_chip():
    hw = preset("ascend-a2")
    og = lower(taskgraph_from_dict(_chain()), hw)
    pos = _positions(og, "mm2")
    steps = math.ceil(K2 / 128)
    l1 = hw.space(hw.role("operand")).capacity
    # one A tile beside B's: the slots the chip's ids leave (8 on A2) or L1's 32 KiB tiles
    ahead = min(steps, min(l1 // (128 * 128 * 2), hw.sync.event_ids) - 1)
    assert 1 < ahead < steps
    for b in _blocks(pos):
        first_a = pos[f"mm2.{b}.k0.load_a"]
        before = [s for s in range(steps) if pos[f"mm2.{b}.k{s}.load_b"] < first_a]
        assert before == list(range(ahead)), b
        # and each later step's B tile just before that step's A tile
        for s in range(1, steps - ahead + 1):
            assert pos[f"mm2.{b}.k{s - 1}.load_a"] < pos[f"mm2.{b}.k{s + ahead - 1}.load_b"] \
                < pos[f"mm2.{b}.k{s}.load_a"]


def test_program_order_keeps_the_operand_space_within_its_slots():
    """Allocation follows program order, so its live set must fit for the list scheduler's
    in-order allocation to be deadlock-free: per core, the operand space's items live from
    their first to their last access never outnumber the slots the ids allow."""
    hw = preset("ascend-a2")
    og = lower(taskgraph_from_dict(_chain()), hw)
    l1 = hw.role("operand")
    items = {it.name: it for it in og.items}
    last: dict[str, int] = {}
    for k, op in enumerate(og.ops):
        for name in (*op.reads, *op.writes):
            last[name] = k
    live: dict[int, set[str]] = {}
    peak = 0
    for k, op in enumerate(og.ops):
        held = live.setdefault(op.core, set())
        held.update(n for n in op.writes if items[n].space == l1)
        peak = max(peak, len(held))
        held.difference_update([n for n in held if last[n] <= k])
    assert peak <= hw.sync.event_ids
    assert peak > 2  # the prefetch does hold more than double buffering


def test_no_prefetch_on_a_coupled_core_or_when_b_waits_too():
    for hw_name, b2_produced in (("seed-davinci", False), ("ascend-a2", True)):
        og = lower(taskgraph_from_dict(_chain(b2_produced)), preset(hw_name))
        pos = _positions(og, "mm2")
        for b in _blocks(pos):
            for s in range(math.ceil(K2 / 128)):
                if f"mm2.{b}.k{s}.load_a" in pos:
                    assert pos[f"mm2.{b}.k{s}.load_a"] < pos[f"mm2.{b}.k{s}.load_b"], (hw_name, b, s)


@pytest.mark.parametrize("method", ["list"])
def test_the_prefetching_program_verifies_with_numbers(method):
    hw = preset("ascend-a2")
    res = compile_graph(taskgraph_from_dict(_chain()), hw, method=method)
    report = verify(res.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()


def _resident_chain() -> dict:
    """``h = x @ w1``; ``y = h @ w2`` with ``y``'s rows of two blocks keeping their A panel
    (``resident_a``; 2 row panels x 4 N blocks, 6 K steps)."""
    tiling = {"base_m": 128, "base_n": 128, "base_k": 128, "step_n": 2, "resident_a": True}
    tensors = {"x": {"shape": [256, 256]}, "w1": {"shape": [256, 768]}, "h": {"shape": [256, 768]},
               "w2": {"shape": [768, 512]}, "y": {"shape": [256, 512]}}
    tasks = [{"id": "mm1", "type": "matmul", "a": "x", "b": "w1", "out": "h"},
             {"id": "mm2", "type": "matmul", "a": "h", "b": "w2", "out": "y", "tiling": tiling}]
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": tasks}


@pytest.mark.parametrize("hw_name", ["ascend-a2", "seed-davinci"])
def test_a_resident_row_loads_its_first_b_tiles_ahead_of_a_on_a_split_chip(hw_name):
    # B's ring holds two tiles: on a split chip the first block's first two come before its
    # first A tile, the rest after; on a coupled core A comes first, as before
    hw = preset(hw_name)
    pos = _positions(lower(taskgraph_from_dict(_resident_chain()), hw), "mm2")
    firsts = sorted({i.split(".")[1] for i in pos if i.endswith(".load_a")})
    assert len(firsts) == 4  # one group per row of two blocks
    for b in firsts:
        first_a = pos[f"mm2.{b}.k0.load_a"]
        before = [s for s in range(6) if pos[f"mm2.{b}.k{s}.load_b"] < first_a]
        assert before == ([0, 1] if hw.split else []), (hw_name, b)


def test_the_resident_prefetching_program_verifies_with_numbers():
    hw = preset("ascend-a2")
    res = compile_graph(taskgraph_from_dict(_resident_chain()), hw, method="list")
    report = verify(res.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()
