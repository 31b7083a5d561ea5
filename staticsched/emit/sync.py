"""Sync planning as data: which dependencies need a flag, where the flag goes, which id it uses.

A :class:`SyncPlan` is computed from a :class:`~staticsched.model.schedule.Schedule` before any
text is written (TVM's coproc-sync habit): per (core, pipe) the program order with SET/WAIT
slots, every flag with its anchors and event id, and the counts.

Happens-before (HB) is tracked with vector clocks over *marks*: every pipe numbers the points
of its program, and ``clock[q] >= m`` says that point ``m`` of pipe ``q`` (and everything before
it there) happens before the point the clock belongs to. Joining clocks is an element-wise
maximum; because the components are independent, a point is implied by a join exactly when it
is implied by one of the joined clocks, which makes the redundancy test exact.

Planning runs in two passes:

1. **Elimination** (:func:`_eliminate`). Ops are visited in (start, graph index) order, a
   topological order of program order and every dependency. For each consumer the cross-pipe
   producers are tried latest-ending first; one whose end the consumer's clock already covers
   is implied and dropped, otherwise its flag is kept and its end clock joined. Latest-first
   keeps exactly the maximal producers, so no kept flag is implied by the others.
2. **Event ids** (:class:`_IdAssigner`). A Kahn traversal of the WAITs before each op and the
   SETs after it, in nominal-time order, assigns ids per (core, src pipe, dst pipe), or per
   (src core, dst core) for cross-core flags. An id is reused only when the new SET is
   HB-after the previous WAIT on it (the reuse rule) and the previous WAIT is HB-before the new
   WAIT without the new flag (so the new WAIT cannot consume the previous SET; automatic
   within one pipe pair, a real condition for a cross-core pool serving several pipes). The
   lowest eligible id wins. When none is eligible: (1) if the WAITs of the next op on the
   SET's pipe are released by the time the SET would fire anyway, they are passed first (no
   nominal delay; the SET then knows more); (2) a *credit* flag (design refinement 4) runs from
   an already passed earlier WAIT back to a WAIT right before the new SET; it cannot close a
   cycle because its source was processed first; (3) the SET waits (is parked) until such a
   WAIT is passed, as the program would. If that never happens the plan is infeasible and the
   error names the pool, ops, budget and id holders.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from staticsched.errors import EventBudgetError, InfeasibleError, InputError
from staticsched.model.deps import address_edges
from staticsched.model.opgraph import Edge
from staticsched.model.schedule import Schedule
from staticsched.progress import Progress, silent


@attrs.frozen
class Flag:
    """One planned SET/WAIT pair, each end anchored ``"before"`` or ``"after"`` an op.

    A dependency flag has its SET right ``"after"`` the producer op ``set_op`` and its WAIT
    right ``"before"`` the consumer op ``wait_op``. A credit flag (``reason == "credit"``) runs
    the other way: its SET sits right behind an earlier WAIT whose id a new SET wants to reuse
    (so ``"before"`` that WAIT's op, or ``"after"`` an op when that WAIT was a credit WAIT
    itself), its WAIT ``"after"`` the producer of the new SET, right before that SET. The exact
    slots are in :attr:`SyncPlan.streams`.

    ``kind`` is ``"flag"`` (same core, ids per (core, set_unit, wait_unit)) or ``"cross"``
    (ids per (set_core, wait_core)).
    """

    index: int
    kind: str
    reason: str
    set_core: int
    set_unit: str
    set_op: str
    set_side: str
    wait_core: int
    wait_unit: str
    wait_op: str
    wait_side: str
    event: int
    item: str = ""

    @property
    def id_key(self) -> tuple:
        """The id pool this flag draws from."""
        if self.kind == "cross":
            return ("cross", self.set_core, self.wait_core)
        return ("flag", self.set_core, self.set_unit, self.wait_unit)


@attrs.frozen
class PlanStream:
    """One pipe's program: ``slots`` are ``("op", op_id)``, ``("set", flag index)`` or
    ``("wait", flag index)`` in execution order."""

    core: int
    unit: str
    slots: tuple[tuple[str, str | int], ...] = attrs.field(converter=tuple)


@attrs.frozen
class SyncStats:
    """Counts of a sync plan.

    ``dependencies`` counts distinct cross-pipe (producer, consumer) pairs -- the flags a naive
    planner would emit (``flags_naive``). ``flags_kept`` of them got a flag, the rest are implied
    by happens-before (``flags_eliminated``). ``credits`` are extra flags added for the id-reuse
    rule. ``ids_used`` is, per id pool (``"c0 MTE2->CUBE"`` or ``"core0->core1"``), the number of
    distinct ids used.
    """

    dependencies: int
    flags_naive: int
    flags_kept: int
    flags_eliminated: int
    credits: int
    cross_core: int
    ids_used: tuple[tuple[str, int], ...] = attrs.field(converter=tuple, default=())
    relays: int = 0
    fallback: str = ""

    def as_dict(self) -> dict:
        """JSON-ready form with a fixed key order."""
        out = {
            "dependencies": self.dependencies,
            "flags_naive": self.flags_naive,
            "flags_kept": self.flags_kept,
            "flags_eliminated": self.flags_eliminated,
            "credits": self.credits,
            "cross_core": self.cross_core,
            "ids_used": dict(self.ids_used),
        }
        if self.fallback:
            out["relays"] = self.relays
            out["fallback"] = self.fallback
        return out


@attrs.frozen
class SyncPlan:
    """The sync plan of a schedule: program order with flag slots, the flags, the counts.

    ``mode`` is ``"flags"`` or ``"timed"`` (a timed plan has no flags: exact cycles order
    everything). ``dependencies`` are the cross-pipe edges the flags must cover, in the order
    they were found.
    """

    mode: str
    streams: tuple[PlanStream, ...] = attrs.field(converter=tuple)
    flags: tuple[Flag, ...] = attrs.field(converter=tuple)
    dependencies: tuple[Edge, ...] = attrs.field(converter=tuple)
    stats: SyncStats


# --------------------------------------------------------------------------- layout


@attrs.define(eq=False)
class _Layout:
    """Index-based view of a schedule: pipes, program positions, times."""

    ids: list[str]
    start: list[int]
    end: list[int]
    pipes: list[tuple[int, str]]
    pipe_of: list[int]
    pos: list[int]
    seq: list[list[int]]

    @classmethod
    def of(cls, schedule: Schedule) -> _Layout:
        graph = schedule.graph
        n = len(graph.ops)
        by_id = {}
        for ot in schedule.ops:
            by_id.setdefault(ot.id, ot)
        missing = [op.id for op in graph.ops if op.id not in by_id]
        extra = sorted(set(by_id) - set(graph.op_index))
        if missing or extra or len(schedule.ops) != n:
            lines = [f"schedule has no timing for op '{m}'" for m in missing]
            lines += [f"schedule times op '{e}' that is not in the graph" for e in extra]
            if not lines:
                lines = [f"schedule has {len(schedule.ops)} op timings for {n} ops"]
            raise InputError(lines)
        times = [by_id[op.id] for op in graph.ops]
        unit_rank = {u: k for k, u in enumerate(schedule.hw.unit_names)}
        units = set(unit_rank)
        extra_units = sorted({t.unit for t in times} - units)
        for u in extra_units:
            unit_rank[u] = len(unit_rank)
        cores = sorted({t.core for t in times})
        all_units = sorted(unit_rank, key=unit_rank.__getitem__)
        pipes = [(c, u) for c in cores for u in all_units]
        pipe_index = {p: k for k, p in enumerate(pipes)}
        pipe_of = [pipe_index[(t.core, t.unit)] for t in times]
        seq: list[list[int]] = [[] for _ in pipes]
        for i in sorted(range(n), key=lambda i: (times[i].start, i)):
            seq[pipe_of[i]].append(i)
        pos = [0] * n
        for ops in seq:
            for k, i in enumerate(ops):
                pos[i] = k
        return cls(
            ids=[op.id for op in graph.ops],
            start=[t.start for t in times],
            end=[t.end for t in times],
            pipes=pipes,
            pipe_of=pipe_of,
            pos=pos,
            seq=seq,
        )


def _dependencies(schedule: Schedule, lay: _Layout) -> list[tuple[int, int, Edge]]:
    """Cross-pipe dependencies as (producer index, consumer index, edge), first reason wins.

    Raises
    ------
    InfeasibleError
        When the timetable violates an edge (the planner relies on every edge going forward
        in nominal time), one line per violated edge.
    """
    graph = schedule.graph
    idx = graph.op_index
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int, Edge]] = []
    bad: list[str] = []
    # items in unbounded spaces (GM) all sit at offset 0 and are addressed by name: they never
    # share bytes, so only bounded spaces give address-reuse edges (as the solver assumes)
    bounded = {s.name for s in schedule.hw.spaces if s.bounded}
    placed = [p for p in schedule.items if p.space in bounded]
    for e in (*graph.edges, *address_edges(graph, placed)):
        p, c = idx[e.src], idx[e.dst]
        if p == c or (p, c) in seen:
            continue
        seen.add((p, c))
        if lay.end[p] > lay.start[c]:
            bad.append(
                f"schedule violates {e.reason} edge {e.src} -> {e.dst}"
                f"{f' on item {e.item}' if e.item else ''}: {e.src} ends at cycle {lay.end[p]} "
                f"after {e.dst} starts at cycle {lay.start[c]}"
            )
            continue
        if lay.pipe_of[p] != lay.pipe_of[c]:
            out.append((p, c, e))
    if bad:
        raise InfeasibleError(bad)
    return out


# --------------------------------------------------------------------------- pass 1


def _eliminate(lay: _Layout, deps: list[tuple[int, int, Edge]]) -> list[tuple[int, int, Edge]]:
    """Keep the dependencies not implied by program order and earlier kept flags.

    Marks here: the op at position ``i`` of its pipe issues at ``2i+1`` and ends at ``2i+2``.
    """
    n, npipes = len(lay.ids), len(lay.pipes)
    incoming: dict[int, list[tuple[int, Edge]]] = {}
    is_producer = [False] * n
    for p, c, e in deps:
        incoming.setdefault(c, []).append((p, e))
        is_producer[p] = True
    end_clock: dict[int, np.ndarray] = {}
    chain = [np.zeros(npipes, dtype=np.int64) for _ in range(npipes)]
    kept: list[tuple[int, int, Edge]] = []
    for c in sorted(range(n), key=lambda i: (lay.start[i], i)):
        q, i = lay.pipe_of[c], lay.pos[c]
        clock = chain[q].copy()
        clock[q] = 2 * i + 1
        # latest-ending first: a producer that happens before another candidate is then
        # always found implied, so what is kept is exactly the maximal producers
        for p, e in sorted(incoming.get(c, ()), key=lambda pe: (-lay.end[pe[0]], lay.pipe_of[pe[0]])):
            if clock[lay.pipe_of[p]] >= 2 * lay.pos[p] + 2:
                continue
            kept.append((p, c, e))
            np.maximum(clock, end_clock[p], out=clock)
        clock[q] = 2 * i + 2
        chain[q] = clock
        if is_producer[c]:
            end_clock[c] = clock
    return kept


# --------------------------------------------------------------------------- pass 2


@attrs.define(eq=False)
class _Draft:
    """A flag while ids are being assigned (indices, not names)."""

    kind: str
    reason: str
    set_op: int
    set_side: str
    wait_op: int
    wait_side: str
    item: str
    event: int = -1


@attrs.define(eq=False)
class _Busy:
    """An id whose SET is placed and whose WAIT is not passed yet."""

    flag: int


@attrs.define(eq=False)
class _LastWait:
    """The latest WAIT on an id: its pipe, mark and nominal time, and its flag (a credit SET
    that relies on it goes right behind it)."""

    pipe: int
    mark: int
    time: int
    flag: int


class _WaitAt:
    """A WAIT about to get an id: its pipe, and (computed on demand) a clock of what surely
    happens before it other than its own SET."""

    def __init__(self, pipe: int, floor: Callable[[], np.ndarray]) -> None:
        self.pipe = pipe
        self._floor = floor
        self._clock: np.ndarray | None = None

    def after(self, last: _LastWait) -> bool:
        """Whether ``last`` happens before this WAIT without its flag."""
        if last.pipe == self.pipe:
            return True  # program order: this WAIT is placed behind every passed point
        if self._clock is None:
            self._clock = self._floor()
        return bool(self._clock[last.pipe] >= last.mark)


class _IdAssigner:
    """Pass 2: event ids and credits, in a Kahn traversal of the pipes' wait points (phase 0:
    the WAITs before an op, one by one) and set points (phase 1: what follows an op), in
    nominal-time order.

    Marks count a pipe's points in program order: each WAIT, each op's end, each credit WAIT.
    ``clock[q] >= m`` says point ``m`` of pipe ``q`` happens before.

    Per id pool the state of every id is: unused (None), set but not yet waited (busy), or
    free with its last WAIT. After an op, the SETs that have an eligible id are placed at once;
    for the others the next op's WAITs are passed first when that is free (see
    :meth:`free_lookahead`); then one that needs a credit gets a credit WAIT right before it,
    whose SET goes right behind the earlier WAIT it relies on; one for which no passed WAIT can
    send a credit is parked until a WAIT on its pool (or on the credit's reverse pool) is
    passed -- the program would block there too -- while the SETs already placed go ahead. The
    WAITs before an op are passed in the order their SETs fire, each as soon as its SET is
    placed.
    """

    def __init__(self, schedule: Schedule, lay: _Layout, kept: list[tuple[int, int, Edge]]) -> None:
        self.lay = lay
        self.intra_budget = schedule.hw.sync.event_ids
        self.cross_budget = schedule.hw.sync.cross_core_event_ids
        self.drafts = [
            _Draft(_kind(lay, p, c), e.reason, p, "after", c, "before", e.item) for p, c, e in kept
        ]
        self.in_flags: dict[int, list[int]] = {}
        self.out_flags: dict[int, list[int]] = {}
        for f, d in enumerate(self.drafts):
            self.in_flags.setdefault(d.wait_op, []).append(f)
            self.out_flags.setdefault(d.set_op, []).append(f)
        for lst in self.in_flags.values():
            lst.sort(key=lambda f: (lay.end[self.drafts[f].set_op], lay.pipe_of[self.drafts[f].set_op], f))
        for lst in self.out_flags.values():
            lst.sort(key=lambda f: (lay.pipe_of[self.drafts[f].wait_op], f))
        self.state: dict[tuple, list] = {}
        sync = schedule.hw.sync
        self.latency = {"flag": sync.flag_latency, "cross": sync.cross_core_latency}
        npipes = len(lay.pipes)
        self.mark = [0] * npipes
        # nominal time per pipe and of every placed SET: where a SET may be moved for free
        self.now = [0] * npipes
        self.set_time: dict[int, int] = {}
        self.cur = [np.zeros(npipes, dtype=np.int64) for _ in range(npipes)]
        # the clock each SET carries, and the clock right behind each WAIT
        self.set_clock: dict[int, np.ndarray] = {}
        self.wait_clock: dict[int, np.ndarray] = {}
        # program text being built: what follows each op (or, when the SETs after an op wait
        # for the next op's WAITs, what comes between those WAITs and the next op), and the
        # credit SETs right behind each WAIT
        self.after: dict[int, list[tuple[str, int]]] = {}
        self.lead: dict[int, list[tuple[str, int]]] = {}
        self.out: dict[int, list[tuple[str, int]]] = {}
        self.early: dict[int, int] = {}  # op -> next op whose WAITs its SETs follow
        self.behind: dict[int, list[int]] = {}
        self.heap: list[tuple[int, int, int, int]] = []
        self.waits_done: dict[int, int] = {}  # op -> how many of its WAITs are passed
        self.wait_parked: dict[int, int] = {}  # flag whose SET is missing -> op waiting for it
        # set points in progress: their clock so far and the flags still to place
        self.partial: dict[int, tuple[np.ndarray, list[int]]] = {}
        self.parked: set[int] = set()
        self.wake: dict[tuple, list[int]] = {}

    # ---------------------------------------------------------------- pools
    def key(self, kind: str, set_op: int, wait_op: int) -> tuple:
        lay = self.lay
        sp, wp = lay.pipes[lay.pipe_of[set_op]], lay.pipes[lay.pipe_of[wait_op]]
        if kind == "cross":
            return ("cross", sp[0], wp[0])
        return ("flag", sp[0], sp[1], wp[1])

    @staticmethod
    def reverse(key: tuple) -> tuple:
        return ("cross", key[2], key[1]) if key[0] == "cross" else ("flag", key[1], key[3], key[2])

    def slots(self, key: tuple) -> list:
        if key not in self.state:
            self.state[key] = [None] * (self.cross_budget if key[0] == "cross" else self.intra_budget)
        return self.state[key]

    def eligible(self, key: tuple, clock: np.ndarray, wait: _WaitAt) -> int:
        """Lowest id whose last WAIT happens before a SET with ``clock``; -1 if none.

        The last WAIT must also happen before the new WAIT (``wait``) by other means than the
        new flag, or the new WAIT could consume the previous SET. Intra-core pools wait on one
        pipe, where program order does it; a cross-core pool serves every pipe of its core.
        """
        for k, st in enumerate(self.slots(key)):
            if st is None or (isinstance(st, _LastWait) and clock[st.pipe] >= st.mark and wait.after(st)):
                return k
        return -1

    def wait_at(self, f: int) -> _WaitAt:
        """Where the WAIT of dependency flag ``f`` will be: what reaches it before its own SET is
        at least the pipe's progress so far and the SETs of the WAITs ahead of it (placed ones)."""

        def floor() -> np.ndarray:
            c = self.drafts[f].wait_op
            clock = self.cur[self.lay.pipe_of[c]].copy()
            for g in self.in_flags[c]:
                if g == f:
                    break
                if g in self.set_clock:
                    np.maximum(clock, self.set_clock[g], out=clock)
            return clock

        return _WaitAt(self.lay.pipe_of[self.drafts[f].wait_op], floor)

    def passed(self, key: tuple, k: int, last: _LastWait) -> None:
        """Record the latest WAIT on id ``k`` of ``key`` and wake set points parked on the pool."""
        self.slots(key)[k] = last
        for x in self.wake.pop(key, ()):
            if x in self.parked:
                self.parked.discard(x)
                heapq.heappush(self.heap, (max(self.lay.end[x], last.time), 1, self.lay.pipe_of[x], x))

    # ---------------------------------------------------------------- traversal
    def run(self, tick: Callable[[int], None] | None = None) -> list[_Draft]:
        """Assign ids and credits; ``tick(n)`` is told of every ``n`` ops finished."""
        lay = self.lay
        for seq in lay.seq:
            if seq:
                heapq.heappush(self.heap, (lay.start[seq[0]], 0, lay.pipe_of[seq[0]], seq[0]))
        done = 0
        while self.heap:
            _, phase, _, x = heapq.heappop(self.heap)
            if phase == 0:
                self.wait_point(x)
            elif self.set_point(x):
                done += 1
                if tick is not None and done % 1024 == 0:
                    tick(1024)
        if self.parked:
            self.fail(min(self.parked))
        if done != len(lay.ids):
            stuck = sorted(lay.ids[x] for x in self.wait_parked.values())[:5]
            raise InfeasibleError(
                f"sync plan has a cycle: ops {', '.join(stuck)} wait for each other (the timetable "
                f"contradicts its dependencies)"
            )
        return self.drafts

    def wait_point(self, x: int) -> None:
        """Pass the WAITs before ``x`` whose SETs are placed; when all are, ``x`` may issue."""
        if self.pass_waits(x):
            heapq.heappush(self.heap, (self.lay.end[x], 1, self.lay.pipe_of[x], x))

    def pass_waits(self, x: int) -> bool:
        lay = self.lay
        q = lay.pipe_of[x]
        flags = self.in_flags.get(x, ())
        n = self.waits_done.get(x, 0)
        while n < len(flags):
            f = flags[n]
            if f not in self.set_clock:
                self.wait_parked[f] = x
                self.waits_done[x] = n
                return False
            d = self.drafts[f]
            clock = np.maximum(self.cur[q], self.set_clock[f])
            self.mark[q] += 1
            clock[q] = self.mark[q]
            self.cur[q] = clock
            self.wait_clock[f] = clock
            self.now[q] = max(self.now[q], self.set_time[f] + self.latency[d.kind])
            last = _LastWait(q, self.mark[q], self.now[q], f)
            self.passed(self.key(d.kind, d.set_op, x), d.event, last)
            n += 1
        self.waits_done[x] = n
        self.now[q] = max(self.now[q], lay.start[x])
        return True

    def free_lookahead(self, x: int, nxt: int) -> bool:
        """Whether the WAITs before ``nxt`` can be passed before the remaining SETs after ``x``:
        their SETs are placed and visible by the time ``x`` ends, so the SETs lose no nominal
        time and gain what those WAITs bring (an id may become reusable). Used only for a SET
        that has no eligible id, since it couples that SET to the WAITs under jitter."""
        end = self.lay.end[x]
        for f in self.in_flags.get(nxt, ()):
            if f not in self.set_time or self.set_time[f] + self.latency[self.drafts[f].kind] > end:
                return False
        return True

    def set_point(self, x: int) -> bool:
        """Place the SETs after ``x``; False while one of them is parked for want of an id."""
        lay = self.lay
        q = lay.pipe_of[x]
        if x in self.partial:
            clock, pending = self.partial.pop(x)
        else:
            self.mark[q] += 1  # x has finished
            self.cur[q] = self.cur[q].copy()
            self.cur[q][q] = self.mark[q]
            self.now[q] = max(self.now[q], lay.end[x])
            pending = list(self.out_flags.get(x, ()))
            self.out[x] = self.after[x] = []
            clock = self.cur[q].copy()
        nxt = lay.seq[q][lay.pos[x] + 1] if lay.pos[x] + 1 < len(lay.seq[q]) else -1
        while pending:
            placed = False
            for f in list(pending):
                d = self.drafts[f]
                key = self.key(d.kind, x, d.wait_op)
                k = self.eligible(key, clock, self.wait_at(f))
                if k >= 0:
                    self.place(x, f, key, k, clock)
                    pending.remove(f)
                    placed = True
            if placed or not pending:
                continue
            if x not in self.early and nxt >= 0 and self.free_lookahead(x, nxt):
                # first try passing the next op's WAITs (free in nominal time), then a credit
                self.cur[q] = clock
                self.pass_waits(nxt)
                clock = self.cur[q].copy()
                self.early[x] = nxt
                self.out[x] = self.lead[nxt] = []
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
                self.partial[x] = (clock, pending)
                self.parked.add(x)
                for f in pending:
                    d = self.drafts[f]
                    key = self.key(d.kind, x, d.wait_op)
                    for pool in (key, self.reverse(key)):
                        self.wake.setdefault(pool, []).append(x)
                return False
        self.cur[q] = clock
        if x in self.early:
            nxt = self.early[x]
            heapq.heappush(self.heap, (lay.end[nxt], 1, q, nxt))
        elif lay.pos[x] + 1 < len(lay.seq[q]):
            nxt = lay.seq[q][lay.pos[x] + 1]
            heapq.heappush(self.heap, (lay.start[nxt], 0, q, nxt))
        return True

    def place(self, x: int, f: int, key: tuple, k: int, clock: np.ndarray) -> None:
        self.drafts[f].event = k
        self.slots(key)[k] = _Busy(f)
        self.set_clock[f] = clock.copy()
        self.set_time[f] = self.now[self.lay.pipe_of[x]]
        self.out[x].append(("set", f))
        c = self.wait_parked.pop(f, None)
        if c is not None:
            heapq.heappush(self.heap, (self.lay.start[c], 0, self.lay.pipe_of[c], c))

    def credit(self, key: tuple, x: int, clock: np.ndarray, wait: _WaitAt) -> int:
        """Free an id of ``key`` for a SET after ``x`` with a credit flag; the id or -1.

        The candidates are the ids whose last WAIT has been passed and happens before ``wait``
        (see :meth:`eligible`), earliest in nominal time first. The credit SET goes right behind
        that WAIT and needs an id on the reverse pool, chosen by the same rule without further
        credits. Its source was processed before ``x``'s set point, so it cannot close a cycle.
        On success ``clock`` has the credit joined in.
        """
        lay = self.lay
        q = lay.pipe_of[x]
        cands = sorted(
            (st.time, k, st)
            for k, st in enumerate(self.slots(key))
            if isinstance(st, _LastWait) and wait.after(st)
        )
        for _, k, st in cands:
            src_clock = self.wait_clock[st.flag]
            src = self.drafts[st.flag]
            # the op the source WAIT is anchored to: before a consumer, or after a producer
            src_op = src.wait_op
            kind = _kind(lay, src_op, x)
            rkey = self.key(kind, src_op, x)
            # the credit WAIT goes here, after x: the clock so far reaches it
            m = self.eligible(rkey, src_clock, _WaitAt(q, lambda: clock))
            if m < 0:
                continue
            c = len(self.drafts)
            self.drafts.append(_Draft(kind, "credit", src_op, src.wait_side, x, "after", "", m))
            self.behind.setdefault(st.flag, []).append(c)
            self.set_clock[c] = src_clock
            self.set_time[c] = st.time
            self.out[x].append(("wait", c))
            self.mark[q] += 1
            np.maximum(clock, src_clock, out=clock)
            clock[q] = self.mark[q]
            self.wait_clock[c] = clock.copy()
            self.now[q] = max(self.now[q], st.time + self.latency[kind])
            self.passed(rkey, m, _LastWait(q, self.mark[q], self.now[q], c))
            return k
        return -1

    def fail(self, x: int) -> None:
        lay = self.lay
        f = self.partial[x][1][0]
        need = self.drafts[f]
        key = self.key(need.kind, x, need.wait_op)
        sp, wp = lay.pipes[lay.pipe_of[x]], lay.pipes[lay.pipe_of[need.wait_op]]
        if key[0] == "cross":
            pair, budget = f"cores {sp[0]}->{wp[0]}", self.cross_budget
        else:
            pair, budget = f"core {sp[0]}: pipes {sp[1]}->{wp[1]}", self.intra_budget
        flag = f"{lay.ids[x]} -> {lay.ids[need.wait_op]}"
        what = f"{pair}: no event id for the flag {flag} (SET at cycle {lay.end[x]})"
        if not budget:
            # no plan can carry this flag: a fallback would not help either
            raise InfeasibleError(f"{what}: the hardware has no event ids for it (budget 0)")
        holders = []
        for k, st in enumerate(self.slots(key)):
            h = self.drafts[st.flag]
            state = "set, its WAIT not passed" if isinstance(st, _Busy) else "its WAIT not ordered before"
            holders.append(f"id {k}: {lay.ids[h.set_op]} -> {lay.ids[h.wait_op]} ({state})")
        raise EventBudgetError(
            f"{what}: budget {budget}, all ids held, and no credit can free one without a deadlock "
            f"or a WAIT consuming the wrong SET; {'; '.join(holders)}"
        )

    # ---------------------------------------------------------------- text
    def streams(self) -> list[PlanStream]:
        """The planned streams: per op its WAITs, the SETs of the op before when they waited for
        those WAITs, the op, then what follows it; credit SETs right behind the WAIT they rely
        on."""
        lay = self.lay
        out = []
        for q, (core, unit) in enumerate(lay.pipes):
            slots: list[tuple[str, str | int]] = []
            for x in lay.seq[q]:
                for f in self.in_flags.get(x, ()):
                    slots.append(("wait", f))
                    slots += [("set", c) for c in self.behind.get(f, ())]
                for what, f in (*self.lead.get(x, ()), ("op", lay.ids[x]), *self.after.get(x, ())):
                    slots.append((what, f))
                    if what == "wait":
                        slots += [("set", c) for c in self.behind.get(f, ())]
            out.append(PlanStream(core, unit, slots))
        return out


def _kind(lay: _Layout, a: int, b: int) -> str:
    return "cross" if lay.pipes[lay.pipe_of[a]][0] != lay.pipes[lay.pipe_of[b]][0] else "flag"


def _ids_used(lay: _Layout, flags: Sequence[Flag]) -> tuple[tuple[str, int], ...]:
    used: dict[tuple, set[int]] = {}
    for f in flags:
        used.setdefault(f.id_key, set()).add(f.event)
    pipe_rank = {p: k for k, p in enumerate(lay.pipes)}

    def rank(key: tuple) -> tuple:
        if key[0] == "cross":
            return (1, key[1], key[2])
        return (0, pipe_rank[(key[1], key[2])], pipe_rank[(key[1], key[3])])

    out = []
    for key in sorted(used, key=rank):
        label = f"core{key[1]}->core{key[2]}" if key[0] == "cross" else f"c{key[1]} {key[2]}->{key[3]}"
        out.append((label, len(used[key])))
    return tuple(out)


def plan_sync(schedule: Schedule, progress: Progress | None = None) -> SyncPlan:
    """Plan the flags of ``schedule``: program order, kept flags with ids, credits, counts.

    Parameters
    ----------
    schedule : Schedule
        A timetable whose every dependency (``graph.edges`` plus the address-reuse edges of its
        placements) goes forward in time: ``end(producer) <= start(consumer)``.
    progress : Progress, optional
        Shows how many ops have their flags placed.

    Returns
    -------
    SyncPlan
        Per (core, unit) the ops in (start, graph index) order with SET/WAIT slots, the flags
        with their ids, and the counts. Every WAIT has its SET, every SET its WAIT, so no flag
        is left set at the end.

    When an id pool runs out and no credit can free an id without moving ops, the chained plan
    of :mod:`staticsched.emit.baton` is used instead: it needs one id per pool and delays
    consumers (the program's nominal replay re-times them); ``stats.fallback`` says why.

    Raises
    ------
    InfeasibleError
        When the timetable violates a dependency, or a pool the plan needs has no id at all
        (a budget of 0; the solver's precheck reports dependencies that need one first).
    """
    lay = _Layout.of(schedule)
    deps = _dependencies(schedule, lay)
    kept = _eliminate(lay, deps)
    assigner = _IdAssigner(schedule, lay, kept)
    try:
        with (progress or silent()).counter("placing flags", len(lay.ids)) as count:
            drafts = assigner.run(count.update)
    except EventBudgetError as exc:
        from staticsched.emit.baton import plan_baton

        plan = plan_baton(lay, deps, kept, exc.problems[0])
        _check_budgets(schedule, plan)
        return plan
    flags = tuple(
        Flag(
            index=f,
            kind=d.kind,
            reason=d.reason,
            set_core=lay.pipes[lay.pipe_of[d.set_op]][0],
            set_unit=lay.pipes[lay.pipe_of[d.set_op]][1],
            set_op=lay.ids[d.set_op],
            set_side=d.set_side,
            wait_core=lay.pipes[lay.pipe_of[d.wait_op]][0],
            wait_unit=lay.pipes[lay.pipe_of[d.wait_op]][1],
            wait_op=lay.ids[d.wait_op],
            wait_side=d.wait_side,
            event=d.event,
            item=d.item,
        )
        for f, d in enumerate(drafts)
    )
    credits = sum(1 for f in flags if f.reason == "credit")
    stats = SyncStats(
        dependencies=len(deps),
        flags_naive=len(deps),
        flags_kept=len(kept),
        flags_eliminated=len(deps) - len(kept),
        credits=credits,
        cross_core=sum(1 for f in flags if f.kind == "cross"),
        ids_used=_ids_used(lay, flags),
    )
    return SyncPlan("flags", assigner.streams(), flags, [e for _, _, e in deps], stats)


def _check_budgets(schedule: Schedule, plan: SyncPlan) -> None:
    """Every pool ``plan`` uses has at least one id (the chained plan uses id 0 everywhere)."""
    sync = schedule.hw.sync
    empty = sorted({
        (f.kind, f.set_core, f.set_unit, f.wait_core, f.wait_unit)
        for f in plan.flags
        if (sync.cross_core_event_ids if f.kind == "cross" else sync.event_ids) == 0
    })
    lines = []
    for kind, sc, su, wc, wu in empty:
        if kind == "cross":
            lines.append(f"ordering the flags of cores {sc} and {wc} needs a cross-core flag "
                         f"core {sc} -> core {wc}, but sync.cross_core_event_ids = 0")
        else:
            lines.append(f"ordering the flags of core {sc} needs a flag {su} -> {wu}, but "
                         "sync.event_ids = 0")
    if lines:
        raise InfeasibleError(lines)


def plan_timed(schedule: Schedule) -> SyncPlan:
    """The plan of a timed program: program order only, no flags (exact cycles order everything).

    The dependency count is still reported; every dependency counts as eliminated.
    """
    lay = _Layout.of(schedule)
    deps = _dependencies(schedule, lay)
    streams = [
        PlanStream(core, unit, [("op", lay.ids[x]) for x in lay.seq[q]])
        for q, (core, unit) in enumerate(lay.pipes)
    ]
    stats = SyncStats(len(deps), len(deps), 0, len(deps), 0, 0, ())
    return SyncPlan("timed", streams, (), [e for _, _, e in deps], stats)
