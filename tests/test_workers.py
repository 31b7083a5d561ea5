"""Forked workers and this process sharing a map's items (staticsched._workers.Mapped)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from staticsched._workers import Mapped

#: how long a test waits for a worker to get somewhere before it fails (a bound against a
#: hang, not a timing assertion: a started worker gets there in milliseconds)
PATIENCE = 120.0


def wait_until(cond) -> None:
    deadline = time.monotonic() + PATIENCE
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"a worker did not get there in {PATIENCE} s")
        time.sleep(0.01)


def _mark(folder: Path, k: int) -> tuple[int, int]:
    # O_EXCL: a second run of the same item, in any process, fails here
    fd = os.open(folder / f"{k}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.close(fd)
    return k * k, os.getpid()


def test_every_item_runs_once_and_the_results_come_in_item_order(tmp_path):
    items = list(range(40))
    got = Mapped(lambda k: _mark(tmp_path, k), items, 1).get()
    assert [r for r, _ in got] == [k * k for k in items]
    assert sorted(int(p.name) for p in tmp_path.iterdir()) == items


def test_this_process_takes_the_items_left_when_it_asks(tmp_path):
    # the worker blocks on its first item until this process has run every other one, so
    # both ran items (no timing decides it: the worker cannot go on before the file exists)
    gate = tmp_path / "gate"

    def fn(k: int) -> int:
        if os.getpid() != here:
            wait_until(gate.exists)
        return os.getpid()

    here = os.getpid()
    m = Mapped(fn, range(6), 1)
    # the worker's first item taken before this process asks: wait until it is
    wait_until(lambda: m.taken.value > 0)
    orig = m.fn
    m.fn = lambda k: orig(k) if k < 5 else (gate.touch(), orig(k))[1]
    pids = m.get()
    assert pids.count(here) == 5
    assert len(set(pids)) == 2


def test_a_failing_item_fails_the_map_wherever_it_ran():
    def fn(k: int) -> int:
        if k == 3:
            raise ValueError(f"item {k}")
        return k

    with pytest.raises(ValueError, match="item 3"):
        Mapped(fn, range(8), 1).get()
    with pytest.raises(ValueError, match="item 3"):
        Mapped(fn, range(8), 0).get()
