"""Where the schedules of a sweep or a tuning run execute: this process, local worker
processes, or Ray tasks on a cluster, behind one interface.

:func:`executor` opens a backend for the length of a ``with`` block and gives a function
``run(fn, items, done)`` that evaluates ``fn(item)`` for every item and calls ``done`` with
each result as it arrives (in completion order). ``fn`` and the items must be picklable
(a module-level function; attrs objects). Worker processes and Ray stay up between calls,
so a caller may run several batches without paying the start-up each time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from staticsched.errors import InputError

Run = Callable[[Callable[[Any], Any], Sequence[Any], Callable[[Any], None]], None]


def _serial(fn: Callable[[Any], Any], items: Sequence[Any], done: Callable[[Any], None]) -> None:
    for item in items:
        done(fn(item))


@contextmanager
def executor(jobs: int = 1, ray_address: str | None = None) -> Iterator[Run]:
    """A backend for the ``with`` block.

    Parameters
    ----------
    jobs
        Local worker processes (1: evaluate in this process). With Ray, the CPUs of the local
        instance ``auto`` starts when no cluster is running.
    ray_address
        None for local execution; ``"auto"`` joins the running Ray cluster (or starts a local
        instance of ``jobs`` CPUs), or a cluster address (``ray://host:10001``). Each item is
        one Ray task with one CPU.

    Raises
    ------
    InputError
        When Ray is asked for but not installed.
    """
    if ray_address is not None:
        with _ray(ray_address, jobs) as run:
            yield run
    elif jobs <= 1:
        yield _serial
    else:
        with _pool(jobs) as run:
            yield run


@contextmanager
def _pool(jobs: int) -> Iterator[Run]:
    import concurrent.futures
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)

    def run(fn: Callable[[Any], Any], items: Sequence[Any], done: Callable[[Any], None]) -> None:
        if len(items) <= 1:
            _serial(fn, items, done)  # no round trip through a worker for a single item
            return
        futures = [pool.submit(fn, item) for item in items]
        for fut in concurrent.futures.as_completed(futures):
            done(fut.result())

    try:
        yield run
    finally:
        # after Ctrl-C: drop what has not started, do not wait for what runs (it is lost)
        pool.shutdown(wait=False, cancel_futures=True)


@contextmanager
def _ray(address: str, jobs: int) -> Iterator[Run]:
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'staticsched[ray]'") from None
    started = False
    if not ray.is_initialized():
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
        if address == "auto":
            try:
                ray.init(address="auto", **quiet)
            except ConnectionError:
                ray.init(num_cpus=max(1, jobs), include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
        started = True
    tasks: dict[Callable[[Any], Any], Any] = {}

    def run(fn: Callable[[Any], Any], items: Sequence[Any], done: Callable[[Any], None]) -> None:
        task = tasks.get(fn)
        if task is None:
            task = tasks[fn] = ray.remote(num_cpus=1)(fn)
        pending = [task.remote(item) for item in items]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                done(ray.get(ref))

    try:
        yield run
    finally:
        if started:
            ray.shutdown()
