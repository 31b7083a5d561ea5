"""Broken split-core programs the verifier must reject, each class on three emitted programs,
and the unbroken programs and equivalent mutants clean (no false alarm): a dropped "consumed"
wait (the AIC overwrites a workspace slot an AIV has not loaded), a counter driven past its
capacity, a 16th outstanding mode-2 set, a mode-2 AND wait one AIV never sets, a swapped pair
of sets that no happens-before orders, and a cross-core wait moved after the instruction it
guards."""

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


def _first(instrs, kind, mode):
    return next(i for i, ins in enumerate(instrs) if ins.kind == kind and ins.mode == mode)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_emitted_programs_use_mode_2_in_a_cluster_and_gm_words_across(name):
    program = _program(name)
    modes = {(st.core, ins.peer_core, ins.mode) for st in program.streams for ins in st.instrs
             if ins.kind in ("set_cross", "wait_cross")}
    # the AIC names itself, each AIV its AIC; nothing else is mode 2, and no flag is point to point
    assert {(0, 0, "2"), (1, 0, "2"), (2, 0, "2"), (3, 3, "2")} <= modes
    assert all(mode == "gm" or (mode == "2" and peer in (core - core % 3,)) for core, peer, mode in modes)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_sixteenth_outstanding_mode_2_set_overflows_the_counters(name):
    program = _program(name)
    k = _stream(program, 0, "FIXPIPE")
    instrs = list(program.streams[k].instrs)
    i = _first(instrs, "set_cross", "2")
    # 16 sets of the AIC's first "stored" flag before any AIV waits: each AIV's counter of
    # the id would hold 16, one more than the 0-15 it can
    report = verify(_with(program, k, instrs[:i] + [instrs[i]] * 15 + instrs[i:]), _hw(), jitter=0)
    overflow = [f for f in report.findings if f.kind == "counter_overflow"]
    assert {f.core for f in overflow} == {0}, report.text()
    # the broadcast overflows both AIVs' counters, the first time at the 16th set
    first = [f for f in overflow if f"FIXPIPE#{i + 15}," in f.message]  # the 16th
    assert sorted(f.message.split(" id ")[0] for f in first) == [
        "SET_CROSS mode 2 to core 1", "SET_CROSS mode 2 to core 2"], report.text()
    assert all("already counts 15 sets not yet waited (its capacity" in f.message for f in overflow)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_mode_2_wait_that_one_aiv_never_sets_is_a_deadlock(name):
    program = _program(name)
    k = _stream(program, 2, "MTE2")  # the second AIV's "consumed" sets
    instrs = list(program.streams[k].instrs)
    i = _first(instrs, "set_cross", "2")
    report = verify(_with(program, k, instrs[:i] + instrs[i + 1:]), _hw(), jitter=0)
    dead = [f for f in report.findings if f.check == "deadlock"]
    # the AIC's AND wait has core 1's set but never core 2's
    assert dead and "WAIT_CROSS mode 2 from core 2" in dead[0].message, report.text()
    assert any(f.kind == "unpaired_wait" and f.core == 0 for f in report.findings), report.text()


def _cross_set_of_pipe(program, core, unit):
    k = _stream(program, core, unit)
    return k, next(i for i, ins in enumerate(program.streams[k].instrs) if ins.kind == "set_cross")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_swapped_pair_of_unordered_sets_is_caught(name):
    # an AIV's "consumed" set (MTE2, after a load from the ring) and its store's GM-word set
    # (MTE3) fire in no order the hardware guarantees; swapped, the store's consumers are
    # told "stored" when only the load is done
    program = _program(name)
    (ka, ia), (kb, ib) = _cross_set_of_pipe(program, 1, "MTE2"), _cross_set_of_pipe(program, 1, "MTE3")
    a, b = list(program.streams[ka].instrs), list(program.streams[kb].instrs)
    a[ia], b[ib] = attrs.evolve(b[ib], cycle=a[ia].cycle), attrs.evolve(a[ia], cycle=b[ib].cycle)
    mutant = _with(_with(program, ka, a), kb, b)
    report = verify(mutant, _hw(), jitter=0)
    assert any(f.check in ("race", "dataflow") for f in report.findings), report.text()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_equivalent_mutants_of_mode_2_programs_are_clean(name):
    program = _program(name)
    # (1) a cluster's mode-2 id renumbered on every instruction that uses it, to an id it
    # does not use: the same counters under another name
    renamed = program
    for k, st in enumerate(program.streams):
        if st.core in (0, 1, 2):
            renamed = _with(renamed, k, [attrs.evolve(ins, event=5) if ins.mode == "2" else ins
                                         for ins in st.instrs])
    assert verify(renamed, _hw(), jitter=2).ok
    # (2) two sets in a row on one pipe (nothing between them) swapped: they fire together
    swapped = program
    for k, st in enumerate(program.streams):
        instrs = list(st.instrs)
        for i in range(len(instrs) - 1):
            pair = {instrs[i].kind, instrs[i + 1].kind}
            if pair <= {"set_cross", "set_flag"} and instrs[i] != instrs[i + 1]:
                instrs[i], instrs[i + 1] = instrs[i + 1], instrs[i]
                swapped = _with(swapped, k, instrs)
                break
    assert swapped != program
    assert verify(swapped, _hw(), jitter=2).ok
