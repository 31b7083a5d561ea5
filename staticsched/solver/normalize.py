"""Semi-active normalisation of a timetable (DESIGN §5), on a problem's local indices.

Fix each pipe's order (by start, ties by index) and every address, derive the address-reuse
edges, and recompute every start as the longest path -- the earliest an in-order executor
reaches. This is :func:`staticsched.model.deps.semi_active_starts` over ``graph.edges`` plus
:func:`staticsched.model.deps.address_edges`, done in index space so that 10^4-op cores take
milliseconds: of the items that shared a byte with a later item only the *latest* one per
byte gets an edge, since the earlier ones reach the later item through it (same-item edges
chain every access of an item after its first write, and a path that changes pipes carries at
least the latency of a direct edge). ``tests/test_solver_normalize.py`` checks equality with
the deps functions.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

from staticsched.solver.links import link_order_edges
from staticsched.solver.problem import Problem


def live_ranges(prob: Problem, starts: Sequence[int]) -> list[tuple[int, int]]:
    """``[first access start, last access end)`` of every item."""
    dur = prob.dur
    return [(starts[it.first], max(starts[a] + dur[a] for a in it.tails)) for it in prob.items]


def address_edges(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[tuple[int, int, int]]:
    """Reuse edges ``(tail access of the earlier item, first access of the later one, latency)``."""
    live = live_ranges(prob, starts)
    by_space: dict[int, list[int]] = {}
    for k, it in enumerate(prob.items):
        if prob.spaces[it.space].binding:
            by_space.setdefault(it.space, []).append(k)
    out: list[tuple[int, int, int]] = []
    for s in sorted(by_space):
        ks = sorted(by_space[s], key=lambda k: (live[k][0], live[k][1], offsets[k], k))
        segs: list[list[int]] = []  # [lo, hi, item], disjoint, sorted by lo
        for y in ks:
            lo, hi = offsets[y], offsets[y] + prob.items[y].bytes
            prev = _replace(segs, lo, hi, y)
            first = prob.items[y].first
            for x in sorted(prev):
                for a in prob.items[x].tails:
                    if a != first:
                        out.append((a, first, _latency(prob, a, first)))
    return out


def _latency(prob: Problem, a: int, b: int) -> int:
    # items are core-local, so a reuse edge never crosses cores
    return prob.hold if prob.pipe[a] != prob.pipe[b] else 0


def _replace(segs: list[list[int]], lo: int, hi: int, item: int) -> set[int]:
    """Make ``item`` the latest owner of ``[lo, hi)``; return the previous owners there."""
    prev: set[int] = set()
    keep: list[list[int]] = []
    for seg in segs:
        a, b, owner = seg
        if b <= lo or a >= hi:
            keep.append(seg)
            continue
        prev.add(owner)
        if a < lo:
            keep.append([a, lo, owner])
        if b > hi:
            keep.append([hi, b, owner])
    keep.append([lo, hi, item])
    keep.sort()
    segs[:] = keep
    return prev


def semi_active(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[int]:
    """Semi-active starts: the earliest under the pipe orders of ``starts``, the edges, the
    address edges of ``offsets`` and the order of every shared link (rates fixed).

    Parameters
    ----------
    prob
        The problem.
    starts, offsets
        A feasible timetable (local indices); it fixes the pipe orders and which items reuse
        which bytes.

    Returns
    -------
    list of int
        The starts, none later than in ``starts``.
    """
    n = prob.n
    dur = prob.dur
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    nsucc: list[list[int]] = [[] for _ in range(n)]
    # a shared link's order as a resource flow: moving ops earlier keeps every link within
    # its bandwidth (the problem's rates are fixed)
    extra = (*address_edges(prob, starts, offsets), *link_order_edges(prob, starts))
    for a, b, lat in (*prob.edges, *extra):
        preds[b].append((a, lat))
        nsucc[a].append(b)
    by_pipe: dict[int, list[int]] = {}
    for i in range(n):
        by_pipe.setdefault(prob.pipe[i], []).append(i)
    for ops in by_pipe.values():
        ops.sort(key=lambda i: (starts[i], i))
        for a, b in itertools.pairwise(ops):
            preds[b].append((a, 0))
            nsucc[a].append(b)
    indeg = [len(p) for p in preds]
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    out = [0] * n
    seen = 0
    while ready:
        i = heapq.heappop(ready)
        seen += 1
        s = 0
        for a, lat in preds[i]:
            v = out[a] + dur[a] + lat
            if v > s:
                s = v
        out[i] = s
        for j in nsucc[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    if seen != n:
        raise AssertionError("pipe order contradicts the edges: the timetable was not feasible")
    return out
