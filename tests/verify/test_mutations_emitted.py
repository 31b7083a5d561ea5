"""Every verifier mutation, applied to real emitted example programs, is caught with the right
finding; the unmutated programs report nothing (issue 5, acceptance 2; issue 10)."""

from __future__ import annotations

import functools
import json

import attrs
import pytest
from common import preset
from mutations import (
    DATAFLOW_MUTATIONS,
    MLP,
    PROGRAM_MUTATIONS,
    NoCandidate,
    recost,
    restate,
    shrink_capacity,
)

from staticsched.api import compile_graph
from staticsched.emit import dumps_program_text, parse_program_text
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import load_taskgraph, taskgraph_from_dict
from staticsched.model.hardware_toml import load_hardware
from staticsched.verify import verify

EXAMPLES = {
    "double_buffer": ("examples/double_buffer.json", "double-buffer-demo"),
    "matmul_bias_gelu": ("examples/matmul_bias_gelu.json", "seed-davinci"),
    "chain": ("examples/chain.json", "seed-davinci"),
    "gemv_m1": ("examples/gemv_m1.json", "seed-davinci"),
}


@functools.cache
def _program(name: str):
    path, hw = EXAMPLES[name]
    res = compile_graph(path, hw, method="list")
    # what the verifier gets is the emitted text, parsed back
    return parse_program_text(dumps_program_text(res.program)), load_hardware(hw)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_unmutated_examples_are_clean(name):
    program, hw = _program(name)
    report = verify(program, hw, jitter=3)
    assert report.ok, report.text()


@pytest.mark.parametrize("mutation", sorted(PROGRAM_MUTATIONS))
def test_mutation_caught_on_three_examples(mutation):
    fn, (check, kind) = PROGRAM_MUTATIONS[mutation]
    caught = []
    for name in sorted(EXAMPLES):
        program, hw = _program(name)
        try:
            mutant = fn(program, seed=1)
        except NoCandidate:
            continue
        report = verify(mutant, hw)
        found = {(f.check, f.kind) for f in report.findings}
        assert not report.ok, f"{mutation} on {name} not caught"
        assert any(c == check and (not kind or k == kind) for c, k in found), (
            f"{mutation} on {name}: expected {check}/{kind or '*'}, got {sorted(found)}"
        )
        caught.append(name)
    assert len(caught) >= 3, f"{mutation} applied to only {caught}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_shrunk_capacity_caught(name):
    program, hw = _program(name)
    report = verify(program, shrink_capacity(hw, program))
    assert ("memory", "out_of_bounds") in {(f.check, f.kind) for f in report.findings}


# --------------------------------------------------------------------------- issue 10



def _graph(name: str):
    """The graphs of the issue-10 programs; ``*_opgraph`` is lowered with its source dropped, so
    the program has no numeric replay at all."""
    if name.startswith("mlp"):
        tg = taskgraph_from_dict(json.loads(json.dumps(MLP)))
    else:
        tg = load_taskgraph(EXAMPLES[name.removesuffix("_opgraph")][0])
    if name.endswith("_opgraph"):
        return attrs.evolve(lower(tg, preset("seed-davinci")), source="")
    return tg


GRAPHS10 = ("chain", "chain_opgraph", "mlp", "mlp_opgraph", "matmul_bias_gelu", "gemv_m1")


@functools.cache
def _program10(name: str, mode: str):
    res = compile_graph(_graph(name), "seed-davinci", method="list", mode=mode)
    return parse_program_text(dumps_program_text(res.program))


@pytest.mark.parametrize("mode", ["flags", "timed"])
@pytest.mark.parametrize("name", GRAPHS10)
def test_issue10_programs_are_clean(name, mode):
    program = _program10(name, mode)
    assert not program.source if name.endswith("_opgraph") else program.source
    report = verify(program, "seed-davinci", numeric=bool(program.source))
    assert report.ok, report.text()


@pytest.mark.parametrize(
    ("mutation", "mode"),
    [(m, mode) for m, (_, _, modes) in sorted(DATAFLOW_MUTATIONS.items()) for mode in modes],
)
def test_dataflow_and_cost_mutations_caught_with_their_check(mutation, mode):
    # cycles are restated from the mutant's own replay, so conformance alone cannot catch it
    fn, expected, _ = DATAFLOW_MUTATIONS[mutation]
    caught = []
    for name in GRAPHS10:
        program = _program10(name, mode)
        try:
            mutant = restate(fn(program, seed=1))
        except NoCandidate:
            continue
        report = verify(mutant, "seed-davinci")
        assert expected in report.kinds(), f"{mutation} on {name} ({mode}): {sorted(report.kinds())}"
        caught.append(name)
    assert len(caught) >= 3, f"{mutation} ({mode}) applied to only {caught}"
    assert any(n.endswith("_opgraph") for n in caught), caught


@pytest.mark.parametrize("mutation", ["mmad_extent", "vec_extent", "transfer_extent"])
def test_extent_mutants_with_consistent_costs_fail_the_numbers(mutation):
    # an adversary who also rewrites the duration from the cost model leaves only the data:
    # the replay must execute the mutated extent, not the tile's shape
    fn, _, _ = DATAFLOW_MUTATIONS[mutation]
    for name in ("chain", "mlp", "matmul_bias_gelu"):
        program = _program10(name, "flags")
        mutant = restate(recost(fn(program, seed=1)))
        report = verify(mutant, "seed-davinci", numeric=True)
        assert not report.by_check("cost"), report.text()
        assert ("numeric", "mismatch") in report.kinds(), f"{name}: {report.text()}"
