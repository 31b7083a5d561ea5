"""The link resource family of the solver, in a problem's index space.

A link is a cumulative resource of ``units`` (bandwidth in rate units) held by transfers during
their data phase ``[start + overhead, end)``, each at its chosen rate. The pieces here:

* :class:`LinkTracker` -- the list scheduler's view: which rate a transfer can get if it
  starts now (the bandwidth left free from its data start on), and bookkeeping;
* :func:`~staticsched.model.links.flow_edges` (shared with emission) -- a feasible timetable's
  link usage as precedence edges;
* :func:`link_bound` -- a lower bound on the makespan from each link: a one-machine
  relaxation with heads and tails, solved exactly by Jackson's preemptive schedule.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import attrs

from staticsched.model.hardware import RATE_DENOM


@attrs.frozen
class LinkSpec:
    """A link of a problem: its name and the units the problem's transfers may hold at once
    (the whole bandwidth, or one core's share in an equal static split)."""

    name: str
    units: int


@attrs.frozen
class Xfer:
    """A transfer op of a problem: ``op`` moves ``bytes`` after ``overhead`` cycles, at most
    ``path_units``, on the problem's links ``links`` (indices)."""

    op: int
    bytes: int
    overhead: int
    path_units: int
    links: tuple[int, ...] = attrs.field(converter=tuple)

    def cycles(self, rate: int) -> int:
        return self.overhead + max(1, math.ceil(self.bytes * RATE_DENOM / rate))


#: a transfer does not start at less than this fraction of its path's rate: it waits for
#: bandwidth instead of crawling (a crawling transfer holds its pipe for ages)
MIN_RATE_FRACTION = 8


class LinkTracker:
    """Rates held on each link while a list schedule is built (start times never decrease)."""

    def __init__(self, links: Sequence[LinkSpec], xfers: Sequence[Xfer]) -> None:
        self.links = links
        #: per link: (data start, end, units) of the transfers started so far and not over
        self.active: list[list[tuple[int, int, int]]] = [[] for _ in links]
        self.xfers = xfers

    def prune(self, t: int) -> None:
        for k, lst in enumerate(self.active):
            if lst:
                self.active[k] = [iv for iv in lst if iv[1] > t]

    def free(self, k: int, since: int) -> int:
        """Units of link ``k`` free at every cycle from ``since`` on (holds only shrink later:
        every transfer started so far began its data phase or will, none is added before)."""
        peak = 0
        for b, e, _ in self.active[k]:
            if e > since:
                # the holds of transfers overlapping [since, inf): the worst cycle is a start
                peak = max(peak, sum(u2 for b2, e2, u2 in self.active[k]
                                     if b2 <= max(b, since) < e2))
        return self.links[k].units - peak

    def rate(self, x: Xfer, t: int) -> int:
        """The rate ``x`` gets if it starts at ``t``: its path rate capped by what every link
        has free from its data start on; 0 when that is below the minimum worth starting."""
        r = x.path_units
        for k in x.links:
            r = min(r, self.free(k, t + x.overhead))
        return r if r >= max(1, x.path_units // MIN_RATE_FRACTION) or r == x.path_units else 0

    def take(self, x: Xfer, t: int, rate: int) -> int:
        """``x`` starts at ``t`` with ``rate``; returns its end."""
        end = t + x.cycles(rate)
        for k in x.links:
            self.active[k].append((t + x.overhead, end, rate))
        return end

    def next_change(self) -> int | None:
        ends = [e for lst in self.active for _, e, _ in lst]
        return min(ends) if ends else None


def link_bound(
    links: Sequence[LinkSpec],
    xfers: Sequence[Xfer],
    heads: Sequence[int],
    tails: Sequence[int],
) -> list[tuple[str, int]]:
    """Per link, a lower bound on the makespan: the link must move every byte of its
    transfers at its bandwidth, each no earlier than its op's head plus overhead, each
    followed by its op's tail (the longest path from its end). Relaxing to one preemptive
    machine of speed ``units`` gives the bound, computed exactly by Jackson's preemptive
    schedule (serve the released job with the longest tail first)."""
    out = []
    for k, spec in enumerate(links):
        jobs = sorted(
            (heads[x.op] + x.overhead, math.ceil(x.bytes * RATE_DENOM / spec.units), tails[x.op])
            for x in xfers if k in x.links
        )
        if not jobs:
            continue
        best = 0
        t = 0
        ready: list[tuple[int, int]] = []  # (-tail, remaining)
        i = 0
        while i < len(jobs) or ready:
            if not ready and t < jobs[i][0]:
                t = jobs[i][0]
            while i < len(jobs) and jobs[i][0] <= t:
                heapq.heappush(ready, (-jobs[i][2], jobs[i][1]))
                i += 1
            neg_tail, rem = heapq.heappop(ready)
            until = jobs[i][0] if i < len(jobs) else t + rem
            run = min(rem, until - t)
            t += run
            if run < rem:
                heapq.heappush(ready, (neg_tail, rem - run))
            else:
                best = max(best, t - neg_tail)
        out.append((spec.name, best))
    return out
