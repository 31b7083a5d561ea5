"""The phase profiler (benchmarks/profile_phases.py) stays in step with the CLI it wraps: it
replaces ``Progress.phase``, so a new argument there broke it once without a failing test."""

from __future__ import annotations

from common import EXAMPLES

from benchmarks import profile_phases


def test_profile_phases_profiles_every_phase_of_a_schedule_run(capsys):
    code = profile_phases.main([str(EXAMPLES / "matmul_bias_gelu.json"), "--hw", "seed-davinci",
                                "--top", "1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = [line.split("|")[1].strip() for line in out.out.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["lower", "solve", "plan sync", "build program", "verify", "write"]


def test_object_budget_remakes_every_value_type_of_a_run(capsys):
    from benchmarks import object_budget

    code = object_budget.main([str(EXAMPLES / "matmul_bias_gelu.json"), "--repeat", "1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    counts = {cells[1]: cells[3] for cells in (line.split("|") for line in out.out.splitlines())
              if len(cells) > 4 and cells[3].strip().replace(",", "").isdigit()}
    types = [name.strip() for name in counts]
    assert types == ["Op", "Item", "Edge", "ScheduledOp", "Placement", "Flag", "SyncEvent", "Instr",
                     "ProgItem", "**all**"]
    # 90 micro-ops (examples/matmul_bias_gelu.json): one Op and one timetable row each
    assert int(counts[" Op "]) == int(counts[" ScheduledOp "]) == 90
