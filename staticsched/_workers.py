"""Forked worker processes for work that can run beside the main pass: the verifier's side
checks and jittered replays, the output files rendered side by side.

A chip's index holds ~10^6 instructions: pickling it to a worker would cost more than the
check. A forked worker sees it as it is. :class:`Mapped` runs ``fn(item)`` for each item in
worker processes when given any (:func:`default_processes`: for programs of at least
:data:`PARALLEL_MIN_INSTRUCTIONS` instructions), and in this process when the result is asked
for otherwise; ``fn`` is the same either way, so results never depend on it.

The workers and this process share the items: each takes the next one not yet taken, this
process from the moment its result is asked for (:meth:`Mapped.get`), until none is left. A
process waiting for its workers would sit idle, and an item run here costs neither the pages a
worker copies on writing to the parent's objects (reference counts: ~1.2-1.8x an item's time
on a million-op program) nor the pickling of its result.
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

#: the function forked workers call, its items and the shared count of items taken (set only
#: while the pool starts, inherited by fork: nothing but results goes through the pool's pipe,
#: an item may be the whole index)
_JOB: tuple[Callable[[Any], Any], list[Any], Any] | None = None


def _take(fn: Callable[[Any], Any], items: Sequence[Any], taken: Any) -> list[tuple[int, Any]]:
    """Run the items no other process has taken yet, one at a time: ``(index, result)`` each."""
    out = []
    while True:
        with taken.get_lock():
            k = taken.value
            if k >= len(items):
                return out
            taken.value = k + 1
        out.append((k, fn(items[k])))


def _drain(_: int) -> list[tuple[int, Any]]:
    assert _JOB is not None
    return _take(*_JOB)


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
    """``fn`` over ``items``, under way in ``processes`` worker processes and, once its result
    is asked for, in this one too (the items shared, see the module docstring): a caller that
    asks at once gives one worker fewer than it has CPUs."""

    def __init__(self, fn: Callable[[Any], Any], items: Sequence[Any], processes: int) -> None:
        global _JOB
        self.fn, self.items = fn, list(items)
        self.pool: Any = None
        self.result: Any = None
        self.taken: Any = None
        processes = min(processes, len(self.items))
        if processes < 1 or "fork" not in mp.get_all_start_methods():
            return
        ctx = mp.get_context("fork")
        self.taken = ctx.Value("l", 0)
        # frozen objects are left alone by the workers' cycle collector, so their pages stay shared
        _JOB = (fn, self.items, self.taken)
        gc.freeze()
        # a Ctrl-C while this process forks would be raised in an at-fork callback (Python
        # code: logging's lock release among them), where CPython prints a KeyboardInterrupt
        # and drops it, and the run went on. SIGINT waits blocked in this thread until the
        # workers exist and arrives as usual then; the workers start with the mask restored
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                self.pool = ctx.Pool(processes, initializer=_set_mask, initargs=(mask,))
            finally:
                _JOB = None
                gc.unfreeze()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a held Ctrl-C arrives here
            self.result = self.pool.map_async(_drain, range(processes), chunksize=1)
        except BaseException:
            self.close()
            raise

    def get(self) -> list[Any]:
        """The results in item order (runs here the items no worker has taken yet)."""
        if self.result is None:
            return [self.fn(x) for x in self.items]
        try:
            done = dict(_take(self.fn, self.items, self.taken))
            for part in self.result.get():
                done.update(part)
        finally:
            self.close()
        return [done[k] for k in range(len(self.items))]

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
