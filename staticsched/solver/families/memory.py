"""The memory family: items hold bytes of their (core, space) from their first access to their
last plus the reuse gap; binding spaces stay within their limit, mixed-size spaces get
concrete aligned offsets, uniform ones slots coloured after solving
(:func:`~staticsched.solver.addresses.colour_slots`). :class:`MemoryTracker` is the list
scheduler's view."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

import attrs
from ortools.sat.python import cp_model

from staticsched.model.deps import reuse_predecessors
from staticsched.model.hardware import round_up
from staticsched.solver.families.base import Edge
from staticsched.solver.list_prep import Prep
from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables


@attrs.define
class MemoryVars:
    """The family's variables, per item of a binding space.

    Attributes
    ----------
    live_end : dict item -> LinearExpr
        End of the item's last access.
    hold : dict item -> IntervalVar
        ``[first access start, live_end + hold)``: the bytes the item keeps from others.
    slot : dict item -> IntVar
        Offset in units of the alignment (binding spaces with mixed sizes only).
    place : dict item -> IntervalVar
        ``[offset, offset + footprint)`` for the 2-D no-overlap (mixed spaces only).
    """

    live_end: dict[int, cp_model.LinearExprT] = attrs.Factory(dict)
    live_end_var: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    hold: dict[int, cp_model.IntervalVar] = attrs.Factory(dict)
    hold_size: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    slot: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    place: dict[int, cp_model.IntervalVar] = attrs.Factory(dict)


def memory_vars(v: Variables) -> MemoryVars:
    return v.of["memory"]


def live_ranges(prob: Problem, starts: Sequence[int]) -> list[tuple[int, int]]:
    """``[first access start, last access end)`` of every item."""
    return [prob.live_range(k, starts) for k in range(len(prob.items))]


def address_edges(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
    """Reuse edges ``(tail access of the earlier item, first access of the later one, latency)``
    (the rule of :func:`staticsched.model.deps.reuse_predecessors`)."""
    live = live_ranges(prob, starts)
    by_space: dict[int, list[int]] = {}
    for k, it in enumerate(prob.items):
        if prob.spaces[it.space].binding:
            by_space.setdefault(it.space, []).append(k)
    out: list[Edge] = []
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


class Memory:
    name = "memory"

    def variables(self, v: Variables) -> None:
        model, prob = v.model, v.prob
        mv = v.of[self.name] = MemoryVars()
        for k, it in enumerate(prob.items):
            sp = prob.spaces[it.space]
            if not sp.binding:
                continue
            if len(it.tails) == 1:
                end = v.end(it.tails[0])
            else:
                # only lower bounds are needed: a longer hold never helps the objective
                end = model.new_int_var(0, v.horizon, f"le{k}")
                mv.live_end_var[k] = end
            mv.live_end[k] = end
            gap = prob.reuse_gap
            size = model.new_int_var(it.min_live + gap, v.horizon + gap, f"hs{k}")
            mv.hold_size[k] = size
            mv.hold[k] = model.new_interval_var(v.start[it.first], size, end + gap, f"hold{k}")
            if not sp.slot:
                if k in v.fixed_offsets:
                    lo = top = v.fixed_offsets[k] // sp.alignment
                else:
                    lo, top = 0, (sp.capacity - it.bytes) // sp.alignment
                mv.slot[k] = model.new_int_var(lo, top, f"addr{k}")
                mv.place[k] = model.new_fixed_size_interval_var(
                    mv.slot[k] * sp.alignment, it.footprint, f"place{k}"
                )

    def constrain(self, v: Variables, whole: bool) -> None:
        model, prob, mv = v.model, v.prob, memory_vars(v)
        # an item's hold reaches at least the end of each of its tail accesses
        for k in sorted(mv.live_end_var):
            for a in prob.items[k].tails:
                model.add(mv.live_end_var[k] >= v.end(a))
        # held bytes per binding (core, space) stay within its limit
        by_space: dict[int, list[int]] = {}
        for k in sorted(mv.hold):
            by_space.setdefault(prob.items[k].space, []).append(k)
        for s in sorted(by_space):
            ks = by_space[s]
            limit = prob.spaces[s].limit
            tail = [v.after_makespan(prob.reuse_gap, f"mk_space{s}")] if whole else []
            model.add_cumulative(
                [*(mv.hold[k] for k in ks), *tail],
                [*(prob.items[k].footprint for k in ks), *([limit] * len(tail))],
                limit,
            )
        # spaces with mixed item sizes: concrete aligned offsets, no two items overlapping in
        # both hold time and bytes. Uniform spaces get slots after solving by interval
        # colouring instead, which always succeeds when the cumulative holds; measured at the
        # same deterministic budget (5 units) on 60- and 180-op tile pipelines, the colouring
        # model reached makespans 2011 and 6060, the 2-D no-overlap model 2108 and 6207
        by_space = {}
        for k in sorted(mv.place):
            by_space.setdefault(prob.items[k].space, []).append(k)
        for s in sorted(by_space):
            ks = by_space[s]
            model.add_no_overlap_2d([mv.hold[k] for k in ks], [mv.place[k] for k in ks])

    def hint(self, model: cp_model.CpModel, v: Variables, starts: Sequence[int],
             offsets: Sequence[int]) -> None:
        prob, mv, dur = v.prob, memory_vars(v), v.prob.dur
        for k in sorted(mv.hold):
            it = prob.items[k]
            end = max(starts[a] + dur[a] for a in it.tails)
            if k in mv.live_end_var:
                model.add_hint(mv.live_end_var[k], end)
            model.add_hint(mv.hold_size[k], end + prob.reuse_gap - starts[it.first])
            if k in mv.slot:
                model.add_hint(mv.slot[k], offsets[k] // prob.spaces[it.space].alignment)

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        out: list[str] = []
        holds: dict[int, list[tuple[int, int, int, int, int]]] = {}
        for k, it in enumerate(prob.items):
            sp = prob.spaces[it.space]
            if not sp.binding:
                continue
            o = offsets[k]
            if o % sp.alignment or o < 0 or (sp.slot and o + it.footprint > sp.limit):
                out.append(f"item {k} offset {o}")
            if not sp.slot and o + it.bytes > sp.capacity:
                out.append(f"item {k} offset {o}")
            begin, end = prob.hold(k, starts)
            holds.setdefault(it.space, []).append((begin, end, o, o + it.footprint, k))
        for lst in holds.values():
            active: list[tuple[int, int, int, int]] = []  # (end, lo, hi, item) of holds still live
            for s1, e1, o1, p1, k1 in sorted(lst):
                active = [h for h in active if h[0] > s1]
                for _, o2, p2, k2 in active:
                    if o1 < p2 and o2 < p1:
                        out.append(f"items {k2},{k1} share bytes while held")
                active.append((e1, o1, p1, k1))
        return out

    def bounds(self, prob: Problem, heads: Sequence[int], tails: Sequence[int],
               core_names: tuple[int, ...] | None) -> list[tuple[str, int]]:
        """None yet: capacity bounds need the live sets, which depend on the order."""
        return []

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
        return address_edges(prob, starts, offsets)

    def offsets(self, solver: cp_model.CpSolver, v: Variables) -> list[int]:
        """Every item's offset in a solution (static ones, and the solved ones of mixed spaces;
        uniform spaces' slots are coloured afterwards)."""
        prob, mv = v.prob, memory_vars(v)
        out = [it.static_offset for it in prob.items]
        for k, var in mv.slot.items():
            out[k] = solver.value(var) * prob.spaces[prob.items[k].space].alignment
        return out


MEMORY = Memory()


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

    def place(self, i: int) -> dict[int, list[tuple[int, int]]] | tuple[int, int]:
        """Offsets for op ``i``'s new items now, or the (space, item) that does not fit."""
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

    def next_change(self) -> int | None:
        return self.frees[0][0] if self.frees else None


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
