"""Forked worker processes for work that can run beside the main pass: the verifier's side
checks and jittered replays, the output files rendered side by side.

A chip's index holds ~10^6 instructions: pickling it to a worker would cost more than the
check. A forked worker sees it as it is. :class:`Mapped` runs ``fn(item)`` for each item in
worker processes when given any (:func:`default_processes`: for programs of at least
:data:`PARALLEL_MIN_INSTRUCTIONS` instructions), and in this process when the result is asked
for otherwise; ``fn`` is the same either way, so results never depend on it.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

#: programs with fewer instructions run their side work in this process: a worker costs more
#: to start than such a check
PARALLEL_MIN_INSTRUCTIONS = 50_000

#: the function forked workers call and its items (set only while the pool starts, inherited by
#: fork: only item numbers go through the pool's pipe, an item may be the whole index)
_JOB: tuple[Callable[[Any], Any], list[Any]] | None = None


def _call(k: int) -> Any:
    assert _JOB is not None
    fn, items = _JOB
    return fn(items[k])


def _set_mask(mask: Any) -> None:
    """A worker's first act: the signal mask its parent had before it held SIGINT to fork."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_processes(instructions: int, tasks: int) -> int:
    """Workers worth starting for ``tasks`` tasks on a program of ``instructions``: one fewer
    than the CPUs (the main process has its own work), none for a small program."""
    if instructions < PARALLEL_MIN_INSTRUCTIONS or not tasks:
        return 0
    return min(max(1, cpus() - 1), tasks)


class Mapped:
    """``fn`` over ``items``, under way in worker processes or still to run in this one."""

    def __init__(self, fn: Callable[[Any], Any], items: Sequence[Any], processes: int) -> None:
        global _JOB
        self.fn, self.items = fn, list(items)
        self.pool: Any = None
        self.result: Any = None
        processes = min(processes, len(self.items))
        if processes < 1 or "fork" not in mp.get_all_start_methods():
            return
        # frozen objects are left alone by the workers' cycle collector, so their pages stay shared
        _JOB = (fn, self.items)
        gc.freeze()
        # a Ctrl-C while this process forks would be raised in an at-fork callback (Python
        # code: logging's lock release among them), where CPython prints a KeyboardInterrupt
        # and drops it, and the run went on. SIGINT waits blocked in this thread until the
        # workers exist and arrives as usual then; the workers start with the mask restored
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                self.pool = mp.get_context("fork").Pool(processes, initializer=_set_mask, initargs=(mask,))
            finally:
                _JOB = None
                gc.unfreeze()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a held Ctrl-C arrives here
            self.result = self.pool.map_async(_call, range(len(self.items)), chunksize=1)
        except BaseException:
            self.close()
            raise

    def get(self) -> list[Any]:
        """The results in item order (runs them here when no worker does)."""
        if self.result is None:
            return [self.fn(x) for x in self.items]
        try:
            return self.result.get()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
