"""Semi-active normalisation of a timetable (DESIGN §5), on a problem's local indices.

Fix each pipe's order (by start, ties by index) and every address, derive the address-reuse
edges, and recompute every start as the longest path -- the earliest an in-order executor
reaches. This is the longest path over ``graph.edges`` plus
:func:`staticsched.model.deps.address_edges`, done in index space so that 10^4-op cores take
milliseconds: of the items that shared a byte with a later item only the *latest* one per
byte gets an edge, since the earlier ones reach the later item through it (same-item edges
chain every access of an item after its first write, and a path that changes pipes carries at
least the latency of a direct edge). ``tests/test_solver_normalize.py`` checks equality with
a reference longest path on op names (``tests/oracles.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from staticsched.model.deps import reuse_predecessors
from staticsched.model.graphs import longest_starts
from staticsched.solver.links import link_order_edges
from staticsched.solver.problem import Problem


def live_ranges(prob: Problem, starts: Sequence[int]) -> list[tuple[int, int]]:
    """``[first access start, last access end)`` of every item."""
    return [prob.live_range(k, starts) for k in range(len(prob.items))]


def address_edges(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[tuple[int, int, int]]:
    """Reuse edges ``(tail access of the earlier item, first access of the later one, latency)``
    (the rule of :func:`staticsched.model.deps.reuse_predecessors`)."""
    live = live_ranges(prob, starts)
    by_space: dict[int, list[int]] = {}
    for k, it in enumerate(prob.items):
        if prob.spaces[it.space].binding:
            by_space.setdefault(it.space, []).append(k)
    out: list[tuple[int, int, int]] = []
    for s in sorted(by_space):
        ks = sorted(by_space[s], key=lambda k: (live[k][0], live[k][1], offsets[k], k))
        prev = reuse_predecessors([(offsets[y], offsets[y] + prob.items[y].bytes) for y in ks])
        for y, owners in zip(ks, prev, strict=True):
            first = prob.items[y].first
            for x in sorted(ks[k] for k in owners):
                for a in prob.items[x].tails:
                    if a != first:
                        out.append((a, first, prob.latency(a, first)))
    return out


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
    by_pipe: dict[int, list[int]] = {}
    for i in range(prob.n):
        by_pipe.setdefault(prob.pipe_of[i], []).append(i)
    chains: list[tuple[int, int, int]] = []
    for ops in by_pipe.values():
        ops.sort(key=lambda i: (starts[i], i))
        chains.extend((a, b, 0) for a, b in itertools.pairwise(ops))
    # a shared link's order as a resource flow: moving ops earlier keeps every link within
    # its bandwidth (the problem's rates are fixed)
    extra = (*address_edges(prob, starts, offsets), *link_order_edges(prob, starts))
    out = longest_starts(prob.dur, (*prob.edges, *extra, *chains))
    if out is None:
        raise AssertionError("pipe order contradicts the edges: the timetable was not feasible")
    return out
