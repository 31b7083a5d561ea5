"""No freshly emitted program gets a finding: the examples, and programs of the Hypothesis strategies
at scale (issue 10 acceptance: >= 10,000 generated programs under the ``thorough`` profile).

The scale run is marked slow::

    HYPOTHESIS_PROFILE=thorough python -m pytest -q -m slow tests/emit/test_fresh_programs.py

It counts the programs it verified and prints the count in the run's "property statistics".
"""

from __future__ import annotations

from collections import Counter

import pytest
from common import EXAMPLES, examples
from example_sets import LARGE, WHOLE_CHIP, hw_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import hardware_models, opgraphs, seed_hw, taskgraphs

from staticsched.api import compile_graph
from staticsched.emit import dumps_program_text, parse_program_text
from staticsched.verify import verify

EXAMPLES = sorted(EXAMPLES.glob("*.json"))


def _clean(program, hw, *, numeric: bool, jitter_seed: int) -> None:
    # the verifier sees the emitted text; timed programs are only correct at exact durations,
    # so jitter is for flag programs
    program = parse_program_text(dumps_program_text(program))
    jitter = 2 if program.mode == "flags" else 0
    report = verify(program, hw, jitter=jitter, seed=jitter_seed, numeric=numeric)
    assert report.ok, report.text()




@pytest.mark.parametrize("mode", ["flags", "timed"])
@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.slow) if p.stem in LARGE else p
        for p in EXAMPLES
        if p.stem not in WHOLE_CHIP
    ],
    ids=lambda p: p.stem,
)
def test_emitted_examples_are_clean(path, mode):
    hw = hw_for(path.stem)
    program = compile_graph(path, hw, method="list", mode=mode).program
    _clean(program, seed_hw() if hw == "seed-davinci" else hw, numeric=bool(program.source), jitter_seed=0)


@pytest.mark.slow
def test_generated_programs_are_clean_at_scale(record_stat):
    counts: Counter = Counter()

    @settings(
        max_examples=examples(200),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(data=st.data())
    def prop(data):
        mode = data.draw(st.sampled_from(["flags", "timed"]), label="mode")
        seed = data.draw(st.integers(0, 999), label="seed")
        if data.draw(st.integers(0, 3), label="graph kind") == 0:
            graph, hw = data.draw(taskgraphs(), label="taskgraph"), seed_hw()
            what = "taskgraph"
        else:
            hw = data.draw(hardware_models(), label="hw")
            graph = data.draw(opgraphs(hw), label="graph")
            what = "opgraph"
        method = data.draw(st.sampled_from(["list"] * 9 + ["cpsat"]), label="method")
        program = compile_graph(graph, hw, method=method, mode=mode, time_limit=10.0).program
        _clean(program, hw, numeric=what == "taskgraph", jitter_seed=seed)
        counts[f"{what} {mode}"] += 1

    prop()
    total = sum(counts.values())
    record_stat(
        f"freshly emitted programs verified clean: {total} ("
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + ")"
    )
