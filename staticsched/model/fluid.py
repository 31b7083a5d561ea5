"""Shared links as the hardware runs them in a flags program: max-min fair sharing.

No flag orders two cores' transfers for bandwidth; the memory system shares a link among
whatever is moving (DESIGN §2, docs/program-format.md "Shared links"). A transfer on a link
issues at an integer cycle ``s``; its overhead moves nothing; from ``d = s + overhead`` it is
*active* and drains ``bytes * RATE_DENOM`` work units. At every moment the active transfers
get the max-min fair rates of progressive filling over the links they use, each capped at its
path's rate (in units of ``1/RATE_DENOM`` B/cycle). Rates change only when a transfer becomes
active or drains, so between those events each drains linearly; a transfer drains at a
rational instant ``tau`` and its pipe is free at ``max(ceil(tau), d + 1)``.

This is the producers' reading of that model: the emitter times programs with it and the
solver compares plans by it (:func:`replay_timetable`). The verifier has its own
(:mod:`staticsched.verify.fluid`), and the tests hold both to an event-by-event oracle.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable, Sequence
from fractions import Fraction

import attrs

Time = int | Fraction


@attrs.frozen
class FluidTransfer:
    """What sharing needs of one transfer: its work (bytes times ``RATE_DENOM``), its overhead
    cycles, its path's rate cap (rate units) and the links it uses (indices)."""

    work: int
    overhead: int
    cap: int
    links: tuple[int, ...] = attrs.field(converter=tuple)


class _Active:
    __slots__ = ("cap", "links", "rate", "rem", "since", "start", "version")

    def __init__(self, x: FluidTransfer, start: int) -> None:
        self.cap = x.cap
        self.links = x.links
        self.rate: Time = 0
        self.rem: Time = x.work
        self.since: Time = start
        self.start = start
        self.version = 0


class FluidLinks:
    """The links of one replay.

    Use: :meth:`issue` a transfer when its pipe issues it; before handling anything that
    happens at cycle ``t``, take :meth:`completion` with ``horizon = t`` until it returns None.
    Completions come in time order; transfers issued later than ``horizon`` cannot change them.
    """

    def __init__(self, capacities: Sequence[int]) -> None:
        self.capacity = list(capacities)
        self.pending: list[tuple[int, int, Hashable]] = []  # (data start, seq, key)
        self.waiting: dict[Hashable, FluidTransfer] = {}
        self.active: dict[Hashable, _Active] = {}
        self.drains: list[tuple[Time, int, int, Hashable]] = []  # (instant, version, seq, key)
        self.now: Time = 0
        self._seq = 0

    def issue(self, key: Hashable, x: FluidTransfer, cycle: int) -> None:
        """Transfer ``key`` issues at ``cycle``; its data phase begins after its overhead."""
        self._seq += 1
        self.waiting[key] = x
        heapq.heappush(self.pending, (cycle + x.overhead, self._seq, key))

    def completion(self, horizon: int) -> tuple[Hashable, int] | None:
        """The next transfer to finish, and its end cycle, if that is at most ``horizon``."""
        while True:
            first = self._first_drain()
            if self.pending:
                a = self.pending[0][0]
                if a <= horizon and (first is None or a < first[0]):
                    self._activate(a)
                    continue
            break
        if first is None:
            return None
        tau, key = first
        a = self.active[key]
        end = max(math.ceil(tau), a.start + 1)
        if end > horizon:
            return None
        heapq.heappop(self.drains)
        self.now = tau
        del self.active[key]
        self._rerate()
        return key, end

    def busy(self) -> bool:
        return bool(self.active or self.pending)

    # ------------------------------------------------------------------ internals
    def _first_drain(self) -> tuple[Time, Hashable] | None:
        while self.drains:
            tau, version, _, key = self.drains[0]
            a = self.active.get(key)
            if a is not None and a.version == version:
                return tau, key
            heapq.heappop(self.drains)
        return None

    def _activate(self, t: int) -> None:
        self.now = t
        while self.pending and self.pending[0][0] == t:
            _, _, key = heapq.heappop(self.pending)
            self.active[key] = _Active(self.waiting.pop(key), t)
        self._rerate()

    def _rerate(self) -> None:
        rates = fair_rates(self.capacity, [(a.cap, a.links) for a in self.active.values()])
        now = self.now
        for (key, a), r in zip(self.active.items(), rates, strict=True):
            if r == a.rate:
                continue
            if a.rate:
                a.rem -= a.rate * (now - a.since)
            a.since, a.rate = now, r
            a.version += 1
            self._seq += 1
            heapq.heappush(self.drains, (now + _div(a.rem, r), a.version, self._seq, key))


def _div(a: Time, b: Time) -> Time:
    if type(a) is int and type(b) is int:
        # the common case, integers: a Fraction only when they do not divide (exact either way)
        q, r = divmod(a, b)
        return q if r == 0 else Fraction(a, b)
    q = Fraction(a) / b
    return q.numerator if q.denominator == 1 else q


def fair_rates(capacity: Sequence[int], demands: Sequence[tuple[int, tuple[int, ...]]]) -> list[Time]:
    """Max-min fair rates by progressive filling: ``demands`` are ``(cap, links)`` per transfer.

    Every transfer not yet fixed rises at the same pace until it reaches its cap or one of its
    links is full; those are fixed, and the rest go on. Exact (integers and fractions).
    """
    load = [0] * len(capacity)
    for cap, links in demands:
        for k in links:
            load[k] += cap
    if all(load[k] <= capacity[k] for k in range(len(capacity))):
        return [cap for cap, _ in demands]
    if all(len(links) == 1 for _, links in demands):
        return _separate_links(capacity, demands)
    return _progressive(capacity, demands)


def _progressive(capacity: Sequence[int], demands: Sequence[tuple[int, tuple[int, ...]]]) -> list[Time]:
    """Progressive filling over any links (see :func:`fair_rates`)."""
    n = len(demands)
    rate: list[Time] = [0] * n
    left: list[Time] = list(capacity)
    todo = set(range(n))
    while todo:
        count = [0] * len(capacity)
        for i in todo:
            for k in demands[i][1]:
                count[k] += 1
        level: Time | None = None
        for i in todo:
            cap, links = demands[i]
            m: Time = cap
            for k in links:
                share = _div(left[k], count[k])
                if share < m:
                    m = share
            if level is None or m < level:
                level = m
        assert level is not None
        done = []
        for i in todo:
            cap, links = demands[i]
            if cap <= level or any(_div(left[k], count[k]) <= level for k in links):
                done.append(i)
        for i in done:
            rate[i] = level
            todo.discard(i)
            for k in demands[i][1]:
                left[k] -= level
    return rate


def _separate_links(capacity: Sequence[int], demands: Sequence[tuple[int, tuple[int, ...]]]) -> list[Time]:
    """:func:`fair_rates` when every transfer uses one link (the common case): each link fills
    on its own, smallest caps first -- a cap below the fair share of what is left is met, and
    the rest share what remains equally. The same rates as progressive filling, in one sort."""
    by_link: dict[int, list[int]] = {}
    for i, (_, links) in enumerate(demands):
        by_link.setdefault(links[0], []).append(i)
    rate: list[Time] = [0] * len(demands)
    for k, members in by_link.items():
        members.sort(key=lambda i: demands[i][0])
        left: Time = capacity[k]
        count = len(members)
        for j, i in enumerate(members):
            cap = demands[i][0]
            share = _div(left, count)
            if cap <= share:
                rate[i] = cap
                left -= cap
                count -= 1
                continue
            for rest in members[j:]:
                rate[rest] = share
            break
    return rate


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
