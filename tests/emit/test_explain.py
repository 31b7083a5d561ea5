"""The gap explanation (``staticsched schedule --explain``): the critical path of the program's
replay is a chain whose ops and waits add up to the makespan exactly, each wait has a cause
from the table, and idle time is the makespan less each pipe's busy time."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
from common import EXAMPLES, ROOT

import staticsched
from staticsched.emit.explain import CAUSES


def _chain_holds(ex, makespan: int) -> None:
    path = ex.path
    assert path, "no critical path"
    assert path[-1].end == makespan
    for before, step in itertools.pairwise(path):
        # each op starts when the one before it on the path ends, plus the wait between them
        assert step.start == before.end + step.wait, (before, step)
        assert step.cause in CAUSES or (step.cause == "" and step.wait == 0), step
    busy, waits = sum(ex.busy().values()), sum(ex.waits().values())
    assert busy + waits == makespan - path[0].start


def test_double_buffer_path_is_the_first_load_then_the_cube():
    # the seed's instance: 10 tiles, loads of 60 and computes of 100 in two slots: 1060 cycles,
    # the first load then every compute back to back (DESIGN §9's micro-instance)
    res = staticsched.compile_graph(EXAMPLES / "double_buffer.json", "double-buffer-demo", time_limit=5)
    ex = res.explain()
    assert res.schedule.makespan == 1060
    _chain_holds(ex, 1060)
    assert [s.unit for s in ex.path] == ["DMA"] + ["CUBE"] * 10
    assert ex.busy() == {"CUBE": 1000, "DMA": 60}
    assert ex.waits() == {}
    assert ex.path[0].start == 0
    (name, cores, pipes), = ex.idle
    assert (name, cores) == ("core", 1)
    assert dict((u, mean) for u, _, mean, _ in pipes) == {"DMA": 1060 - 600, "CUBE": 60}


def test_a_split_chip_path_crosses_cores_with_attributed_waits():
    res = staticsched.compile_graph(EXAMPLES / "chain.json", "ascend-a2", method="list")
    ex = res.explain()
    _chain_holds(ex, res.schedule.makespan)
    cores = {s.core for s in ex.path}
    assert len(cores) > 1
    # a wait between cores is never free: 200 cycles of a mode-2 flag at least
    crossings = [s for before, s in itertools.pairwise(ex.path) if s.core != before.core]
    assert crossings and all(s.wait >= 200 and s.cause in CAUSES for s in crossings)
    # both core types are accounted, every pipe of each
    assert {name for name, _, _ in ex.idle} == {"AIC", "AIV"}
    lines = ex.lines(full=True)
    assert lines[0].startswith("gap          : makespan ")
    assert any(line.startswith("  idle AIC x") for line in lines)
    # the table has one row per op of the path
    table = lines.index(next(line for line in lines if line.strip().startswith("start")))
    assert len(lines) - table - 1 == len(ex.path)


def test_tasks_on_the_path_are_named():
    res = staticsched.compile_graph(EXAMPLES / "chain.json", "seed-davinci", method="list")
    ex = res.explain()
    spans = ex.task_spans()
    assert spans and all(task for task, *_ in spans)
    assert spans[-1][2] == res.schedule.makespan


@pytest.mark.parametrize("flag", [[], ["--explain"]])
def test_cli_prints_the_gap_section_last(tmp_path, flag):
    done = subprocess.run(
        [sys.executable, "-m", "staticsched", "schedule", str(EXAMPLES / "matmul_bias_gelu.json"),
         "--hw", "seed-davinci", "-o", str(tmp_path / "out"), "--quiet", "--method", "list", *flag],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    gap = next(i for i, line in enumerate(out) if line.startswith("gap          :"))
    assert gap > next(i for i, line in enumerate(out) if line.startswith("phases"))
    has_table = any(line.strip().startswith("start") and "cause" in line for line in out[gap:])
    assert has_table == bool(flag)
