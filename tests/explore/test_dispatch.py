"""Dispatch: the hardware's launch overhead (read, defaulted, refused), each task as a kernel
of its own, and the arithmetic of the three forms (one static program, one kernel per task,
one kernel per unfused node)."""

from __future__ import annotations

import math
import tomllib
from importlib import resources

import attrs
import pytest
from common import SEED, preset

from staticsched.errors import HardwareError
from staticsched.explore.dispatch import Dispatch, compare_dispatch, dispatch_table, kernel_graph
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.frontend.unfuse import unfuse
from staticsched.model.hardware_toml import hardware_from_dict
from staticsched.pipeline import compile_graph


def _doc(name: str) -> dict:
    return tomllib.loads((resources.files("staticsched") / "presets" / f"{name}.toml").read_text())


def test_launch_overhead_in_the_presets():
    assert preset("seed-davinci").launch_overhead_us == 5.0  # [seed §1.2] 3-10 µs
    assert preset("seed-davinci-hbm").launch_overhead_us == 5.0
    assert preset("ascend-a2").launch_overhead_us == 20.0  # [ref §3.1] A2 full-core head cost
    assert preset("double-buffer-demo").launch_overhead_us == 0.0  # absent: 0


def test_launch_overhead_defaults_to_zero():
    d = _doc("seed-davinci")
    d.pop("launch_overhead_us")
    assert hardware_from_dict(d, "x.toml").launch_overhead_us == 0.0
    d["launch_overhead_us"] = 0
    assert hardware_from_dict(d, "x.toml").launch_overhead_us == 0.0


@pytest.mark.parametrize(("value", "needle"), [
    (-1.0, "x.toml: 'launch_overhead_us' must be >= 0, got -1.0"),
    ("5", "x.toml: 'launch_overhead_us' must be a number, got '5'"),
    (True, "x.toml: 'launch_overhead_us' must be a number, got True"),
    (float("inf"), "x.toml: 'launch_overhead_us' must be finite"),
])
def test_a_bad_launch_overhead_is_one_line(value, needle):
    d = _doc("seed-davinci")
    d["launch_overhead_us"] = value
    with pytest.raises(HardwareError) as exc:
        hardware_from_dict(d, "x.toml")
    assert len(exc.value.problems) == 1 and needle in exc.value.problems[0]


#: a matmul with a two-step epilogue, then an elementwise task reading its output
TINY = {"format": "staticsched.taskgraph", "version": 1,
        "tensors": {"x": {"shape": [48, 64]}, "w": {"shape": [64, 40]}, "b": {"shape": [40]},
                    "y": {"shape": [48, 40]}, "r": {"shape": [48, 40]}, "o": {"shape": [48, 40]}},
        "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                   "epilogue": [{"op": "bias", "tensor": "b"}, {"op": "relu"}]},
                  {"id": "act", "type": "elementwise", "op": "add", "inputs": ["y", "r"], "out": "o"}]}


def test_a_kernel_is_its_task_alone():
    tg = taskgraph_from_dict(TINY)
    k = kernel_graph(tg, "act")
    assert [t.id for t in k.tasks] == ["act"]
    assert k.input_names == ("r", "y") and k.output_names == ("o",)
    assert k.tensor_map["y"] == tg.tensor_map["y"]
    assert kernel_graph(tg, "mm").input_names == ("b", "w", "x")


def test_the_three_forms_add_up():
    tg = taskgraph_from_dict(TINY)
    hw = attrs.evolve(SEED, launch_overhead_us=3.5)
    d = compare_dispatch(tg, hw, name="tiny")

    def span(g):
        return compile_graph(g, hw, method="list").schedule.makespan

    assert d.static_cycles == span(tg)
    assert d.kernel_cycles == (("mm", span(kernel_graph(tg, "mm"))), ("act", span(kernel_graph(tg, "act"))))
    un = unfuse(tg)
    assert [n for n, _ in d.node_cycles] == ["mm", "mm_bias1", "mm_relu2", "act"]
    assert d.node_cycles == tuple((t.id, span(kernel_graph(un, t.id))) for t in un.tasks)
    assert (d.n_tasks, d.n_nodes) == (2, 4)
    # (a) one launch; (b) and (c): the sums of the separate makespans plus one launch each
    us = hw.cycles_to_us
    assert math.isclose(d.static_us, us(d.static_cycles) + 3.5)
    assert math.isclose(d.kernels_us, us(sum(c for _, c in d.kernel_cycles)) + 2 * 3.5)
    assert math.isclose(d.unfused_us, us(sum(c for _, c in d.node_cycles)) + 4 * 3.5)
    assert math.isclose(d.kernel_compute_us, us(sum(c for _, c in d.kernel_cycles)))
    assert d == compare_dispatch(tg, hw, name="tiny")  # deterministic


def test_with_no_launch_overhead_only_the_makespans_count():
    d = _doc("seed-davinci")
    d.pop("launch_overhead_us")
    hw = hardware_from_dict(d, "no-launch.toml")
    r = compare_dispatch(taskgraph_from_dict(TINY), hw)
    assert r.launch_overhead_us == 0.0
    assert r.static_us == r.static_compute_us == hw.cycles_to_us(r.static_cycles)
    assert r.kernels_us == r.kernel_compute_us and r.unfused_us == r.node_compute_us


def test_the_table():
    hw = attrs.evolve(SEED, launch_overhead_us=5.0)
    d = Dispatch("g", hw, 1800, [("a", 900), ("b", 900)], [("a", 900), ("a2", 900), ("b", 1800)])
    assert (d.static_us, d.kernels_us, d.unfused_us) == (6.0, 11.0, 17.0)
    lines = dispatch_table([d])
    assert lines[0].startswith("| graph | tasks | nodes | (a) µs | (b) µs | (c) µs | (b)/(a) | (c)/(a) |")
    assert lines[2] == "| g | 2 | 3 | 6.00 | 11.00 | 17.00 | 1.83 | 2.83 |"
    assert "launch = 5 µs" in lines[3]
