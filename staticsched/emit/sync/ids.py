"""Pass 2 of sync planning: an event id for every kept flag, under the budget and the reuse rule.

A Kahn traversal visits the pipes' wait points (phase 0: the WAITs before an op, one by one)
and set points (phase 1: what follows an op) in nominal-time order. Marks count a pipe's
points in program order -- each WAIT, each op's end, each credit WAIT -- and
``clock[q] >= m`` says point ``m`` of pipe ``q`` happens before.

Every id of a pool is unused, set but not yet waited, or free with its last WAIT. An id is
reused only when the new SET is happens-after the previous WAIT on it (the reuse rule) and
that WAIT is happens-before the new WAIT without the new flag, so the new WAIT cannot consume
the previous SET (automatic within one pipe pair; a real condition for a cross-core pool
serving several pipes). The lowest eligible id wins. When none is eligible: (1) if the WAITs of
the next op on the SET's pipe are released by the time the SET would fire anyway, they are
passed first (no nominal delay; the SET then knows more); (2) a *credit* flag runs from an
already passed earlier WAIT back to a WAIT right before the new SET; it cannot close a cycle
because its source was processed first; (3) the SET waits (is parked) until a WAIT on its
pool, or on the credit's reverse pool, is passed, as the program would. If that never happens
:class:`~staticsched.errors.EventBudgetError` says so and :func:`~staticsched.emit.sync.plan_sync`
falls back to the baton plan.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from staticsched.emit.sync.layout import Layout, flag_kind
from staticsched.emit.sync.pools import Busy, LastWait, Pools, WaitAt
from staticsched.errors import EventBudgetError, InfeasibleError
from staticsched.model.hardware import SyncModel
from staticsched.model.opgraph import Edge
from staticsched.model.pools import PoolKey


@attrs.define(eq=False)
class Draft:
    """A flag while ids are being assigned (op indices, not names)."""

    kind: str
    reason: str
    set_op: int
    set_side: str
    wait_op: int
    wait_side: str
    item: str
    event: int = -1


class _Clocks:
    """Happens-before and nominal time as points are passed: per pipe its mark count, vector
    clock and time; per flag the clocks right after its SET and WAIT, and its SET's time."""

    def __init__(self, npipes: int) -> None:
        self.mark = [0] * npipes
        # nominal time per pipe and of every placed SET: where a SET may be moved for free
        self.now = [0] * npipes
        self.cur = [np.zeros(npipes, dtype=np.int64) for _ in range(npipes)]
        self.set_clock: dict[int, np.ndarray] = {}
        self.wait_clock: dict[int, np.ndarray] = {}
        self.set_time: dict[int, int] = {}

    def step(self, q: int) -> int:
        """A new point on pipe ``q``: its mark."""
        self.mark[q] += 1
        return self.mark[q]


class _Text:
    """The program being written: what follows each op (or, when the SETs after an op wait for
    the next op's WAITs, what comes between those WAITs and the next op), and the credit SETs
    right behind each WAIT."""

    def __init__(self) -> None:
        self.after: dict[int, list[tuple[str, int]]] = {}
        self.lead: dict[int, list[tuple[str, int]]] = {}
        #: where the SETs of a set point go now: ``after[x]``, or ``lead[next]`` once early
        self.out: dict[int, list[tuple[str, int]]] = {}
        self.early: dict[int, int] = {}  # op -> next op whose WAITs its SETs follow
        self.behind: dict[int, list[int]] = {}


class _Traversal:
    """The Kahn traversal's state: the point queue, how far each op's WAITs got, and what is
    parked."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, int, int]] = []
        self.waits_done: dict[int, int] = {}  # op -> how many of its WAITs are passed
        self.wait_parked: dict[int, int] = {}  # flag whose SET is missing -> op waiting for it
        # set points in progress: their clock so far and the flags still to place
        self.partial: dict[int, tuple[np.ndarray, list[int]]] = {}
        self.parked: set[int] = set()


class IdAssigner:
    """Assigns ids and credits (see the module docstring)."""

    def __init__(self, sync: SyncModel, lay: Layout, kept: list[tuple[int, int, Edge]]) -> None:
        self.lay = lay
        self.drafts = [Draft(flag_kind(lay, p, c), e.reason, p, "after", c, "before", e.item)
                       for p, c, e in kept]
        self.in_flags: dict[int, list[int]] = {}
        self.out_flags: dict[int, list[int]] = {}
        for f, d in enumerate(self.drafts):
            self.in_flags.setdefault(d.wait_op, []).append(f)
            self.out_flags.setdefault(d.set_op, []).append(f)
        for lst in self.in_flags.values():
            lst.sort(key=lambda f: (lay.end[self.drafts[f].set_op], lay.pipe_of[self.drafts[f].set_op], f))
        for lst in self.out_flags.values():
            lst.sort(key=lambda f: (lay.pipe_of[self.drafts[f].wait_op], f))
        self.sync = sync
        self.pools = Pools(sync)
        self.clocks = _Clocks(len(lay.pipes))
        self.text = _Text()
        self.trav = _Traversal()

    def latency(self, set_op: int, wait_op: int) -> int:
        """The latency of a flag set after op ``set_op`` and waited on by ``wait_op``'s pipe."""
        lay = self.lay
        return self.sync.latency(lay.pipes[lay.pipe_of[set_op]], lay.pipes[lay.pipe_of[wait_op]])

    # ---------------------------------------------------------------- pools
    def key(self, kind: str, set_op: int, wait_op: int) -> PoolKey:
        lay = self.lay
        sp, wp = lay.pipes[lay.pipe_of[set_op]], lay.pipes[lay.pipe_of[wait_op]]
        if kind == "cross":
            return PoolKey.cross(sp[0], wp[0])
        return PoolKey.flag(sp[0], sp[1], wp[1])

    def wait_at(self, f: int) -> WaitAt:
        """Where the WAIT of dependency flag ``f`` will be: what reaches it before its own SET is
        at least the pipe's progress so far and the SETs of the WAITs ahead of it (placed ones)."""

        def floor() -> np.ndarray:
            c = self.drafts[f].wait_op
            clock = self.clocks.cur[self.lay.pipe_of[c]].copy()
            for g in self.in_flags[c]:
                if g == f:
                    break
                if g in self.clocks.set_clock:
                    np.maximum(clock, self.clocks.set_clock[g], out=clock)
            return clock

        c = self.drafts[f].wait_op
        order = (self.lay.pipe_of[c], self.lay.pos[c], self.in_flags[c].index(f))
        return WaitAt(self.lay.pipe_of[c], floor, order)

    def passed(self, key: PoolKey, k: int, last: LastWait) -> None:
        """Record the latest WAIT on id ``k`` of ``key`` and wake set points parked on the pool."""
        self.pools[key].passed(k, last)
        trav = self.trav
        for x in self.pools.wake.pop(key, ()):
            if x in trav.parked:
                trav.parked.discard(x)
                heapq.heappush(trav.heap, (max(self.lay.end[x], last.time), 1, self.lay.pipe_of[x], x))

    # ---------------------------------------------------------------- traversal
    def run(self, tick: Callable[[int], None] | None = None) -> list[Draft]:
        """Assign ids and credits; ``tick(n)`` is told of every ``n`` ops finished."""
        lay, trav = self.lay, self.trav
        for seq in lay.seq:
            if seq:
                heapq.heappush(trav.heap, (lay.start[seq[0]], 0, lay.pipe_of[seq[0]], seq[0]))
        done = 0
        while trav.heap:
            _, phase, _, x = heapq.heappop(trav.heap)
            if phase == 0:
                self.wait_point(x)
            elif self.set_point(x):
                done += 1
                if tick is not None and done % 1024 == 0:
                    tick(1024)
        if trav.parked:
            self.fail(min(trav.parked))
        if done != len(lay.ids):
            stuck = sorted(lay.ids[x] for x in trav.wait_parked.values())[:5]
            raise InfeasibleError(
                f"sync plan has a cycle: ops {', '.join(stuck)} wait for each other (the timetable "
                f"contradicts its dependencies)"
            )
        return self.drafts

    def wait_point(self, x: int) -> None:
        """Pass the WAITs before ``x`` whose SETs are placed; when all are, ``x`` may issue."""
        if self.pass_waits(x):
            heapq.heappush(self.trav.heap, (self.lay.end[x], 1, self.lay.pipe_of[x], x))

    def pass_waits(self, x: int) -> bool:
        lay, clocks, trav = self.lay, self.clocks, self.trav
        q = lay.pipe_of[x]
        flags = self.in_flags.get(x, ())
        n = trav.waits_done.get(x, 0)
        while n < len(flags):
            f = flags[n]
            if f not in clocks.set_clock:
                trav.wait_parked[f] = x
                trav.waits_done[x] = n
                return False
            d = self.drafts[f]
            clock = np.maximum(clocks.cur[q], clocks.set_clock[f])
            clock[q] = clocks.step(q)
            clocks.cur[q] = clock
            clocks.wait_clock[f] = clock
            clocks.now[q] = max(clocks.now[q], clocks.set_time[f] + self.latency(d.set_op, d.wait_op))
            last = LastWait(q, clocks.mark[q], clocks.now[q], f)
            self.passed(self.key(d.kind, d.set_op, x), d.event, last)
            n += 1
        trav.waits_done[x] = n
        clocks.now[q] = max(clocks.now[q], lay.start[x])
        return True

    def free_lookahead(self, x: int, nxt: int) -> bool:
        """Whether the WAITs before ``nxt`` can be passed before the remaining SETs after ``x``:
        their SETs are placed and visible by the time ``x`` ends, so the SETs lose no nominal
        time and gain what those WAITs bring (an id may become reusable). Used only for a SET
        that has no eligible id, since it couples that SET to the WAITs under jitter."""
        end = self.lay.end[x]
        set_time = self.clocks.set_time
        for f in self.in_flags.get(nxt, ()):
            if f not in set_time or set_time[f] + self.latency(self.drafts[f].set_op, nxt) > end:
                return False
        return True

    def set_point(self, x: int) -> bool:
        """Place the SETs after ``x``; False while one of them is parked for want of an id."""
        lay, clocks, text, trav = self.lay, self.clocks, self.text, self.trav
        q = lay.pipe_of[x]
        if x in trav.partial:
            clock, pending = trav.partial.pop(x)
        else:
            mark = clocks.step(q)  # x has finished
            clocks.cur[q] = clocks.cur[q].copy()
            clocks.cur[q][q] = mark
            clocks.now[q] = max(clocks.now[q], lay.end[x])
            pending = list(self.out_flags.get(x, ()))
            text.out[x] = text.after[x] = []
            clock = clocks.cur[q].copy()
        nxt = lay.seq[q][lay.pos[x] + 1] if lay.pos[x] + 1 < len(lay.seq[q]) else -1
        while pending:
            placed = False
            for f in list(pending):
                d = self.drafts[f]
                key = self.key(d.kind, x, d.wait_op)
                k = self.pools[key].eligible(clock, self.wait_at(f), q)
                if k >= 0:
                    self.place(x, f, key, k, clock)
                    pending.remove(f)
                    placed = True
            if placed or not pending:
                continue
            if x not in text.early and nxt >= 0 and self.free_lookahead(x, nxt):
                # first try passing the next op's WAITs (free in nominal time), then a credit
                clocks.cur[q] = clock
                self.pass_waits(nxt)
                clock = clocks.cur[q].copy()
                text.early[x] = nxt
                text.out[x] = text.lead[nxt] = []
                continue
            for f in pending:
                d = self.drafts[f]
                key = self.key(d.kind, x, d.wait_op)
                k = self.credit(key, x, clock, self.wait_at(f))
                if k >= 0:
                    self.place(x, f, key, k, clock)
                    pending.remove(f)
                    placed = True
                    break
            if not placed:
                trav.partial[x] = (clock, pending)
                trav.parked.add(x)
                for f in pending:
                    d = self.drafts[f]
                    key = self.key(d.kind, x, d.wait_op)
                    for pool in (key, key.reverse()):
                        self.pools.wake.setdefault(pool, []).append(x)
                return False
        clocks.cur[q] = clock
        if x in text.early:
            nxt = text.early[x]
            heapq.heappush(trav.heap, (lay.end[nxt], 1, q, nxt))
        elif lay.pos[x] + 1 < len(lay.seq[q]):
            nxt = lay.seq[q][lay.pos[x] + 1]
            heapq.heappush(trav.heap, (lay.start[nxt], 0, q, nxt))
        return True

    def place(self, x: int, f: int, key: PoolKey, k: int, clock: np.ndarray) -> None:
        self.drafts[f].event = k
        q = self.lay.pipe_of[x]
        self.pools[key].place(k, Busy(f, q, int(clock[q]), self.wait_at(f).order))
        self.clocks.set_clock[f] = clock.copy()
        self.clocks.set_time[f] = self.clocks.now[self.lay.pipe_of[x]]
        self.text.out[x].append(("set", f))
        c = self.trav.wait_parked.pop(f, None)
        if c is not None:
            heapq.heappush(self.trav.heap, (self.lay.start[c], 0, self.lay.pipe_of[c], c))

    def credit(self, key: PoolKey, x: int, clock: np.ndarray, wait: WaitAt) -> int:
        """Free an id of ``key`` for a SET after ``x`` with a credit flag; the id or -1.

        The candidates are the ids whose last WAIT has been passed and happens before ``wait``
        (see :meth:`IdPool.eligible`), earliest in nominal time first. The credit SET goes right
        behind that WAIT and needs an id on the reverse pool, chosen by the same rule without
        further credits. Its source was processed before ``x``'s set point, so it cannot close a
        cycle. On success ``clock`` has the credit joined in.
        """
        lay, clocks = self.lay, self.clocks
        q = lay.pipe_of[x]
        for k, st in self.pools[key].credit_candidates(clock, wait, q):
            src_clock = clocks.wait_clock[st.flag]
            src = self.drafts[st.flag]
            # the op the source WAIT is anchored to: before a consumer, or after a producer
            src_op = src.wait_op
            kind = flag_kind(lay, src_op, x)
            rkey = self.key(kind, src_op, x)
            # the credit WAIT goes here, after x: the clock so far reaches it
            m = self.pools[rkey].eligible(src_clock, WaitAt(q, lambda: clock), lay.pipe_of[src_op])
            if m < 0:
                continue
            c = len(self.drafts)
            self.drafts.append(Draft(kind, "credit", src_op, src.wait_side, x, "after", "", m))
            self.text.behind.setdefault(st.flag, []).append(c)
            clocks.set_clock[c] = src_clock
            clocks.set_time[c] = st.time
            self.text.out[x].append(("wait", c))
            np.maximum(clock, src_clock, out=clock)
            clock[q] = clocks.step(q)
            clocks.wait_clock[c] = clock.copy()
            clocks.now[q] = max(clocks.now[q], st.time + self.latency(src_op, x))
            sp = lay.pipe_of[src_op]
            self.passed(rkey, m, LastWait(q, clocks.mark[q], clocks.now[q], c, sp, int(src_clock[sp])))
            return k
        return -1

    def fail(self, x: int) -> None:
        lay = self.lay
        f = self.trav.partial[x][1][0]
        need = self.drafts[f]
        key = self.key(need.kind, x, need.wait_op)
        sp, wp = lay.pipes[lay.pipe_of[x]], lay.pipes[lay.pipe_of[need.wait_op]]
        budget = key.budget(self.pools.sync)
        pair = (f"cores {sp[0]}->{wp[0]}" if key.kind == "cross"
                else f"core {sp[0]}: pipes {sp[1]}->{wp[1]}")
        flag = f"{lay.ids[x]} -> {lay.ids[need.wait_op]}"
        what = f"{pair}: no event id for the flag {flag} (SET at cycle {lay.end[x]})"
        if not budget:
            # no plan can carry this flag: a fallback would not help either
            raise InfeasibleError(f"{what}: the hardware has no event ids for it (budget 0)")
        holders = []
        pool = self.pools[key]
        for k in range(len(pool)):
            st = pool.last(k)
            assert st is not None  # an unused id would have been eligible
            h = self.drafts[st.flag]
            state = "set, its WAIT not passed" if isinstance(st, Busy) else "its WAIT not ordered before"
            holders.append(f"id {k}: {lay.ids[h.set_op]} -> {lay.ids[h.wait_op]} ({state})")
        raise EventBudgetError(
            f"{what}: budget {budget}, all ids held, and no credit can free one without a deadlock "
            f"or a WAIT consuming the wrong SET; {'; '.join(holders)}"
        )

    # ---------------------------------------------------------------- text
    def streams(self) -> list[tuple[int, str, list[tuple[str, Any]]]]:
        """The planned streams as ``(core, unit, slots)``: per op its WAITs, the SETs of the op
        before when they waited for those WAITs, the op, then what follows it; credit SETs
        right behind the WAIT they rely on."""
        lay, text = self.lay, self.text
        out = []
        for q, (core, unit) in enumerate(lay.pipes):
            slots: list[tuple[str, Any]] = []
            for x in lay.seq[q]:
                for f in self.in_flags.get(x, ()):
                    slots.append(("wait", f))
                    slots += [("set", c) for c in text.behind.get(f, ())]
                around: list[tuple[str, Any]] = [*text.lead.get(x, ()), ("op", lay.ids[x]),
                                                 *text.after.get(x, ())]
                for what, ref in around:
                    slots.append((what, ref))
                    if what == "wait":
                        slots += [("set", c) for c in text.behind.get(ref, ())]
            out.append((core, unit, slots))
        return out
