"""Addresses after solving: interval colouring of the hold intervals in uniform spaces.

In a space whose items all round up to one slot size, the hold intervals form an interval
graph; giving each item, in order of hold start, the lowest slot free at that time uses at
most as many slots as items overlap at once, so it succeeds whenever the cumulative
capacity holds (interval graphs are perfect).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from staticsched.solver.problem import Problem


def colour_slots(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[int] | None:
    """Give every item of a binding uniform space a slot by interval colouring.

    Parameters
    ----------
    prob
        The problem.
    starts
        Op starts of a timetable that satisfies the cumulative capacities.
    offsets
        Current offsets; entries of other spaces are kept.

    Returns
    -------
    list of int or None
        The new offsets; None if some space would need more slots than it has.
    """
    out = list(offsets)
    by_space: dict[int, list[tuple[int, int, int]]] = {}
    begins, ends = prob.holds(starts)
    begins, ends = begins.tolist(), ends.tolist()
    for k, it in enumerate(prob.items):
        sp = prob.spaces[it.space]
        if sp.binding and sp.slot:
            by_space.setdefault(it.space, []).append((begins[k], ends[k], k))
    for s in sorted(by_space):
        sp = prob.spaces[s]
        n_slots = sp.limit // sp.slot
        free = list(range(n_slots))  # heap of free slot numbers
        busy: list[tuple[int, int]] = []  # heap of (hold end, slot)
        for begin, end, k in sorted(by_space[s]):
            while busy and busy[0][0] <= begin:
                heapq.heappush(free, heapq.heappop(busy)[1])
            if not free:
                return None
            slot = heapq.heappop(free)
            out[k] = slot * sp.slot
            heapq.heappush(busy, (end, slot))
    return out
