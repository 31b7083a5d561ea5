"""Shared links in a flags program, as the verifier reads the execution model.

docs/program-format.md ("Shared links") fixes the arithmetic: a transfer whose path a link
carries issues at cycle ``s``, moves nothing for its path's ``overhead``, then is *active*
from ``d = s + overhead`` until it has moved ``bytes`` (``bytes * RATE_DENOM`` work units).
The active transfers share each link max-min fairly, each capped at its path's rate; shares
change only when a transfer becomes active or finishes moving its bytes, and the pipe is free
again at the first whole cycle by which the bytes have moved (at least ``d + 1``). Timed
programs, and transfers no link carries, keep the durations the program states.

The verifier derives the bytes, the path, its rate and its links from the kind table and the
hardware model itself; nothing comes from the emitter. Exact arithmetic (:class:`Fraction`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from fractions import Fraction

from staticsched.model.hardware import RATE_DENOM
from staticsched.model.opkinds import KINDS, TRANSFER_KINDS, item_shape, path_units, transfer_route
from staticsched.verify.index import OP, ProgramIndex

#: per micro-op gid: (work units, overhead, rate cap in units, link indices)
Shared = tuple[int, int, int, tuple[int, ...]]


def shared_transfers(ix: ProgramIndex) -> dict[int, Shared]:
    """The micro-ops of a flags program that move bytes over a shared link (empty for a timed
    program or hardware without links), worked out once per op shape."""
    hw = ix.hw
    if ix.timed or not hw.links:
        return {}
    index = {lk.name: k for k, lk in enumerate(hw.links)}
    bad = {op for f in ix.problems for op in f.ops}
    shape_of, first = ix.op_shapes()
    memo: list[Shared | None] = [_shared(ix, first[k], index) for k in range(len(first))]
    out: dict[int, Shared] = {}
    for g in range(ix.n):
        k = shape_of[g]
        if k >= 0 and ix.role[g] == OP and memo[k] is not None and ix.instr[g].id not in bad:
            out[g] = memo[k]  # type: ignore[assignment]
    return out


def transfer_route_of(ix: ProgramIndex, ins) -> tuple[str, str, int] | None:
    """``(source space, destination space, bytes)`` of a transfer instruction, read from its
    items as the program declares them; None when it cannot be resolved (other checks report
    that)."""
    kind = KINDS[ins.kind]
    a = {**dict(kind.defaults), **dict(ins.attrs)}
    names = (*ins.reads, *ins.writes)
    if kind.missing(a) or any(n not in ix.items for n in names):
        return None
    shapes = [item_shape(it.space, it.bytes, it.dtype, it.shape) for it in (ix.items[n] for n in names)]
    reads, writes = shapes[: len(ins.reads)], shapes[len(ins.reads):]
    if len(reads) < len(kind.reads) or len(writes) < len(kind.writes):
        return None
    try:
        return transfer_route(ix.hw, ins.kind, a, reads, writes)  # type: ignore[return-value]
    except (KeyError, TypeError, ValueError):
        return None


def _shared(ix: ProgramIndex, g: int, index: dict[str, int]) -> Shared | None:
    ins = ix.instr[g]
    if ins.kind not in TRANSFER_KINDS:
        return None
    route = transfer_route_of(ix, ins)
    if route is None:
        return None
    src, dst, nbytes = route
    hw = ix.hw
    links = tuple(index[lk.name] for lk in hw.links_of(src, dst))
    if not links or not hw.has_path(src, dst):
        return None
    kind = KINDS[ins.kind]
    a = {**dict(kind.defaults), **dict(ins.attrs)}
    # the cap is the path's rate, derated for a load converting ND -> NZ (``nd2nz``)
    return nbytes * RATE_DENOM, hw.path(src, dst).overhead, path_units(hw, a, src, dst), links


class _Rec:
    """One active transfer: work still to move at instant ``since``, its rate from then on,
    when it is due to finish at that rate, its cap, links and data start."""

    __slots__ = ("cap", "data_start", "due", "links", "rate", "rem", "since")

    def __init__(self, work: int, cap: int, links: tuple[int, ...], data_start: int) -> None:
        self.rem: Fraction | int = work
        self.since: Fraction | int = data_start
        self.rate: Fraction | int = 0
        self.due: Fraction | int | None = None
        self.cap = cap
        self.links = links
        self.data_start = data_start


class LinkShare:
    """The active transfers of one replay and their max-min fair rates.

    :meth:`begin` a transfer when its pipe issues it; :meth:`finish` yields the next one to end
    no later than a horizon (the next cycle anything else happens), in time order. A transfer's
    remaining work is brought up to date only when its rate changes.
    """

    def __init__(self, capacities: Sequence[int]) -> None:
        self.cap = list(capacities)
        self.t: Fraction | int = 0
        self.arrivals: list[tuple[int, int, int, int, tuple[int, ...]]] = []
        self.active: dict[int, _Rec] = {}
        self.due: list[tuple[Fraction | int, int]] = []  # (due instant, gid), lazily pruned

    def begin(self, gid: int, cycle: int, shared: Shared) -> None:
        work, overhead, cap, links = shared
        heapq.heappush(self.arrivals, (cycle + overhead, gid, work, cap, links))

    def idle(self) -> bool:
        return not self.active and not self.arrivals

    def finish(self, horizon: int) -> tuple[int, int] | None:
        """``(gid, end cycle)`` of the next transfer to end by ``horizon``, or None."""
        while True:
            nxt = self._next_due()
            arrive = self.arrivals[0][0] if self.arrivals else None
            if arrive is not None and arrive <= horizon and (nxt is None or arrive < nxt[0]):
                self.t = arrive
                while self.arrivals and self.arrivals[0][0] == arrive:
                    d, g, work, cap, links = heapq.heappop(self.arrivals)
                    self.active[g] = _Rec(work, cap, links, d)
                self._share()
                continue
            if nxt is None:
                return None
            tau, gid = nxt
            end = max(math.ceil(tau), self.active[gid].data_start + 1)
            if end > horizon:
                return None
            heapq.heappop(self.due)
            self.t = tau
            del self.active[gid]
            self._share()
            return gid, end

    def _next_due(self) -> tuple[Fraction | int, int] | None:
        due = self.due
        while due:
            tau, g = due[0]
            rec = self.active.get(g)
            if rec is not None and rec.due == tau:
                return tau, g
            heapq.heappop(due)
        return None

    def _share(self) -> None:
        """Progressive filling: raise every unfrozen rate together; freeze the transfers that
        reach their cap and those on a link that fills. Re-times the transfers whose rate
        changes."""
        recs = self.active
        users = [0] * len(self.cap)
        demand = [0] * len(self.cap)
        for rec in recs.values():
            for k in rec.links:
                users[k] += 1
                demand[k] += rec.cap
        if all(demand[k] <= self.cap[k] for k in range(len(self.cap))):
            rates = {g: rec.cap for g, rec in recs.items()}
        else:
            rates = _filled(self.cap, users, recs)
        t = self.t
        for g, rec in recs.items():
            r = rates[g]
            if r == rec.rate:
                continue
            if rec.rate:
                rec.rem = rec.rem - rec.rate * (t - rec.since)
            rec.since, rec.rate = t, r
            rec.due = t + _quotient(rec.rem, r)
            heapq.heappush(self.due, (rec.due, g))


def _quotient(a: Fraction | int, b: Fraction | int) -> Fraction | int:
    """``a / b`` exactly: an int when it is one."""
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        return q if r == 0 else Fraction(a, b)
    q = Fraction(a) / b
    return q.numerator if q.denominator == 1 else q


def _filled(capacity: Sequence[int], users: list[int], recs: dict[int, _Rec]) -> dict[int, Fraction | int]:
    """Max-min fair rates of the active transfers ``recs`` (``users``: how many use each link)."""
    users = list(users)
    free = [Fraction(c) for c in capacity]
    level = Fraction(0)
    left = dict(recs)
    out: dict[int, Fraction | int] = {}
    while left:
        # how far every unfrozen rate can still rise together
        step = min(rec.cap - level for rec in left.values())
        for k in range(len(free)):
            if users[k]:
                step = min(step, free[k] / users[k])
        level += step
        for k in range(len(free)):
            free[k] -= step * users[k]
        for g in [g for g, rec in left.items() if rec.cap <= level or any(free[k] <= 0 for k in rec.links)]:
            rec = left.pop(g)
            out[g] = level.numerator if level.denominator == 1 else level
            for k in rec.links:
                users[k] -= 1
    return out
