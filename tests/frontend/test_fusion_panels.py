"""Fusion's balance rule weighs a row epilogue's parallelism (issue 48, item 4): a row
epilogue makes each row panel one core's work, so a matmul with fewer row panels than Cube
cores keeps its LayerNorm apart when the panels would take longer than the two tasks."""

from __future__ import annotations

from common import preset

from staticsched.frontend.fusion import fuse
from staticsched.frontend.taskgraph import taskgraph_from_dict

A2 = preset("ascend-a2")


def _graph(m: int) -> dict:
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"x": {"shape": [m, 1024]}, "w": {"shape": [1024, 256]}, "h": {"shape": [m, 256]},
                        "g": {"shape": [256]}, "b": {"shape": [256]}, "y": {"shape": [m, 256]}},
            "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "h"},
                      {"id": "ln", "type": "rowwise", "op": "layernorm", "input": "h", "gamma": "g",
                       "beta": "b", "out": "y"}]}


def test_a_row_epilogue_with_fewer_panels_than_cube_cores_is_split_off():
    fused = fuse(taskgraph_from_dict(_graph(128)), A2)
    (d,) = [d for d in fused.decisions if d.candidate == "ln"]
    assert not d.fused and d.rule == "balance"
    assert "row panel(s) for 24 Cube cores" in d.why
    assert [t.id for t in fused.graph.tasks] == ["mm", "ln"]


def test_a_row_epilogue_with_a_panel_per_core_still_fuses():
    fused = fuse(taskgraph_from_dict(_graph(128 * 32)), A2)
    (d,) = [d for d in fused.decisions if d.candidate == "ln"]
    assert d.fused, d.why
    assert [t.id for t in fused.graph.tasks] == ["mm"]
