"""Generic algorithms on graphs whose nodes are the indices ``0 .. n-1``: the one topological
order (Kahn's algorithm), longest paths, and disjoint sets (union-find).

The OpGraph's cycle check, the solver's problems and normaliser, the sync planner's baton
plan and the verifier's clock components all use these; none of them knows what the nodes
stand for.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from typing import Any


def topological_order(succ: Sequence[Sequence[int]], key: Sequence[Any] | None = None) -> list[int]:
    """Kahn's algorithm over nodes ``0 .. len(succ)-1`` with successor lists (an edge listed
    twice counts twice on both ends).

    Among the nodes ready at once, the smallest ``key`` (ties: smaller index) comes first when
    ``key`` is given (a heap); without it the last node to become ready comes first (a stack:
    linear time, for callers that need any topological order). Nodes on a cycle, and those
    behind one, are left out: ``len(result) < len(succ)`` tells that the graph has a cycle.
    """
    n = len(succ)
    indeg = [0] * n
    for out in succ:
        for j in out:
            indeg[j] += 1
    order: list[int] = []
    if key is None:
        stack = [i for i in range(n) if indeg[i] == 0]
        while stack:
            i = stack.pop()
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    stack.append(j)
        return order
    heap = [(key[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        order.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (key[j], j))
    return order


def longest_starts(dur: Sequence[int], edges: Iterable[tuple[int, int, int]]) -> list[int] | None:
    """Earliest start of every node given the edges alone: the longest path to it, where an
    edge ``(a, b, latency)`` requires ``start[b] >= start[a] + dur[a] + latency`` and a node
    without predecessors starts at 0. None when the edges have a cycle."""
    n = len(dur)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, lat in edges:
        succ[a].append(b)
        pred[b].append((a, lat))
    order = topological_order(succ)
    if len(order) < n:
        return None
    start = [0] * n
    for i in order:
        best = 0
        for a, lat in pred[i]:
            v = start[a] + dur[a] + lat
            if v > best:
                best = v
        start[i] = best
    return start


def longest_tails(dur: Sequence[int], edges: Iterable[tuple[int, int, int]]) -> list[int] | None:
    """Longest path from the start of every node to the end of the last one (its own duration
    included), with the edges of :func:`longest_starts`; None when they have a cycle."""
    heads = longest_starts(dur, [(b, a, lat) for a, b, lat in edges])
    return None if heads is None else [h + d for h, d in zip(heads, dur, strict=True)]


class DisjointSets:
    """Union-find over hashable members; each set is represented by its smallest member."""

    def __init__(self, members: Iterable[Hashable]) -> None:
        self._parent: dict[Any, Any] = {m: m for m in members}

    def __contains__(self, member: object) -> bool:
        return member in self._parent

    def find(self, member: Any) -> Any:
        """The smallest member of ``member``'s set."""
        parent = self._parent
        while parent[member] != member:
            parent[member] = parent[parent[member]]
            member = parent[member]
        return member

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[tuple[Any, ...]]:
        """Every set, its members sorted, sets sorted."""
        out: dict[Any, list[Any]] = {}
        for m in self._parent:
            out.setdefault(self.find(m), []).append(m)
        return sorted(tuple(sorted(g)) for g in out.values())
