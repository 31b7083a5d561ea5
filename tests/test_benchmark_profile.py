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
