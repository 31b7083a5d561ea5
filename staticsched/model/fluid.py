"""Shared links as the hardware runs them in a flags program: max-min fair sharing.

No flag orders two cores' transfers for bandwidth; the memory system shares a link among
whatever is moving (DESIGN §2, docs/program-format.md "Shared links"). A transfer on a link
issues at an integer cycle ``s``; its overhead moves nothing; from ``d = s + overhead`` it is
*active* and drains ``bytes * RATE_DENOM`` work units. The active transfers get the max-min
fair rates of progressive filling over the links they use, each capped at its path's rate (in
units of ``1/RATE_DENOM`` B/cycle). Shares change only at whole cycles: when transfers become
active, and at the end of the cycle in which transfers finish their work (a transfer holds its
share until its end, the first whole cycle by which it has moved its work). Between those
cycles each drains linearly at an exact rational rate.

Transfers with the same cap and links always get the same rate, so they are kept as one
*class*: a service clock (the work each member has moved since the class began) and a heap of
its members' targets on that clock. An event then costs the number of classes, not of active
transfers; exact rational times, whose denominators grew without bound when shares changed at
rational instants, no longer arise (docs/design.md, refinement 33).

This is the producers' reading of that model: the emitter times programs with it and the
solver compares plans by it (:func:`replay_timetable`). The verifier has its own
(:mod:`staticsched.verify.fluid`), and the tests hold both to an event-by-event oracle.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable, Sequence
from fractions import Fraction

import attrs

Rate = int | Fraction


@attrs.frozen
class FluidTransfer:
    """What sharing needs of one transfer: its work (bytes times ``RATE_DENOM``), its overhead
    cycles, its path's rate cap (rate units) and the links it uses (indices)."""

    work: int
    overhead: int
    cap: int
    links: tuple[int, ...] = attrs.field(converter=tuple)


class _Class:
    """The active transfers of one (cap, links): one rate for all, so each member is a target
    on the class's service clock ``served`` (work per member moved by cycle ``since``)."""

    __slots__ = ("cap", "end", "links", "members", "rate", "served", "since")

    def __init__(self, cap: int, links: tuple[int, ...]) -> None:
        self.cap, self.links = cap, links
        self.members: list[tuple[Rate, int, Hashable]] = []  # (target, seq, key)
        self.rate: Rate = 0
        self.served: Rate = 0
        self.since = 0
        self.end: int | None = None

    def catch_up(self, t: int) -> None:
        if self.rate:
            self.served += self.rate * (t - self.since)
        self.since = t

    def retime(self) -> None:
        if not self.members:
            self.end = None
            return
        # the first whole cycle by which the nearest target is reached at the current rate
        self.end = self.since - (-(self.members[0][0] - self.served) // self.rate)


class FluidLinks:
    """The links of one replay.

    Use: :meth:`issue` a transfer when its pipe issues it; before handling anything that
    happens at cycle ``t``, take :meth:`completion` with ``horizon = t`` until it returns None.
    Completions come in time order (at one cycle, in issue order); transfers issued later than
    ``horizon`` cannot change them.
    """

    def __init__(self, capacities: Sequence[int]) -> None:
        self.capacity = list(capacities)
        self.pending: list[tuple[int, int, Hashable]] = []  # (data start, seq, key)
        self.waiting: dict[Hashable, FluidTransfer] = {}
        self.classes: dict[tuple[int, tuple[int, ...]], _Class] = {}
        self.empty: list[tuple[int, int, Hashable]] = []  # transfers of no work: (end, seq, key)
        self.ready: deque[tuple[Hashable, int]] = deque()
        self.now = 0
        self._seq = 0
        # the next event's cycle (None: no event) while ``_known``; the replay asks at every
        # instruction, the state changes only at an issue and an event
        self._next: int | None = None
        self._known = True

    def issue(self, key: Hashable, x: FluidTransfer, cycle: int) -> None:
        """Transfer ``key`` issues at ``cycle``; its data phase begins after its overhead."""
        self._seq += 1
        self.waiting[key] = x
        heapq.heappush(self.pending, (cycle + x.overhead, self._seq, key))
        if self._known and self._next is not None:
            self._next = min(self._next, cycle + x.overhead)
        else:
            self._known = False

    def completion(self, horizon: int) -> tuple[Hashable, int] | None:
        """The next transfer to finish, and its end cycle, if that is at most ``horizon``."""
        while not self.ready:
            if not self._known:
                self._next, self._known = self._next_event(), True
            t = self._next
            if t is None or t > horizon:
                return None
            self._known = False
            self._advance(t)
        return self.ready.popleft()

    def busy(self) -> bool:
        return bool(self.ready or self.pending or self.empty
                    or any(c.members for c in self.classes.values()))

    # ------------------------------------------------------------------ internals
    def _next_event(self) -> int | None:
        times = [c.end for c in self.classes.values() if c.end is not None]
        if self.pending:
            times.append(self.pending[0][0])
        if self.empty:
            times.append(self.empty[0][0])
        return min(times, default=None)

    def _advance(self, t: int) -> None:
        self.now = t
        done: list[tuple[int, Hashable]] = []
        for c in self.classes.values():
            if c.end == t:
                c.catch_up(t)
                while c.members and c.members[0][0] <= c.served:
                    _, seq, key = heapq.heappop(c.members)
                    done.append((seq, key))
        while self.empty and self.empty[0][0] == t:
            _, seq, key = heapq.heappop(self.empty)
            done.append((seq, key))
        while self.pending and self.pending[0][0] == t:
            _, seq, key = heapq.heappop(self.pending)
            x = self.waiting.pop(key)
            if not x.work:
                # nothing to move: it holds no share and ends a cycle after its data start
                heapq.heappush(self.empty, (t + 1, seq, key))
                continue
            c = self.classes.get((x.cap, x.links))
            if c is None:
                c = self.classes[x.cap, x.links] = _Class(x.cap, x.links)
            c.catch_up(t)
            heapq.heappush(c.members, (c.served + x.work, seq, key))
        done.sort()
        self.ready.extend((key, t) for _, key in done)
        self._rerate(t)

    def _rerate(self, t: int) -> None:
        live = [c for c in self.classes.values() if c.members]
        rates = fair_rates(self.capacity, [(c.cap, c.links) for c in live], [len(c.members) for c in live])
        for c, r in zip(live, rates, strict=True):
            if r != c.rate:
                c.catch_up(t)
                c.rate = r
        for c in self.classes.values():
            if not c.members:
                c.catch_up(t)
                c.rate = 0
            c.retime()


def fair_rates(capacity: Sequence[int], demands: Sequence[tuple[int, tuple[int, ...]]],
               counts: Sequence[int] | None = None) -> list[Rate]:
    """Max-min fair rates by progressive filling: ``demands`` are ``(cap, links)`` per transfer,
    or per class of ``counts`` identical transfers (the rate returned is each member's).

    Every transfer not yet fixed rises at the same pace until it reaches its cap or one of its
    links is full; those are fixed, and the rest go on. Exact (integers and fractions).
    """
    n = len(demands)
    many = list(counts) if counts is not None else [1] * n
    load = [0] * len(capacity)
    for (cap, links), m in zip(demands, many, strict=True):
        for k in links:
            load[k] += cap * m
    if all(load[k] <= capacity[k] for k in range(len(capacity))):
        return [cap for cap, _ in demands]
    rate: list[Rate] = [0] * n
    left: list[Rate] = list(capacity)
    todo = set(range(n))
    while todo:
        users = [0] * len(capacity)
        for i in todo:
            for k in demands[i][1]:
                users[k] += many[i]
        # a link no transfer left uses offers no limit
        share = [_div(left[k], users[k]) if users[k] else math.inf for k in range(len(capacity))]
        level = min(min([demands[i][0], *(share[k] for k in demands[i][1])]) for i in todo)
        done = [i for i in todo
                if demands[i][0] <= level or any(share[k] <= level for k in demands[i][1])]
        assert not isinstance(level, float)  # some demand has a cap, so the level is exact
        for i in done:
            rate[i] = level
            todo.discard(i)
            for k in demands[i][1]:
                left[k] -= level * many[i]
    return rate


def _div(a: Rate, b: int) -> Rate:
    q = Fraction(a) / b
    return q.numerator if q.denominator == 1 else q


def replay_timetable(
    dur: Sequence[int],
    pipe_orders: Sequence[Sequence[int]],
    edges: Sequence[tuple[int, int, int]],
    fluid: dict[int, FluidTransfer],
    capacities: Sequence[int],
) -> tuple[list[int], list[int]]:
    """Starts and ends of ops run as a flags program runs them: each pipe in its order, each op
    once its pipe is free and every edge ``(a, b, latency)`` into it has ``a`` ended
    ``latency`` cycles before; the ``fluid`` ops (keys: op index) share the links.

    Without fluid ops this is the longest-path timing of a semi-active timetable; with them it
    is what the flags program of a timetable with these orders and edges does (flags that the
    sync planner drops are implied, so they change nothing).
    """
    n = len(dur)
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    need = [0] * n
    for a, b, lat in edges:
        succ[a].append((b, lat))
        need[b] += 1
    for order in pipe_orders:
        for a, b in itertools.pairwise(order):
            succ[a].append((b, 0))
            need[b] += 1
    est = [0] * n
    start = [-1] * n
    end = [-1] * n
    # (cycle, 0 for a start or 1 for an end, op)
    heap: list[tuple[int, int, int]] = [(0, 0, i) for i in range(n) if need[i] == 0]
    heapq.heapify(heap)
    links = FluidLinks(capacities)
    never = 1 << 62

    def finished(i: int, e: int) -> None:
        end[i] = e
        for j, lat in succ[i]:
            est[j] = max(est[j], e + lat)
            need[j] -= 1
            if need[j] == 0:
                heapq.heappush(heap, (est[j], 0, j))

    while heap or links.busy():
        done = links.completion(heap[0][0] if heap else never)
        if done is not None:
            key, e = done
            finished(int(key), e)  # type: ignore[call-overload]
            continue
        if not heap:
            break
        t, what, i = heapq.heappop(heap)
        if what:
            finished(i, t)
            continue
        start[i] = t
        x = fluid.get(i)
        if x is None:
            heapq.heappush(heap, (t + dur[i], 1, i))
        else:
            links.issue(i, x, t)
    if any(s < 0 for s in start):
        raise ValueError("the pipe orders contradict the edges")
    return start, end
