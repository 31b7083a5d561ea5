"""Jackson's preemptive schedule: the one-machine bound with release dates and tails.

A machine runs jobs one at a time, each no earlier than its release date and each followed by
its tail (time that must pass after it before the schedule can end). With preemption allowed,
serving the released job with the longest tail first is optimal (Jackson's rule; Carlier, 1982,
"The one-machine sequencing problem"), and its makespan ``max(completion + tail)`` is a lower
bound on every non-preemptive schedule. It dominates ``min release + total work + min tail``:
the jobs that cannot start early, or must end early, count where they sit.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


def jackson_bound(jobs: Iterable[tuple[int, int, int]]) -> int:
    """``max(completion + tail)`` of Jackson's preemptive schedule of ``jobs``, each
    ``(release, work, tail)`` in one integer unit of time; 0 for no jobs."""
    order = sorted(jobs)
    best = 0
    t = 0
    ready: list[tuple[int, int]] = []  # (-tail, remaining work)
    i, n = 0, len(order)
    while i < n or ready:
        if not ready and t < order[i][0]:
            t = order[i][0]
        while i < n and order[i][0] <= t:
            heapq.heappush(ready, (-order[i][2], order[i][1]))
            i += 1
        neg_tail, rem = heapq.heappop(ready)
        until = order[i][0] if i < n else t + rem
        run = min(rem, until - t)
        t += run
        if run < rem:
            heapq.heappush(ready, (neg_tail, rem - run))
        else:
            best = max(best, t - neg_tail)
    return best
