"""Barriers instead of GM words (emit/sync/barriers.py): where a task on the AIVs feeds a task
on AICs of other clusters, the planner tries one mode-0 barrier of all AIVs plus a mode-2 flag
from each AIV to its AIC, keeps it when the program's nominal replay is no longer, and the
verifier replays it exactly: a barrier an AIV skips hangs the others, one an AIV passes
early lets an AIC read data not yet stored."""

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


def _hw(clusters=3, **sync):
    d = json.loads(json.dumps(_A2))
    d["clusters"] = clusters
    d["sync"].update(sync)
    return hardware_from_dict(d, f"a2-{clusters}clusters")


def _mm(task_id, a, b, out, epilogue=()):
    return {"id": task_id, "type": "matmul", "a": a, "b": b, "out": out, "epilogue": list(epilogue),
            "tiling": {"base_m": 64, "base_n": 64, "base_k": 64, "double_buffer": True}}


def _ffn(rows, width, hidden):
    """Layernorm on the AIVs, then two matmuls with epilogues: ffn_layernorm.json, small."""
    shapes = {"x": [rows, width], "g": [width], "be": [width], "h": [rows, width], "w1": [width, hidden],
              "b1": [hidden], "u": [rows, hidden], "w2": [hidden, width], "b2": [width], "y": [rows, width]}
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": v} for k, v in shapes.items()},
            "tasks": [{"id": "ln", "type": "rowwise", "op": "layernorm", "input": "x", "gamma": "g",
                       "beta": "be", "out": "h"},
                      _mm("up", "h", "w1", "u", [{"op": "bias", "tensor": "b1"}, {"op": "gelu"}]),
                      _mm("down", "u", "w2", "y", [{"op": "bias", "tensor": "b2"}])]}


def _norm_mm(rows, width, cols):
    """rmsnorm on the AIVs feeding one matmul on the AICs."""
    shapes = {"x": [rows, width], "g": [width], "h": [rows, width], "w": [width, cols], "y": [rows, cols]}
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": v} for k, v in shapes.items()},
            "tasks": [{"id": "norm", "type": "rowwise", "op": "rmsnorm", "input": "x", "gamma": "g",
                       "out": "h"},
                      _mm("mm", "h", "w", "y")]}


def _chain():
    """examples/chain.json: a matmul's epilogue on the AIVs, then two elementwise tasks on the
    AIVs, each cut into tiles of its own: AIV -> AIV dependencies across clusters."""
    return json.loads((resources.files("staticsched") / "examples" / "chain.json").read_text())


def _unfused(rows, width, cols):
    """A matmul without epilogue (FixPipe stores on the AICs), then gelu on the AIVs: AIC ->
    AIV dependencies across clusters."""
    shapes = {"x": [rows, width], "w": [width, cols], "y": [rows, cols], "z": [rows, cols]}
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": v} for k, v in shapes.items()},
            "tasks": [_mm("mm", "x", "w", "y"),
                      {"id": "act", "type": "elementwise", "op": "gelu", "inputs": ["y"], "out": "z"}]}


CASES = {
    "chain_3clusters": (_chain(), 3),
    "ffn_3clusters": (_ffn(256, 128, 256), 3),
    "ffn_2clusters": (_ffn(192, 128, 192), 2),
    "norm_mm_4clusters": (_norm_mm(320, 128, 256), 4),
}


@functools.cache
def _compiled(name, **sync):
    graph, clusters = CASES[name]
    return compile_graph(taskgraph_from_dict(graph), _hw(clusters, **dict(sync)), method="list")


def _barrier_streams(program):
    """(stream index, positions of its mode-0 instructions) of every stream that has them."""
    return [(k, [i for i, ins in enumerate(st.instrs) if ins.mode == "0"])
            for k, st in enumerate(program.streams) if any(ins.mode == "0" for ins in st.instrs)]


def _with(program, k, instrs):
    streams = list(program.streams)
    streams[k] = attrs.evolve(streams[k], instrs=instrs)
    return attrs.evolve(program, streams=streams)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_barrier_replaces_the_gm_words_when_it_is_shorter_and_verifies(name):
    c = _compiled(name)
    choices = c.plan.stats.barriers
    kept = [ch for ch in choices if ch.kept]
    assert kept, [ch.line() for ch in choices]
    for ch in choices:
        # kept exactly where the replay with the barrier is no longer than with the GM words
        # (a bundle's GM words in a row are one turnstile, so GM words may win: up -> down)
        assert (0 < ch.makespan_barrier <= ch.makespan_gm) == ch.kept, ch.line()
    # no GM word is left from an AIV between two tasks whose bundle took a barrier
    hw = _hw(CASES[name][1])
    cs = hw.sync.cluster_size
    barred = {(ch.producer, ch.consumer) for ch in kept}
    assert not [f for f in c.plan.flags if f.route == "gm" and f.set_core % cs
                and (f.set_op.split(".")[0], f.wait_op.split(".")[0]) in barred]
    # every AIV has one SET and one WAIT per barrier, each a single mode-0 instruction (on one
    # pipe, or the WAIT on the pipe where the AIV consumes)
    kinds: dict[int, list[str]] = {}
    for st in c.program.streams:
        kinds.setdefault(st.core, []).extend(ins.kind for ins in st.instrs if ins.mode == "0")
    assert sorted(core for core, k in kinds.items() if k) == [v for v in range(hw.cores) if v % cs]
    for k in kinds.values():
        assert sorted(k) == sorted(["set_cross", "wait_cross"] * len(kept)) or not k
    report = verify(c.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()


def test_a_barrier_that_would_deadlock_is_dropped():
    # an unfused matmul's output is stored by the AIVs (its identity epilogue), and the list
    # schedule starts gelu's loads on an AIV's MTE2 before that AIV's last workspace loads: a
    # barrier before gelu's first load would hold the loads the barrier waits for
    hw = _hw(3)
    c = compile_graph(taskgraph_from_dict(_unfused(256, 128, 256)), hw, method="list")
    choices = c.plan.stats.barriers
    assert [(ch.producer, ch.consumer, ch.kept, ch.why) for ch in choices] == \
        [("mm", "act", False, "the barrier would deadlock the program")]
    assert not _barrier_streams(c.program)
    report = verify(c.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()


def test_free_gm_words_are_kept_and_the_choice_says_why():
    # GM words that cost nothing (no latency, no polling load): the barrier's two hardware
    # hops and its wait for the slowest AIV make it longer, so the GM words stay
    c = _compiled("ffn_3clusters", gm_flag_latency=0, gm_flag_poll=0)
    choices = c.plan.stats.barriers
    assert choices and not any(ch.kept for ch in choices), [ch.line() for ch in choices]
    assert all(ch.makespan_barrier > ch.makespan_gm for ch in choices)
    assert not _barrier_streams(c.program)
    assert verify(c.program, _hw(3, gm_flag_latency=0, gm_flag_poll=0), jitter=2).ok


@pytest.mark.parametrize(("budget", "why"), [
    # one id: the baton plan
    ({"cross_core_ids_per_core": 1}, "ids ran short: the baton plan keeps its GM words"),
    # both taken by the mode-2 flags
    ({"cross_core_ids_per_core": 2}, "no mode-0 id is free on the AIVs"),
    # the third is the barrier's
    ({"cross_core_ids_per_core": 3}, "no mode-2 id is free in cluster 0"),
    # ids per core to spare, but a mode-2 id must also fit the per-pair pools (found by the
    # thorough property: a hop on id 2 with 1 id per pair)
    ({"cross_core_ids_per_core": 8, "cross_core_event_ids": 3},
     "no mode-2 id is free in cluster 0"),
])
def test_a_budget_without_a_free_id_keeps_the_gm_words_and_still_schedules(budget, why):
    hw = _hw(3, **budget)
    c = compile_graph(taskgraph_from_dict(CASES["ffn_3clusters"][0]), hw, method="list")
    choices = c.plan.stats.barriers
    assert choices and all(not ch.kept and ch.why == why for ch in choices), [ch.line() for ch in choices]
    assert not _barrier_streams(c.program)
    report = verify(c.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()


def test_the_summary_and_the_timetable_report_each_choice(tmp_path):
    from staticsched.emit import summary_lines

    c = _compiled("ffn_3clusters")
    lines = summary_lines(c.schedule, c.plan)
    bars = [ln for ln in lines if ln.strip().startswith("barrier")]
    assert len(bars) == 2 and "ln -> up" in bars[0] and "up -> down" in bars[1], lines
    assert "mode 0 (barriers" in next(ln for ln in lines if "routes" in ln)
    assert [b["producer"] for b in c.plan.stats.as_dict()["barriers"]] == ["ln", "up"]


# --------------------------------------------------------------------------- mutations


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_aiv_that_skips_the_barrier_hangs_the_others(name):
    c = _compiled(name)
    k, i = next((k, i) for k, pos in reversed(_barrier_streams(c.program)) for i in pos
                if c.program.streams[k].instrs[i].kind == "set_cross")
    instrs = list(c.program.streams[k].instrs)
    del instrs[i]  # its mode-0 SET: every other AIV waits for it forever
    report = verify(_with(c.program, k, instrs), _hw(CASES[name][1]), jitter=0)
    dead = [f for f in report.findings if f.check == "deadlock"]
    assert dead and "mode 0" in report.text(), report.text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_consumer_that_passes_the_barrier_without_waiting_reads_too_early(name):
    # a consuming AIV drops its mode-0 WAIT, or both AIVs of a consuming AIC's cluster do
    # (their mode-2 SETs then tell the AIC that every AIV has stored; one AIV alone is not
    # enough: the AIC's AND wait still needs the other, which waits for everyone): the
    # consumer's loads race with other clusters' stores
    c = _compiled(name)
    hw = _hw(CASES[name][1])
    barrier = [f for f in c.plan.flags if f.reason == "barrier"]
    hops = [f.wait_core for f in barrier if f.route == "2"]
    if hops:
        victims = {min(hops) + 1, min(hops) + 2}
    else:
        victims = {min(f.wait_core for f in barrier if f.route == "0" and f.wait_side == "before")}
    program = c.program
    for k, pos in _barrier_streams(program):
        if program.streams[k].core in victims:
            instrs = [ins for j, ins in enumerate(program.streams[k].instrs)
                      if not (j in pos and ins.kind == "wait_cross")]
            program = _with(program, k, instrs)
    report = verify(program, hw, jitter=0)
    races = [f for f in report.findings if f.check == "race"]
    assert races, report.text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_barrier_on_another_free_id_everywhere_is_equivalent(name):
    # renumbering one barrier's id on every AIV to another id nothing uses: no false alarm
    c = _compiled(name)
    hw = _hw(CASES[name][1])
    used = {ins.event for st in c.program.streams for ins in st.instrs if ins.mode in ("0", "2")}
    spare = min(set(range(hw.sync.cross_core_ids_per_core)) - used)
    old = next(ins.event for st in c.program.streams for ins in st.instrs if ins.mode == "0")
    program = c.program
    for k, _ in _barrier_streams(program):
        instrs = [attrs.evolve(ins, event=spare) if ins.mode == "0" and ins.event == old else ins
                  for ins in program.streams[k].instrs]
        program = _with(program, k, instrs)
    report = verify(program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()
