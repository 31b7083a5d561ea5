"""The memory family's list-scheduler tracker: first-fit addresses of items in binding spaces
while a timetable is built (:mod:`.memory` is the family)."""

from __future__ import annotations

import bisect
import heapq

from staticsched.model.hardware import round_up
from staticsched.solver.families.base import Stuck
from staticsched.solver.list_prep import Prep
from staticsched.solver.problem import Problem


class MemoryTracker:
    """Addresses of the items in binding spaces while the schedule is built.

    An item takes its bytes when its first access starts and gives them back ``hold`` cycles
    after its last tail access ends. With in-order allocation each space hands out bytes in
    the order of ``pos`` only; ``blocked[i]`` counts the spaces where op ``i`` must still wait
    for its turn.
    """

    def __init__(self, prob: Problem, prep: Prep, pos: list[int], in_order: bool) -> None:
        self.prob, self.prep, self.in_order = prob, prep, in_order
        spaces, items = prob.spaces, prob.items
        self.queue: list[list[int]] = [[] for _ in spaces]
        for k, it in enumerate(items):
            if spaces[it.space].binding:
                self.queue[it.space].append(k)
        for q in self.queue:
            q.sort(key=lambda k: (pos[items[k].first], k))
        self.head = [0] * len(spaces)
        self.blocked = [0] * prob.n
        for i in range(prob.n if in_order else 0):
            for s in prep.new_items[i]:
                if spaces[s].binding and items[self.queue[s][0]].first != i:
                    self.blocked[i] += 1
        self.occupied: list[list[tuple[int, int, int]]] = [[] for _ in spaces]  # (lo, hi, item)
        self.offsets = [it.static_offset for it in items]
        self.tails_left = [len(it.tails) for it in items]
        self.tail_end = [0] * len(items)
        self.frees: list[tuple[int, int]] = []  # (time the bytes are free again, item)
        #: per space, how many times it gave bytes back: a misfit stands until the count moves
        self.releases = [0] * len(spaces)
        #: op -> (space, item, releases) of its last misfit of one item (see :meth:`place`)
        self.misfit: dict[int, tuple[int, int, int]] = {}

    def place(self, i: int) -> dict[int, list[tuple[int, int]]] | tuple[int, int]:
        """Offsets for op ``i``'s new items now, or a (space, item) that does not fit.

        A single item that found no gap finds none while its space only fills (every gap
        shrinks or splits), so that misfit is remembered until the space gives bytes back: a
        free variant retries hundreds of waiting ops at every event. The (space, item) returned
        then is the remembered one, which may not be the first misfit in space order (the
        stuck report asks :meth:`_place_now`).
        """
        seen = self.misfit.get(i)
        if seen is not None and self.releases[seen[0]] == seen[2]:
            return seen[0], seen[1]
        placed = self._place_now(i)
        if isinstance(placed, tuple) and len(self.prep.new_items[i][placed[0]]) == 1:
            self.misfit[i] = (*placed, self.releases[placed[0]])
        return placed

    def _place_now(self, i: int) -> dict[int, list[tuple[int, int]]] | tuple[int, int]:
        out: dict[int, list[tuple[int, int]]] = {}
        for s, ks in self.prep.new_items[i].items():
            sp = self.prob.spaces[s]
            if not sp.binding:
                continue
            blocks = list(self.occupied[s])
            got = []
            for k in ks:
                it = self.prob.items[k]
                o = _place(blocks, it.footprint, it.bytes, sp.alignment, sp.limit, sp.capacity, sp.slot)
                if o < 0:
                    return (s, k)
                _insert(blocks, (o, o + it.footprint, k))
                got.append((k, o))
            out[s] = got
        return out

    def take(self, i: int, placed: dict[int, list[tuple[int, int]]], end: int) -> list[int]:
        """Op ``i`` starts with ``placed`` and ends at ``end``; return the ops whose turn came."""
        items = self.prob.items
        for s, got in placed.items():
            for k, o in got:
                self.offsets[k] = o
                _insert(self.occupied[s], (o, o + items[k].footprint, k))
        turned = []
        for s, ks in self.prep.new_items[i].items():
            if not self.prob.spaces[s].binding or not self.in_order:
                continue
            self.head[s] += len(ks)
            if self.head[s] < len(self.queue[s]):
                j = items[self.queue[s][self.head[s]]].first
                self.blocked[j] -= 1
                if self.blocked[j] == 0:
                    turned.append(j)
        for k in self.prep.tail_of[i]:
            self.tails_left[k] -= 1
            self.tail_end[k] = max(self.tail_end[k], end)
            if self.tails_left[k] == 0 and self.prob.spaces[items[k].space].binding:
                heapq.heappush(self.frees, (self.tail_end[k] + self.prob.reuse_gap, k))
        return turned

    def release(self, t: int) -> None:
        """Give back the bytes of items whose hold ended by ``t``."""
        while self.frees and self.frees[0][0] <= t:
            _, k = heapq.heappop(self.frees)
            s = self.prob.items[k].space
            self.occupied[s] = [b for b in self.occupied[s] if b[2] != k]
            self.releases[s] += 1

    def next_change(self) -> int | None:
        return self.frees[0][0] if self.frees else None

    def stuck(self, i: int, t: int, rule: str) -> Stuck | None:
        """Why op ``i`` cannot take its new items at ``t`` (None: it can)."""
        placed = self._place_now(i)
        if not isinstance(placed, tuple):
            return None
        s, k = placed
        holders = tuple(b[2] for b in self.occupied[s])
        return Stuck("memory", i, t, space=s, item=k, holders=holders, rule=rule)


def _place(
    blocks: list[tuple[int, int, int]],
    foot: int,
    nbytes: int,
    align: int,
    limit: int,
    capacity: int,
    slot: int,
) -> int:
    """Where ``foot`` bytes go among the occupied ``blocks`` (sorted); -1 if nowhere.

    Uniform spaces (``slot > 0``): the lowest free slot below ``limit``. Mixed ones: best fit,
    the smallest aligned gap that holds the item (``offset + nbytes <= capacity`` at the top),
    lowest offset on ties -- it keeps large gaps whole for large items.
    """
    o = 0
    if slot:
        for b0, b1, _ in blocks:
            if o + foot <= b0:
                break
            o = max(o, b1)
        return o if o + foot <= limit else -1
    best, best_gap = -1, None
    for b0, b1, _ in [*blocks, (capacity, capacity, -1)]:
        top = b0 if b0 < capacity else capacity
        fits = o + (foot if b0 < capacity else nbytes) <= top
        if fits and (best_gap is None or top - o < best_gap):
            best, best_gap = o, top - o
        o = max(o, round_up(b1, align))
    return best


def _insert(blocks: list[tuple[int, int, int]], blk: tuple[int, int, int]) -> None:
    """Insert into a list kept sorted (bisect.insort on tuples)."""
    bisect.insort(blocks, blk)
