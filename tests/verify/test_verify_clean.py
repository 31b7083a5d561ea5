"""Correct hand-built programs verify clean, in every mode and from files."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest
from common import ROOT

from benchmarks.samples import matmul_program, pingpong_program
from staticsched.errors import InputError, ProgramError
from staticsched.formats.program_json import dumps_program_json
from staticsched.formats.program_text import dumps_program_text
from staticsched.model.program import Program, Stream
from staticsched.verify import Report, verify


def timed(p: Program) -> Program:
    """The timed-mode form of a flags program: no flags, the nominal cycles as issue times."""
    streams = [Stream(s.core, s.unit, [i for i in s.instrs if not i.is_sync]) for s in p.streams]
    return attrs.evolve(p, mode="timed", streams=streams)


@pytest.mark.parametrize(("slots", "load", "makespan"), [(2, 60, 1060), (1, 60, 1600), (2, 120, 1300)])
def test_pingpong_replay_reproduces_the_seed_arithmetic(slots, load, makespan):
    # DESIGN §9: 10 tiles, compute 100. Two slots overlap load k+1 with compute k: the first load
    # (60) then ten computes back to back = 1060. One slot serialises: 10 * (60 + 100) = 1600.
    # Load 120 > compute with two slots: loads back to back (10 * 120) then the last compute.
    p = pingpong_program(slots=slots, load=load)
    assert p.makespan == makespan
    report = verify(p, "double-buffer-demo")
    assert report.ok, report.text()
    assert report.stat["replay_makespan"] == makespan


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"m": 80, "n": 48, "k": 96},  # tails in every dimension
        {"m": 64, "n": 96, "k": 64, "cores": 3},  # three independent cores writing one tensor
        {"m": 64, "n": 64, "k": 32, "cores": 4, "only_cores": [1, 2]},
    ],
)
def test_matmul_programs_verify_clean(kw):
    report = verify(matmul_program(**kw), "seed-davinci", jitter=3, seed=7)
    assert report.ok, report.text()
    assert report.stat["numeric"] == "not requested"


def test_timed_mode_program_verifies_clean():
    p = timed(matmul_program(m=64, n=64, k=96))
    report = verify(p, "seed-davinci")
    assert report.ok, report.text()
    assert report.stat["sets"] == 0


def test_text_and_json_files_verify_like_the_program(tmp_path):
    p = matmul_program(m=48, n=32, k=64)
    (tmp_path / "p.txt").write_text(dumps_program_text(p))
    (tmp_path / "p.json").write_text(dumps_program_json(p))
    direct = verify(p, "seed-davinci")
    for name in ("p.txt", "p.json"):
        from_file = verify(tmp_path / name, "seed-davinci")
        assert from_file.ok
        assert from_file.text() == direct.text()
    assert verify(str(tmp_path / "p.txt"), "seed-davinci").ok


def test_unparsable_program_file_is_a_program_error(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not a program\n")
    with pytest.raises(ProgramError):
        verify(bad, "seed-davinci")
    with pytest.raises(ProgramError):
        verify(tmp_path / "missing.json", "seed-davinci")


@pytest.mark.parametrize(
    "kw", [{"jitter": -1}, {"jitter": 1.5}, {"seed": -3}, {"tolerance": 0.0}, {"tolerance": float("nan")}]
)
def test_bad_arguments_are_input_errors(kw):
    with pytest.raises(InputError):
        verify(pingpong_program(), "double-buffer-demo", **kw)


def test_report_text_is_deterministic_and_readable():
    p = pingpong_program()
    a, b = verify(p, "double-buffer-demo", jitter=2), verify(p, "double-buffer-demo", jitter=2)
    assert a.text() == b.text()
    assert a.text().startswith("verify: OK")
    assert "timings" not in a.text()
    assert "timings" in a.text(timings=True)
    assert isinstance(a, Report)
    assert a.stat["replay_makespan"] == 1060


def test_verifier_does_not_import_the_solver_or_the_sync_planner():
    code = (
        "import sys\n"
        "from staticsched.verify import verify\n"
        "from benchmarks.samples import matmul_program\n"
        "assert verify(matmul_program(), 'seed-davinci', numeric=True, jitter=1).ok\n"
        "banned = ('staticsched.solver', 'staticsched.emit.sync')\n"
        "bad = sorted(m for m in sys.modules if m.startswith(banned))\n"
        "assert not bad, bad\n"
    )
    root = ROOT
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=root)


@pytest.mark.slow
def test_one_core_of_the_seed_gemm_verifies_clean():
    # 4096^3 with 128^3 tiles on 16 cores: core 0 gets 64 output tiles x 32 K-steps
    p = matmul_program("seed-davinci", 4096, 4096, 4096, base=(128, 128, 128), cores=16, only_cores=[0])
    report = verify(p, "seed-davinci", jitter=2)
    assert report.ok, report.text()
    assert report.stat["micro_ops"] == 64 * (32 * 5 + 2)
