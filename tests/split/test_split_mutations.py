"""Broken split-core programs the verifier must reject, each class on three emitted programs,
and the unbroken programs clean (no false alarm): a dropped "consumed" wait (the AIC
overwrites a workspace slot an AIV has not loaded), a counter driven past its capacity, and
a cross-core wait moved after the instruction it guards."""

from __future__ import annotations

import functools
import json
import tomllib
from importlib import resources

import attrs
import pytest

from staticsched.api import compile_graph
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_from_dict
from staticsched.verify import verify

_A2 = tomllib.loads((resources.files("staticsched") / "presets" / "ascend-a2.toml").read_text())


def _hw(**sync):
    d = json.loads(json.dumps(_A2))
    d["clusters"] = 2  # 2 AICs: more blocks than 2 stages per AIC, so ring slots come back
    d["sync"].update(sync)
    return hardware_from_dict(d, "a2-2clusters")


def _mm(m, n, k, epilogue, base=64):
    fp16 = "float16"
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"x": {"shape": [m, k], "dtype": fp16}, "w": {"shape": [k, n], "dtype": fp16},
                        "b": {"shape": [n], "dtype": fp16}, "y": {"shape": [m, n], "dtype": fp16},
                        "z": {"shape": [m, n], "dtype": fp16}},
            "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "epilogue": epilogue,
                       "tiling": {"base_m": base, "base_n": base, "base_k": 64, "double_buffer": True}},
                      {"id": "act", "type": "elementwise", "op": "relu", "inputs": ["y"], "out": "z"}]}


GRAPHS = {
    "bias_gelu": _mm(192, 128, 128, [{"op": "bias", "tensor": "b"}, {"op": "gelu"}]),
    "relu_tail": _mm(200, 136, 64, [{"op": "relu"}]),
    "plain_k192": _mm(256, 128, 192, []),
}


@functools.cache
def _program(name):
    compiled = compile_graph(taskgraph_from_dict(GRAPHS[name]), _hw(), method="list")
    return compiled.program


def _stream(program, core, unit):
    return next(k for k, st in enumerate(program.streams) if (st.core, st.unit) == (core, unit))


def _with(program, k, instrs):
    streams = list(program.streams)
    streams[k] = attrs.evolve(streams[k], instrs=instrs)
    return attrs.evolve(program, streams=streams)


def _guarding_waits(instrs, tensor):
    """Positions of the WAIT_CROSS instructions in the run of sync instructions right before
    each micro-op that accesses ``tensor``, in stream order."""
    for j, ins in enumerate(instrs):
        if ins.is_sync or dict(ins.attrs).get("tensor") != tensor:
            continue
        i = j - 1
        while i >= 0 and instrs[i].is_sync:
            if instrs[i].kind == "wait_cross":
                yield i
            i -= 1


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_unmutated_split_programs_are_clean(name):
    report = verify(_program(name), _hw(), jitter=3, numeric=True)
    assert report.ok, report.text()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_dropped_consumed_wait_is_a_workspace_race(name):
    program = _program(name)
    k = _stream(program, 0, "FIXPIPE")
    instrs = list(program.streams[k].instrs)
    # a WAIT_CROSS among the sync instructions right before a FixPipe store into the
    # workspace: the AIVs' loads of the slot's previous block
    i = next(_guarding_waits(instrs, "mm.ws"))
    report = verify(_with(program, k, instrs[:i] + instrs[i + 1:]), _hw(), jitter=0)
    races = [f for f in report.findings if f.check == "race"]
    assert any("mm.ws" in f.message for f in races), report.text()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_cross_core_wait_moved_after_the_load_it_guards_is_a_race(name):
    program = _program(name)
    k = _stream(program, 1, "MTE2")  # the first AIV's loads of its halves from the workspace
    instrs = list(program.streams[k].instrs)
    i = next(_guarding_waits(instrs, "mm.ws"))
    j = next(j for j in range(i + 1, len(instrs)) if not instrs[j].is_sync)
    instrs.insert(i, instrs.pop(j))  # the load issued before the wait that guards it
    report = verify(_with(program, k, instrs), _hw(), jitter=0)
    assert any(f.check in ("race", "dataflow") and "mm.ws" in f.message for f in report.findings), \
        report.text()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_counter_driven_past_its_capacity_is_reported(name):
    # the programs count several outstanding sets on one id (a counting semaphore): on a chip
    # whose counters hold one, replaying the same program overflows them; the waits that
    # bound the count removed on the original chip overflow it as well
    program = _program(name)
    report = verify(program, _hw(cross_core_capacity=1), jitter=0)
    overflow = [f for f in report.findings if f.kind == "counter_overflow"]
    dropped = program
    for k, st in enumerate(program.streams):
        if any(ins.kind == "wait_cross" for ins in st.instrs):
            dropped = _with(dropped, k, [ins for ins in st.instrs if ins.kind != "wait_cross"])
    report2 = verify(dropped, _hw(cross_core_capacity=2), jitter=0)
    overflow2 = [f for f in report2.findings if f.kind == "counter_overflow"]
    assert overflow or overflow2, (report.text(), report2.text())
    assert all("capacity" in f.message for f in overflow + overflow2)
