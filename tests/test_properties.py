"""End-to-end properties: for generated inputs, schedule -> emit -> verify is clean, the nominal
replay equals the timetable, jittered replays are clean, numbers match NumPy, output is
deterministic, and a mutated program is always reported."""

from __future__ import annotations

import json

import pytest
from common import examples
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from mutations import (
    DATAFLOW_MUTATIONS,
    PROGRAM_MUTATIONS,
    NoCandidate,
    equivalent,
    restate,
    reuse_is_legal,
    same_reads,
    shrink_capacity,
)
from strategies import hardware_models, opgraphs, seed_hw, taskgraphs

from staticsched.api import compile_graph
from staticsched.emit import dumps_program_text, dumps_timetable_json, parse_program_text
from staticsched.solver import solve
from staticsched.tasks import KINDS
from staticsched.verify import verify


def _compile(graph, hw, method, **kw):
    return compile_graph(graph, hw, method=method, time_limit=30.0, **kw)


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data())
def test_opgraph_schedules_verify_clean(data):
    hw = data.draw(hardware_models(), label="hw")
    graph = data.draw(opgraphs(hw), label="graph")
    method = data.draw(st.sampled_from(["list", "cpsat"]), label="method")
    res = _compile(graph, hw, method)
    assert res.schedule.verify() == ()
    # the verifier sees only the program text and the hardware
    program = parse_program_text(dumps_program_text(res.program))
    report = verify(program, hw, jitter=3, seed=data.draw(st.integers(0, 99), label="seed"))
    note(report.text())
    assert report.ok
    assert report.stat["replay_makespan"] == res.schedule.makespan


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_bounds_order(data):
    hw = data.draw(hardware_models(), label="hw")
    graph = data.draw(opgraphs(hw), label="graph")
    # the same limit as the search: a stuck list schedule's CP-SAT rescue spends a share of it
    # under both methods (solver/rescue.py)
    lst = solve(graph, hw, method="list", time_limit=30.0)
    cp = solve(graph, hw, method="cpsat", time_limit=30.0)
    assert cp.lower_bound <= cp.makespan <= lst.makespan
    assert lst.lower_bound <= lst.makespan


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=examples(6), deadline=None)
@given(data=st.data())
def test_taskgraph_numeric_replay_matches(kind, data):
    """Every registered task kind, first in the graph (then chained tasks of any kind)."""
    tg = data.draw(taskgraphs(first=kind), label="graph")
    hw = seed_hw()
    res = _compile(tg, hw, "list")
    report = verify(res.program, hw, jitter=2, numeric=True)
    note(report.text())
    assert report.ok
    assert report.stat["replay_makespan"] == res.schedule.makespan


@settings(max_examples=examples(10), deadline=None)
@given(data=st.data())
def test_deterministic_output(data):
    hw = data.draw(hardware_models(), label="hw")
    graph = data.draw(opgraphs(hw), label="graph")
    method = data.draw(st.sampled_from(["list", "cpsat"]), label="method")
    a = _compile(graph, hw, method)
    b = _compile(graph, hw, method)
    assert dumps_program_text(a.program) == dumps_program_text(b.program)
    assert dumps_timetable_json(a.schedule, a.plan) == dumps_timetable_json(b.schedule, b.plan)


#: what each mutation must be reported as on a generated program, as sets of acceptable
#: (check, kind) pairs, kind "" for any kind of the check
PROPERTY_EXPECTED: dict[str, set[tuple[str, str]]] = {
    # the n-th wait consumes the n-th set: a deleted wait, or a wait or set moved to another id,
    # always leaves a key with more sets than waits
    "delete_wait": {("flag", "unpaired_set")},
    "change_event_id": {("flag", "unpaired_set")},
    "delete_set": {("flag", "unpaired_wait")},
    # the planner keeps only needed flags, so the op right after a kept WAIT loses a data
    # dependency's ordering when hoisted above it
    "hoist_above_wait": {("race", "")},
    # the op after the WAIT loses its ordering (a race) unless what it needed came from the op
    # it swaps with, on the same pipe: then it reads before that write, in the same order; or
    # the two ops touch different items at one L1 address, still in one pipe's order: then one
    # item is overwritten while still live, which the restated live ranges show as an overlap
    "swap_ops": {
        ("race", ""),
        ("memory", "uninitialized_read"),
        ("dataflow", "read_before_write"),
        ("dataflow", "wrong_write"),
        ("memory", "item_overlap"),
    },
    "overlap_items": {("memory", "item_overlap")},
    "reuse_id_early": {("flag", "reuse_rule")},
    "reverse_cross_pair": {("dataflow", "read_before_write")},
    "load_before_store": {("dataflow", "read_before_write")},
}


def _expected_found(report, expected: set[tuple[str, str]]) -> bool:
    return any(f.check == c and (not k or f.kind == k) for f in report.findings for c, k in expected)


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_mutations_are_always_reported(data):
    hw = data.draw(hardware_models(), label="hw")
    # explicit deps of opaque ops are not data, and an op touching nothing can move freely:
    # reordering those is not a bug any program-level check could (or should) show
    graph = data.draw(opgraphs(hw, deps=False, touch=True), label="graph")
    res = _compile(graph, hw, "list")
    mutations = {name: fn for name, (fn, _) in PROGRAM_MUTATIONS.items()}
    mutations |= {name: fn for name, (fn, _, modes) in DATAFLOW_MUTATIONS.items() if "flags" in modes}
    names = sorted(set(mutations) & set(PROPERTY_EXPECTED))
    start = data.draw(st.integers(0, len(names) - 1), label="mutation")
    seed = data.draw(st.integers(0, 999), label="mutation seed")
    for name in names[start:] + names[:start]:
        try:
            mutant = mutations[name](res.program, seed=seed)
        except NoCandidate:
            continue
        break
    else:
        assume(False)  # nothing to mutate (e.g. one op and no flags)
    note(f"mutation {name}")
    if name == "reuse_id_early" and reuse_is_legal(res.program, mutant):
        return  # the earlier WAIT already happens-before the SET: reusing its id is correct
    # restated cycles: conformance alone cannot catch the mutant
    report = verify(restate(mutant, hw), hw)
    note(report.text())
    if name in ("swap_ops", "hoist_above_wait") and (
        equivalent(res.program, mutant) or same_reads(res.program, mutant)
    ):
        # a reordering that keeps every conflicting pair of accesses ordered the same way, or
        # that every read still sees the same write (two writes of data nothing reads in
        # between), is the same program: there is nothing to report
        assert report.ok, report.text()
        return
    assert _expected_found(report, PROPERTY_EXPECTED[name]), (name, sorted(report.kinds()))


@settings(max_examples=examples(8), deadline=None)
@given(
    tg=taskgraphs(),
    mode=st.sampled_from(["flags", "timed"]),
    pick=st.integers(0, 99),
    seed=st.integers(0, 999),
)
def test_dataflow_and_cost_mutations_are_reported_on_taskgraph_programs(tg, mode, pick, seed):
    hw = seed_hw()
    program = _compile(tg, hw, "list", mode=mode).program
    names = sorted(n for n, (_, _, modes) in DATAFLOW_MUTATIONS.items() if mode in modes)
    for name in names[pick % len(names) :] + names[: pick % len(names)]:
        fn, expected, _ = DATAFLOW_MUTATIONS[name]
        try:
            mutant = restate(fn(program, seed=seed), hw)
        except NoCandidate:
            continue
        break
    else:
        raise AssertionError("every generated TaskGraph program has kinded ops to mutate")
    note(f"mutation {name}")
    report = verify(mutant, hw)
    note(report.text())
    assert expected in report.kinds(), (name, sorted(report.kinds()))


@pytest.mark.parametrize("example", ["double_buffer.json", "matmul_bias_gelu.json", "chain.json"])
def test_shrunk_capacity_is_reported(example):
    hw = "double-buffer-demo" if example == "double_buffer.json" else "seed-davinci"
    res = _compile(f"examples/{example}", hw, "list")
    from staticsched.model.hardware_toml import load_hardware

    small = shrink_capacity(load_hardware(hw), res.program)
    report = verify(res.program, small)
    assert not report.ok
    assert "out_of_bounds" in {f.kind for f in report.findings}


def test_timetable_json_is_json():
    res = _compile("examples/double_buffer.json", "double-buffer-demo", "list")
    doc = json.loads(dumps_timetable_json(res.schedule, res.plan))
    assert doc["format"] == "staticsched.timetable"
