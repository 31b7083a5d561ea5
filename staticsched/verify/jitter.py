"""Jitter: replays with seeded random durations (0.5x-3x of nominal) must stay clean.

In flags mode happens-before does not depend on timing, so races cannot appear
here; what timing can break is a flag reused too early (a *double set*), and
with numeric replay the data must come out bit-identical. A timed-mode program
has no flags: its order *is* its timing, so a jittered replay is checked for
races again with the jittered cycles (and normally fails: timed mode is only
correct when every duration is exact).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from staticsched.verify import numeric
from staticsched.verify.dataflow import dataflow_findings
from staticsched.verify.flags import double_set_findings
from staticsched.verify.hb import race_findings, timed_pass
from staticsched.verify.index import OP, ProgramIndex
from staticsched.verify.replay import Replay, simulate
from staticsched.verify.report import Finding

LOW, HIGH = 0.5, 3.0


def jitter_durations(ix: ProgramIndex, rng: np.random.Generator) -> list[int]:
    """One factor in ``[LOW, HIGH)`` per instruction (drawn for all, so the stream of random
    numbers does not depend on which instructions are micro-ops); sync stays 0 cycles."""
    factors = rng.uniform(LOW, HIGH, size=ix.n)
    base = np.asarray(ix.dur, dtype=np.float64)
    scaled = np.maximum(1, np.rint(base * factors)).astype(np.int64).tolist()
    return [scaled[g] if ix.role[g] == OP else 0 for g in range(ix.n)]


#: programs with fewer instructions replay their jitter in this process: a worker process
#: costs more to start than such a replay
PARALLEL_MIN_INSTRUCTIONS = 50_000

#: what forked workers inherit: (index, durations per replay, seed, count, data)
_JOB: tuple | None = None


def _replay(r: int) -> list[tuple[tuple, Finding]]:
    """Findings of jitter replay ``r`` of :data:`_JOB`, each with the key that identifies the
    problem across replays."""
    assert _JOB is not None
    ix, durations, seed, count, data = _JOB
    rep = simulate(ix, durations[r])
    note = f" (jitter replay {r + 1} of {count}, seed {seed})"
    out: list[tuple[tuple, Finding]] = []
    for d, f in zip(
        rep.double_sets, double_set_findings(ix, rep.double_sets, check="jitter", note=note), strict=True
    ):
        out.append((("double_set", d[0]), f))
    for st in rep.stuck:
        f = Finding(
            "jitter",
            "hb_cycle" if st.cyclic else "stuck",
            st.chain + note,
            ops=tuple(ix.op_label(g) for g in st.involved),
            cycle=st.time,
        )
        out.append((("stuck", st.released), f))
    if ix.timed:
        det, df = timed_pass(ix, rep)
        for pair, f in zip(det.races, race_findings(ix, det, rep, check="jitter"), strict=True):
            out.append(
                (("race", pair), Finding(f.check, f.kind, f.message + note, f.ops, f.core, f.pipes, f.cycle))
            )
        for f in dataflow_findings(ix, df, rep, check="jitter", note=note):
            out.append((("read", ix.op_gid.get(f.ops[0], -1)), f))
    if data is not None:
        inputs, nominal_gm = data
        gm, _ = numeric.run(ix, rep, inputs)
        for name in numeric.written_tensors(ix):
            if name not in gm or name not in nominal_gm:
                continue
            f = numeric.diff(ix, name, nominal_gm[name], gm[name], f"from the nominal run{note}")
            if f is not None:
                out.append((("tensor", name), f))
    return out


class Pending:
    """Jitter replays under way (in worker processes) or still to run (in this one)."""

    def __init__(self, count: int, pool: Any, result: Any, job: tuple) -> None:
        self.count, self.pool, self.result, self.job = count, pool, result, job

    def get(self) -> list[list[tuple[tuple, Finding]]]:
        global _JOB
        if self.result is None:
            _JOB = self.job
            try:
                return [_replay(r) for r in range(self.count)]
            finally:
                _JOB = None
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


def start(
    ix: ProgramIndex,
    count: int,
    seed: int,
    *,
    data: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]] | None = None,
    processes: int | None = None,
) -> Pending:
    """Draw the jittered durations of ``count`` replays and start them in worker processes when
    that pays (the caller goes on with other checks meanwhile); :func:`collect` the findings.

    Parameters
    ----------
    data
        ``(inputs, nominal_gm)`` to also replay the numbers and compare every written tensor
        bit for bit with the nominal run.
    processes
        Worker processes for the replays (default: one fewer than the CPUs, at least one, for
        programs of at least :data:`PARALLEL_MIN_INSTRUCTIONS` instructions without numeric
        data; else none). The replays are independent, their durations are drawn here in
        replay order, and their findings are merged in replay order, so the result does not
        depend on it.
    """
    global _JOB
    rng = np.random.default_rng(seed)
    durations = [jitter_durations(ix, rng) for _ in range(count)]
    job = (ix, durations, seed, count, data)
    if processes is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        # numeric jitter runs BLAS, which is not to be trusted in a forked child of a process
        # whose BLAS threads are up: it stays here
        big = ix.n >= PARALLEL_MIN_INSTRUCTIONS and data is None
        processes = max(1, cpus - 1) if big and count else 0
    processes = min(processes, count)
    if processes < 1 or "fork" not in mp.get_all_start_methods():
        # jitter is run in this process
        return Pending(count, None, None, job)
    # forked workers see the index as it is, without pickling ~10^6 instructions; frozen objects
    # are left alone by the workers' cycle collector, so their pages stay shared
    _JOB = job
    gc.freeze()
    try:
        pool = mp.get_context("fork").Pool(processes)
    finally:
        _JOB = None
        gc.unfreeze()
    return Pending(count, pool, pool.map_async(_replay, range(count), chunksize=1), job)


def collect(
    pending: Pending,
    ix: ProgramIndex,
    nominal: Replay,
    known_races: frozenset,
    known_reads: frozenset = frozenset(),
) -> list[Finding]:
    """The findings of the replays of ``pending`` that the nominal replay (and earlier jitter
    replays) did not already show, in replay order."""
    seen: set[tuple] = {("double_set", g) for g, _, _ in nominal.double_sets}
    seen |= {("stuck", st.released) for st in nominal.stuck}
    seen |= {("race", pair) for pair in known_races}
    seen |= {("read", g) for g in known_reads}
    out: list[Finding] = []
    for found in pending.get():
        fresh = set()
        for key, f in found:
            if key not in seen:
                out.append(f)
                fresh.add(key)
        seen |= fresh
    return out
