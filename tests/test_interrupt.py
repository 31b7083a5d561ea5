"""Ctrl-C: the API raises KeyboardInterrupt after CP-SAT has run, the CLI exits 130 with one
line and leaves no output at any phase of a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from common import ROOT
from taskcases import mlp

import staticsched
from staticsched._workers import Mapped


@pytest.fixture(autouse=True)
def _sigint_handled():
    """Python's own SIGINT handler in this process, whatever started it: a shell runs a
    background job (``pytest &``) with SIGINT ignored at the OS level, where Python leaves it
    ignored (and the CLI subprocesses inherit that), which would fail every test here."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_sigint_after_a_cpsat_solve_raises_keyboard_interrupt():
    # CP-SAT installs its own SIGINT handler by default and leaves the process-level handler
    # at "terminate" afterwards: the signal below would then kill the test process
    # awkward_gemm's list schedule is above its bound, so CP-SAT searches (matmul_bias_gelu's
    # list schedule meets its bound, which proves it optimal before any search)
    sched = staticsched.schedule(ROOT / "examples" / "awkward_gemm.json", "seed-davinci",
                                 method="cpsat", time_limit=5)
    assert dict(sched.stats)["cpsat_makespan"] >= 0  # CP-SAT did run
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises at the next bytecode, well before this ends


#: set to make the next fork of this process send SIGINT to its main thread from inside an
#: at-fork callback (registered once: CPython has no way to remove one)
_SIGINT_AT_FORK: list[bool] = [False]


def _sigint_in_fork_callback() -> None:
    if _SIGINT_AT_FORK[0]:
        _SIGINT_AT_FORK[0] = False
        # to the main thread itself: a process-wide signal may go to another thread (xdist's)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


os.register_at_fork(before=_sigint_in_fork_callback)


def test_sigint_while_forking_workers_raises_keyboard_interrupt():
    # a Ctrl-C that lands while the process forks (here: in an at-fork callback, Python code
    # that CPython runs and whose exceptions it prints and drops) must still interrupt: it was
    # lost, and the CLI ran to the end (why the [solve] case below failed now and then)
    _SIGINT_AT_FORK[0] = True
    try:
        with pytest.raises(KeyboardInterrupt):
            Mapped(abs, [-1, -2], 1).get()
    finally:
        _SIGINT_AT_FORK[0] = False
    assert Mapped(abs, [-1, -2], 1).get() == [1, 2]  # and forking works as before


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_until(tmp_path: Path, args: list[str], marker: str) -> tuple[int, str]:
    """Start the CLI, send SIGINT once ``marker`` appears on stderr, return (code, stderr)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # the CLI starts with SIGINT at its default action even when this process was started
    # with it ignored (see _sigint_handled)
    proc = subprocess.Popen([sys.executable, "-m", "staticsched", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            restore_signals=True, preexec_fn=_default_sigint)
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if marker in line:
            time.sleep(0.3)  # well inside the phase, not at its first instruction
            proc.send_signal(signal.SIGINT)
            break
    try:
        rest = proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        rest = proc.communicate()[1]
        pytest.fail(f"the CLI did not stop within 60 s of SIGINT at {marker!r}; its stderr:\n"
                    + "".join(lines) + rest)
    return proc.returncode, "".join(lines) + rest


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory) -> Path:
    # 11k ops on 16 cores: long enough in every phase that the signal lands inside it
    path = tmp_path_factory.mktemp("mlp") / "mlp.json"
    path.write_text(json.dumps(mlp(512, 1024, 4096)))
    return path


@pytest.mark.parametrize(
    ("marker", "extra"),
    [
        ("[lower] ...", ["--method", "list"]),
        ("[solve] ...", ["--method", "cpsat", "--time-limit", "60"]),
        ("[plan sync] ...", ["--method", "list"]),
        ("[verify] ...", ["--method", "list"]),
    ],
)
def test_cli_exits_130_and_writes_nothing_when_interrupted(tmp_path, mlp_file, marker, extra):
    out = tmp_path / "out"
    code, err = _run_until(tmp_path, ["schedule", str(mlp_file), "--hw", "seed-davinci",
                                      "-o", str(out), *extra], marker)
    # every message carries the CLI's stderr: a failure here has been rare and load-dependent
    assert code == 130, err
    assert err.rstrip().splitlines()[-1] == "staticsched: interrupted", err
    assert "Traceback" not in err, err
    assert not out.exists(), err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial")], err
