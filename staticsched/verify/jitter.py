"""Jitter: replays with seeded random durations (0.5x-3x of nominal) must stay clean.

In flags mode happens-before does not depend on timing, so races cannot appear
here; what timing can break is a flag reused too early (a *double set*) and
progress (a deadlock). A timed-mode program has no flags: its order *is* its
timing, so a jittered replay is checked for races and for the writes its reads see
again with the jittered cycles (and normally fails: timed mode is only correct
when every duration is exact).

:func:`staticsched.verify.verify` replays the numbers once, on the nominal run: a program
that passes these checks computes the same values under every timing
(docs/verification.md, "Numbers under jitter"). ``start(data=...)`` still replays them
under jitter and compares every tensor bit for bit with the nominal run; the tests use it to
show that a racy program's numbers do change, which keeps that argument honest.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

from staticsched._workers import Mapped, default_processes
from staticsched.verify import numeric
from staticsched.verify.compare import diff, written_tensors
from staticsched.verify.dataflow import dataflow_findings, seen_write_findings
from staticsched.verify.flags import double_set_findings
from staticsched.verify.hb import race_findings, timed_pass
from staticsched.verify.index import OP, WAIT, ProgramIndex
from staticsched.verify.replay import Replay, simulate
from staticsched.verify.report import Finding

LOW, HIGH = 0.5, 3.0


def jitter_durations(
    ix: ProgramIndex, rng: np.random.Generator, nominal: Replay | None = None
) -> list[int]:
    """One factor in ``[LOW, HIGH)`` per instruction (drawn for all, so the stream of random
    numbers does not depend on which instructions are micro-ops); sync stays 0 cycles.

    The factors scale the durations of the ``nominal`` replay when given (a transfer sharing a
    link lasts what sharing gave it there), else the program's: a jittered replay draws every
    duration, link sharing included, at random."""
    return _draw(rng, *_bases(ix, nominal))


def _bases(ix: ProgramIndex, nominal: Replay | None) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`jitter_durations` scales (per instruction), and which are micro-ops."""
    if nominal is not None and not ix.timed:
        base = np.asarray(nominal.end, dtype=np.float64) - np.asarray(nominal.start, dtype=np.float64)
    else:
        base = np.asarray(ix.dur, dtype=np.float64)
    return base, np.asarray(ix.role) == OP


def _draw(rng: np.random.Generator, base: np.ndarray, is_op: np.ndarray) -> list[int]:
    factors = rng.uniform(LOW, HIGH, size=len(base))
    scaled = np.maximum(1, np.rint(base * factors)).astype(np.int64)
    return np.where(is_op, scaled, 0).tolist()


class StaticPairs:
    """A flags program whose flag pairing no timing can change, whose nominal replay had no
    stuck state and no double set, and that keeps the reuse rule: every key's sets come from
    one stream and its waits from one stream (so wait #n consumes set #n under any durations),
    and set #n happens after the wait that consumes set #n-C (C = 1 for a binary flag, the
    counter's capacity for a counting cross-core flag).

    Happens-before is then the same graph for every replay (program order plus set #n ->
    wait #n), and the nominal issue order is a linear extension of it. A jittered replay's
    cycles follow from one pass along that order (``start = max(pipe free, matched set
    visible)``), the same recurrence the event-driven replay evaluates, and no replay of such
    a program can get stuck. A double set is set #n firing before wait #n-C is released; the
    reuse rule makes the wait come first at equal cycles (the event replay queues an
    instruction only once everything happening before it has issued), so the pass checks
    ``release(wait #n-C) <= fire(set #n)`` on its cycles and leaves any replay where that
    fails to :func:`simulate`.
    """

    def __init__(self, ix: ProgramIndex, nominal: Replay) -> None:
        self.order = nominal.order
        self.matched = nominal.matched
        later_sets: list[int] = []
        earlier_waits: list[int] = []
        for k, sets in ix.sets_of.items():
            waits = ix.waits_of.get(k, [])
            cap = ix.capacity(k)
            later_sets.extend(sets[cap:])
            earlier_waits.extend(waits[: max(0, len(sets) - cap)])
        self.sets = np.asarray(later_sets, dtype=np.int64)
        self.waits = np.asarray(earlier_waits, dtype=np.int64)

    @staticmethod
    def applies(ix: ProgramIndex, nominal: Replay, reuse_rule_kept: bool) -> bool:
        """Whether the program qualifies (see the class); ``reuse_rule_kept``: the reuse rule
        check (:func:`staticsched.verify.hb.flags_pass`) found nothing."""
        if not reuse_rule_kept or ix.timed or nominal.stuck_count or nominal.double_sets or ix.problems:
            return False
        stream_of = ix.stream_of
        for table in (ix.sets_of, ix.waits_of):
            for gids in table.values():
                s = stream_of[gids[0]]
                if any(stream_of[g] != s for g in gids):
                    return False
        # as many waits as sets of every key (a surplus would be an unpaired flag)
        if ix.waits_of.keys() != ix.sets_of.keys():
            return False
        return all(len(ix.waits_of[k]) == len(v) for k, v in ix.sets_of.items())

    def replay(self, ix: ProgramIndex, dur: list[int]) -> Replay | None:
        """The replay with durations ``dur`` (start and end cycles, the nominal order and
        pairing), or None when a set fires before the wait of the previous set of its key is
        released (a double set: :func:`simulate` reports it)."""
        n = ix.n
        start = [0] * n
        end = [0] * n
        free = [0] * len(ix.streams)
        stream_of, role, latency, matched = ix.stream_of, ix.role, ix.latency, self.matched
        hold = ix.hold
        for g in self.order:
            s = stream_of[g]
            t = free[s]
            r = role[g]
            if r == OP:
                start[g] = t
                end[g] = free[s] = t + dur[g]
                continue
            if r == WAIT:
                m = matched[g]
                v = start[m] + latency[m]
                if v > t:
                    t = free[s] = v
                if g in hold:
                    t = free[s] = t + hold[g]
            start[g] = end[g] = t
        if len(self.sets):
            at = np.asarray(start, dtype=np.int64)
            if not bool(np.all(at[self.waits] <= at[self.sets])):
                return None
        rep = Replay(0)
        rep.start, rep.end, rep.order, rep.matched = start, end, self.order, self.matched
        return rep


def _replay(job: tuple, r: int) -> list[tuple[tuple, Finding]]:
    """Findings of jitter replay ``r`` of ``job``, each with the key that identifies the
    problem across replays."""
    ix, durations, seed, count, data, fast = job
    rep = fast.replay(ix, durations[r]) if fast is not None else None
    if rep is None:
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
        det, df, sw = timed_pass(ix, rep)
        for pair, f in zip(det.races, race_findings(ix, det, rep, check="jitter"), strict=True):
            out.append(
                (("race", pair), Finding(f.check, f.kind, f.message + note, f.ops, f.core, f.pipes, f.cycle))
            )
        for f in dataflow_findings(ix, df, rep, check="jitter", note=note):
            out.append((("read", ix.op_gid.get(f.ops[0], -1)), f))
        for f in seen_write_findings(ix, sw, rep):
            if f.kind == "wrong_write":
                f = Finding("jitter", f.kind, f.message + note, f.ops, f.core, f.pipes, f.cycle)
                out.append((("seen", f.ops[0]), f))
    if data is not None:
        inputs, nominal_gm = data
        gm, _ = numeric.run(ix, rep, inputs)
        for name in written_tensors(ix):
            if name not in gm or name not in nominal_gm:
                continue
            f = diff(ix, name, nominal_gm[name], gm[name], f"from the nominal run{note}")
            if f is not None:
                out.append((("tensor", name), f))
    return out


def start(
    ix: ProgramIndex,
    count: int,
    seed: int,
    *,
    data: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]] | None = None,
    nominal: Replay | None = None,
    reuse_rule_kept: bool = False,
    processes: int | None = None,
) -> Mapped:
    """Draw the jittered durations of ``count`` replays and start them in worker processes when
    that pays (the caller goes on with other checks meanwhile); :func:`collect` the findings.

    Parameters
    ----------
    data
        ``(inputs, nominal_gm)`` to also replay the numbers and compare every written tensor
        bit for bit with the nominal run.
    nominal, reuse_rule_kept
        The nominal replay, and whether the reuse rule check found nothing. When the program
        qualifies (:class:`StaticPairs`), each replay is one pass along the nominal issue
        order (a sixth of an event-driven replay), unless ``data`` asks for numbers.
    processes
        Worker processes for the replays (default:
        :func:`~staticsched._workers.default_processes`; none with numeric data). The
        replays are independent, their durations are drawn here in replay order, and their
        findings are merged in replay order, so the result does not depend on it.
    """
    rng = np.random.default_rng(seed)
    durations: list[list[int]] = []
    if count:
        base, is_op = _bases(ix, nominal)
        durations = [_draw(rng, base, is_op) for _ in range(count)]
    fast = None
    if nominal is not None and data is None and StaticPairs.applies(ix, nominal, reuse_rule_kept):
        fast = StaticPairs(ix, nominal)
    job = (ix, durations, seed, count, data, fast)
    if processes is None:
        # numeric jitter runs BLAS, which is not to be trusted in a forked child of a process
        # whose BLAS threads are up: it stays here; so do the one-pass replays of a statically
        # paired program (a tenth of a second each on a chip, less than forking a worker costs)
        processes = default_processes(ix.n, count) if data is None and fast is None else 0
    return Mapped(functools.partial(_replay, job), range(count), processes)


def collect(
    pending: Mapped,
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
