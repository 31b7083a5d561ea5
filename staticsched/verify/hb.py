"""Happens-before: vector clocks, FastTrack-style race detection and the flag reuse rule.

HB in flags mode is program order on each stream plus an edge from the n-th set
of a flag key to the n-th wait of it (the pairing :mod:`replay` uses). Vector
clocks are kept per stream over the streams of its component (cores joined by
cross flags); a component never orders another one, so GM accesses of
different components are always concurrent. In timed mode HB comes from the
replay's exact cycles: ``a`` happens before ``b`` when ``a`` ends no later than
``b`` starts (an interval order, hence transitive).

Races are found FastTrack style: per memory segment the last write and, per
stream, the last read since that write. Every access is checked against those
epochs only, which is linear in the number of accesses; the state is exact
because same-stream accesses are ordered and HB is transitive. Like FastTrack,
a location keeps reporting from its latest write on, so a racy program yields at
least one race per racy location, not every racing pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from staticsched.verify.dataflow import Dataflow, SeenWrites
from staticsched.verify.index import OP, SET, Access, Key, ProgramIndex, key_text
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding

#: an access epoch: (gid, stream, clock, access label)
Epoch = tuple[int, int, int, str]


class RaceDetector:
    """Per-segment last write and reads-since-write; collects racing pairs in detection order."""

    def __init__(self) -> None:
        self.last_write: dict[int, Epoch] = {}
        self.reads: dict[int, dict[int, Epoch]] = {}
        #: (earlier gid, later gid) -> (kind, earlier label, later label)
        self.races: dict[tuple[int, int], tuple[str, str, str]] = {}

    def op(
        self,
        gid: int,
        stream: int,
        clock: int,
        accesses: Sequence[Access],
        hb: Callable[[Epoch], bool],
        dataflow: Dataflow,
    ) -> None:
        """Check every access of micro-op ``gid`` against the state, then record it (and pass
        its GM accesses to ``dataflow``).

        ``hb(e)`` says whether epoch ``e`` happens before the op; ``clock`` is the op's own
        entry in its epochs.
        """
        last_write, reads, races = self.last_write, self.reads, self.races
        for acc in accesses:
            me = (gid, stream, clock, acc.label)
            write = acc.write
            for seg in acc.segs:
                w = last_write.get(seg)
                if w is not None and w[0] != gid and w[1] != stream and not hb(w):
                    races.setdefault((w[0], gid), ("WAW" if write else "RAW", w[3], me[3]))
                if write:
                    rs = reads.pop(seg, None)
                    if rs:
                        for r in rs.values():
                            if r[0] != gid and r[1] != stream and not hb(r):
                                races.setdefault((r[0], gid), ("WAR", r[3], me[3]))
                    last_write[seg] = me
                else:
                    rs = reads.get(seg)
                    if rs is None:
                        reads[seg] = {stream: me}
                    else:
                        rs[stream] = me
            if acc.gm:
                dataflow.access(me, acc.segs, write, hb)


def flags_pass(ix: ProgramIndex, rep: Replay) -> tuple[RaceDetector, list[Finding], Dataflow, SeenWrites]:
    """Vector clocks over ``rep.order``: races of every micro-op access, GM dataflow, and the
    reuse rule.

    Returns
    -------
    detector, reuse_findings, dataflow, seen
        The race detector (its ``races``), one ``flag`` finding per set (or wait) that breaks
        the reuse rule or the order of its key, the GM reads no write happens before
        (``dataflow.unsatisfied``), and the reads that see another write than the program says
        (``seen.wrong``).
    """
    nstreams = len(ix.streams)
    comp = ix.comp_of_stream
    local = ix.local_of_stream
    vcs = [[0] * ix.comp_size[comp[s]] for s in range(nstreams)]
    snapshots: dict[int, list[int]] = {}
    wait_epochs: dict[Key, list[tuple[int, int, int] | None]] = {}
    set_count: dict[Key, int] = {}
    # the latest set and wait of each key, as (gid, stream, clock)
    last_set: dict[Key, tuple[int, int, int]] = {}
    last_wait: dict[Key, tuple[int, int, int]] = {}
    det = RaceDetector()
    df = Dataflow(ix.gm_written)
    sw = SeenWrites(ix)
    reuse: list[Finding] = []
    role, stream_of, accesses = ix.role, ix.stream_of, ix.accesses

    def hb_of(v: list[int], cs: int) -> Callable[[Epoch], bool]:
        def hb(e: Epoch) -> bool:
            return comp[e[1]] == cs and e[2] <= v[local[e[1]]]

        return hb

    # a stream's clock is one list, updated in place: one test per stream, not per op
    hbs = [hb_of(vcs[s], comp[s]) for s in range(nstreams)]
    for g in rep.order:
        s = stream_of[g]
        v = vcs[s]
        v[local[s]] += 1
        r = role[g]
        if r == OP:
            accs = accesses[g]
            if not accs:
                continue
            hb = hbs[s]
            det.op(g, s, v[local[s]], accs, hb, df)
            sw.op((g, s, v[local[s]], ""), hb)
        elif r == SET:
            k = ix.key_of[g]
            i = set_count.get(k, 0)
            set_count[k] = i + 1
            snapshots[g] = list(v)
            cap = ix.capacity(k)
            if i >= cap:
                j = i - cap
                prev = wait_epochs.get(k, [])
                if len(prev) <= j:
                    static = ix.waits_of.get(k, [])
                    reuse.append(_reuse_finding(ix, k, g, i, static[j] if len(static) > j else -1, cap))
                else:
                    ep = prev[j]
                    if ep is not None and (comp[ep[1]] != comp[s] or ep[2] > v[local[ep[1]]]):
                        reuse.append(_reuse_finding(ix, k, g, i, ep[0], cap))
            last = last_set.get(k)
            if last is not None and (comp[last[1]] != comp[s] or last[2] > v[local[last[1]]]):
                reuse.append(_order_finding(ix, k, "set", i, last[0], g))
            last_set[k] = (g, s, v[local[s]])
        else:
            k = ix.key_of[g]
            m = rep.matched[g]
            if m >= 0:
                snap = snapshots.pop(m)
                if len(snap) == len(v):
                    v[:] = map(max, v, snap)
                me = (g, s, v[local[s]])
                wait_epochs.setdefault(k, []).append(me)
                last = last_wait.get(k)
                if last is not None and (comp[last[1]] != comp[s] or last[2] > v[local[last[1]]]):
                    reuse.append(_order_finding(ix, k, "wait", len(wait_epochs[k]) - 1, last[0], g))
                last_wait[k] = me
            else:
                wait_epochs.setdefault(k, []).append(None)
    return det, reuse, df, sw


def _reuse_finding(ix: ProgramIndex, k: Key, g: int, i: int, prev_wait: int, cap: int = 1) -> Finding:
    j = i - cap
    if prev_wait >= 0:
        why = f"is not ordered after {ix.describe(prev_wait)}, the wait that consumes set #{j}"
        ops = (ix.op_label(g), ix.op_label(prev_wait))
        pipes = (ix.unit_of(g), ix.unit_of(prev_wait))
    else:
        why = f"follows set #{j}, which no wait consumes"
        ops = (ix.op_label(g),)
        pipes = (ix.unit_of(g),)
    harm = ("it sets a flag that is still set (double set)" if cap == 1
            else f"the counter exceeds its capacity of {cap}")
    return Finding(
        "flag",
        "reuse_rule",
        f"set #{i} of {key_text(k)}: {ix.describe(g)} {why}; under some timing {harm}",
        ops=ops,
        core=ix.core_of(g),
        pipes=pipes,
    )


def _order_finding(ix: ProgramIndex, k: Key, what: str, i: int, prev: int, g: int) -> Finding:
    """Two consecutive sets (or waits) of one key that happens-before does not order: which
    wait consumes which set then depends on timing."""
    return Finding(
        "flag",
        f"unordered_{what}s",
        f"{what} #{i} of {key_text(k)}: {ix.describe(g)} is not ordered after {what} #{i - 1}, "
        f"{ix.describe(prev)}; under some timing the waits of this key consume its sets in "
        "another order",
        ops=(ix.op_label(prev), ix.op_label(g)),
        core=ix.core_of(g),
        pipes=(ix.unit_of(prev), ix.unit_of(g)),
    )


def timed_pass(ix: ProgramIndex, rep: Replay) -> tuple[RaceDetector, Dataflow, SeenWrites]:
    """Races, GM dataflow and seen writes when HB is "ends no later than the other starts" in
    replay ``rep`` (timed mode, or a jittered replay of a timed program)."""
    det = RaceDetector()
    df = Dataflow(ix.gm_written)
    sw = SeenWrites(ix)
    start, end = rep.start, rep.end
    for g in rep.order:
        if ix.role[g] != OP or not ix.accesses[g]:
            continue
        s = ix.stream_of[g]
        t = start[g]

        def hb(e: Epoch, t: int = t) -> bool:
            return end[e[0]] <= t

        det.op(g, s, s, ix.accesses[g], hb, df)
        sw.op((g, s, s, ""), hb)
    return det, df, sw


def race_findings(
    ix: ProgramIndex, det: RaceDetector, rep: Replay, *, check: str = "race", skip: frozenset = frozenset()
) -> list[Finding]:
    """One finding per racing pair (except pairs in ``skip``), in detection order."""
    out = []
    for (a, b), (kind, la, lb) in det.races.items():
        if (a, b) in skip:
            continue
        ca, cb = ix.core_of(a), ix.core_of(b)
        scope = "inter-core" if ca != cb else "inter-pipe"
        verb = {"RAW": ("writes", "reads"), "WAR": ("reads", "writes"), "WAW": ("writes", "writes")}[kind]
        out.append(
            Finding(
                check,
                kind,
                f"{kind} {scope} race: {ix.describe(a)} {verb[0]} {la} at cycles "
                f"[{rep.start[a]}, {rep.end[a]}) and {ix.describe(b)} {verb[1]} {lb} at cycles "
                f"[{rep.start[b]}, {rep.end[b]}) are not ordered by happens-before",
                ops=(ix.op_label(a), ix.op_label(b)),
                core=ca if ca == cb else -1,
                pipes=(ix.unit_of(a), ix.unit_of(b)),
                cycle=rep.start[b],
            )
        )
    return out
