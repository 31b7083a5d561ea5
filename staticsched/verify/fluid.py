"""Shared links in a flags program, as the verifier reads the execution model.

docs/program-format.md ("Shared links") fixes the arithmetic: a transfer whose path a link
carries issues at cycle ``s``, moves nothing for its path's ``overhead``, then is *active*
from ``d = s + overhead`` until it has moved ``bytes`` (``bytes * RATE_DENOM`` work units).
The active transfers share each link max-min fairly, each capped at its path's rate. Shares
change only at whole cycles: when transfers become active, and at a transfer's end, the first
whole cycle by which it has moved its bytes (it holds its share until then). Timed programs,
and transfers no link carries, keep the durations the program states.

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


class _Bundle:
    """The active transfers of one cap and link set. Max-min fairness gives them one rate, so
    the bundle keeps one odometer (work moved per member since it began, as of cycle ``at``)
    and each member's reading at which it is done."""

    __slots__ = ("at", "cap", "done_at", "links", "odometer", "rate")

    def __init__(self, cap: int, links: tuple[int, ...]) -> None:
        self.cap = cap
        self.links = links
        self.odometer: Fraction | int = 0
        self.rate: Fraction | int = 0
        self.at = 0
        self.done_at: list[tuple[Fraction | int, int]] = []  # (odometer reading, gid), a heap

    def reading(self, t: int) -> Fraction | int:
        return self.odometer + self.rate * (t - self.at)

    def next_end(self) -> int | None:
        """The first whole cycle by which its nearest member is done, at the current rate."""
        if not self.done_at:
            return None
        need = self.done_at[0][0] - self.odometer
        return self.at + math.ceil(Fraction(need) / self.rate)


class LinkShare:
    """The active transfers of one replay and their max-min fair rates.

    :meth:`begin` a transfer when its pipe issues it; :meth:`finish` yields the next one to end
    no later than a horizon (the next cycle anything else happens), in time order, those of one
    cycle by gid. Shares change only at whole cycles (docs/program-format.md, "Shared links").
    """

    def __init__(self, capacities: Sequence[int]) -> None:
        self.cap = list(capacities)
        self.arrivals: list[tuple[int, int, int, int, tuple[int, ...]]] = []
        self.bundles: dict[tuple[int, tuple[int, ...]], _Bundle] = {}
        self.out: list[tuple[int, int]] = []  # (end, gid) found, not yet handed out; a heap
        # the next cycle anything happens (None: nothing) while ``_known``; the replay asks for
        # it at every instruction, the state changes only at begin and at a step
        self._next: int | None = None
        self._known = True

    def begin(self, gid: int, cycle: int, shared: Shared) -> None:
        work, overhead, cap, links = shared
        heapq.heappush(self.arrivals, (cycle + overhead, gid, work, cap, links))
        if self._known and self._next is not None:
            self._next = min(self._next, cycle + overhead)
        else:
            self._known = False

    def idle(self) -> bool:
        return not self.out and not self.arrivals and not any(b.done_at for b in self.bundles.values())

    def finish(self, horizon: int) -> tuple[int, int] | None:
        """``(gid, end cycle)`` of the next transfer to end by ``horizon``, or None."""
        while not self.out:
            if not self._known:
                ends = [e for e in (b.next_end() for b in self.bundles.values()) if e is not None]
                if self.arrivals:
                    ends.append(self.arrivals[0][0])
                self._next, self._known = min(ends, default=None), True
            if self._next is None or self._next > horizon:
                return None
            self._step(self._next)
        end, gid = heapq.heappop(self.out)
        return gid, end

    def _step(self, t: int) -> None:
        """Everything that happens at cycle ``t``: members done leave, arrivals join, then the
        shares are filled again."""
        self._known = False
        for b in self.bundles.values():
            now = b.reading(t)
            while b.done_at and b.done_at[0][0] <= now:
                heapq.heappush(self.out, (t, heapq.heappop(b.done_at)[1]))
        while self.arrivals and self.arrivals[0][0] == t:
            _, gid, work, cap, links = heapq.heappop(self.arrivals)
            if work == 0:
                # moves nothing, holds no share: it ends one cycle after its data start
                heapq.heappush(self.out, (t + 1, gid))
                continue
            b = self.bundles.setdefault((cap, links), _Bundle(cap, links))
            heapq.heappush(b.done_at, (b.reading(t) + work, gid))
        busy = [b for b in self.bundles.values() if b.done_at]
        rates = _filled(self.cap, busy)
        for b, r in zip(busy, rates, strict=True):
            b.odometer, b.at, b.rate = b.reading(t), t, r
        for b in self.bundles.values():
            if not b.done_at:
                b.odometer, b.at, b.rate = b.reading(t), t, 0


def _filled(capacity: Sequence[int], bundles: list[_Bundle]) -> list[Fraction | int]:
    """Max-min fair rate of each member of ``bundles``: raise every unfrozen rate together;
    freeze the bundles that reach their cap and those on a link that fills."""
    users = [0] * len(capacity)
    for b in bundles:
        for k in b.links:
            users[k] += len(b.done_at)
    if all(sum(b.cap * len(b.done_at) for b in bundles if k in b.links) <= c
           for k, c in enumerate(capacity)):
        return [b.cap for b in bundles]
    free = [Fraction(c) for c in capacity]
    level = Fraction(0)
    left = set(range(len(bundles)))
    out: list[Fraction | int] = [0] * len(bundles)
    while left:
        # how far every unfrozen rate can still rise together
        step = min(bundles[i].cap - level for i in left)
        for k in range(len(free)):
            if users[k]:
                step = min(step, free[k] / users[k])
        level += step
        for k in range(len(free)):
            free[k] -= step * users[k]
        for i in sorted(i for i in left if bundles[i].cap <= level
                        or any(free[k] <= 0 for k in bundles[i].links)):
            left.discard(i)
            out[i] = level.numerator if level.denominator == 1 else level
            for k in bundles[i].links:
                users[k] -= len(bundles[i].done_at)
    return out
