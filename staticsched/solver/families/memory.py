"""The memory family: items hold bytes of their (core, space) from their first access to their
last plus the reuse gap; binding spaces stay within their limit, mixed-size spaces get
concrete aligned offsets, uniform ones slots coloured after solving
(:func:`~staticsched.solver.addresses.colour_slots`).
:class:`~.memory_tracker.MemoryTracker` is the list scheduler's view."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from ortools.sat.python import cp_model

from staticsched.model.deps import reuse_predecessors, tail_accesses
from staticsched.model.hardware import Hardware, round_up
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families.base import Edge, Group, Passive, Stuck
from staticsched.solver.problem import ItemSpec, Problem, ProblemMap, SpaceSpec
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


class Memory(Passive):
    name = "memory"

    def attach(self, prob: Problem, pmap: ProblemMap, group: Group) -> tuple[Problem, ProblemMap]:
        """The bounded spaces of the group's cores and their items (:func:`_items`)."""
        # what _items reads, in the group's own numbers and a canonical order: identical cores
        # (whose items the graph may list in different orders) compute it once. Only when no
        # two items share a first access, space and size: _items' order then never falls back
        # on the items' graph order, which is the group's own
        graph, local, listed = group.graph, group.local, group.item_list
        canon = sorted((tuple((local[i], m) for i, m in acc), graph.items[gi].space, graph.items[gi].bytes, k)
                       for k, (gi, acc) in enumerate(listed))
        if len({(e[0][0][0], e[1], e[2]) for e in canon}) < len(canon):
            order, key = list(range(len(listed))), None
        else:
            order, key = [e[3] for e in canon], ("memory", prob, tuple(e[:3] for e in canon))
        found = group.cache.get(key) if key is not None else None
        if found is None:
            found = _items(group, [listed[k] for k in order], prob.dur, prob.edges)
            if key is not None:
                group.cache[key] = found
        spaces, items, positions = found
        item_ids = [listed[order[k]][0] for k in positions]
        return attrs.evolve(prob, spaces=spaces, items=items), attrs.evolve(pmap, items=item_ids)

    def precheck(self, graph: OpGraph, hw: Hardware, prob: Problem, pmap: ProblemMap) -> list[str]:
        """All items one op accesses must be in their space at once."""
        spec = {(pmap.cores[sp.core], sp.name): sp for sp in prob.spaces}
        bounded = {s.name for s in hw.spaces if s.bounded}
        out = []
        for gi in pmap.ops:
            op = graph.ops[gi]
            by_space: dict[str, list[str]] = {}
            for name in dict.fromkeys((*op.reads, *op.writes)):
                it = graph.item_map[name]
                if it.space in bounded and it.bytes > 0:
                    by_space.setdefault(it.space, []).append(name)
            for space in sorted(by_space):
                names = by_space[space]
                sp = spec[(op.core, space)]
                if len(names) < 2:
                    continue
                sizes = [graph.item_map[n].bytes for n in names]
                # the space's own capacity: flag slots are dropped when they leave an op no room
                if not _fits_together(sizes, sp.capacity, sp.alignment, sp.slot, sp.full_limit or sp.limit):
                    listed = ", ".join(f"'{n}' ({b} B)" for n, b in zip(names, sizes, strict=True))
                    feet = sum(round_up(b, sp.alignment) for b in sizes)
                    out.append(f"op '{op.id}' needs items {listed} in {space} of core {op.core} at "
                               f"the same time: {feet} B aligned to {sp.alignment} B do not fit its "
                               f"capacity of {sp.capacity} B")
        return out

    def explain(self, graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> str | None:
        if stuck.kind != self.name:
            return None
        op = graph.ops[pmap.ops[stuck.op]]
        sp = prob.spaces[stuck.space]
        item = graph.items[pmap.items[stuck.item]]
        held = []
        for k in stuck.holders:
            it = graph.items[pmap.items[k]]
            last = ", ".join(f"'{graph.ops[pmap.ops[a]].id}'" for a in prob.items[k].tails)
            held.append(f"'{it.name}' ({it.bytes} B, last used by {last})")
        return (f"op '{op.id}' on core {op.core} needs item '{item.name}' ({item.bytes} B) in "
                f"{sp.name}, but the {sp.capacity} B there are held by {', '.join(held)}, which "
                f"must stay until their last use")

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


def _fits_together(sizes: list[int], capacity: int, align: int, slot: int, limit: int) -> bool:
    """Whether items of these sizes can sit side by side at aligned offsets."""
    if slot:
        return len(sizes) * slot <= limit
    o = 0
    for b in sorted(sizes, reverse=True):
        if o + b > capacity:
            return False
        o += round_up(b, align)
    return True


def _items(
    group: Group,
    listed: Sequence[tuple[int, list[tuple[int, str]]]],
    dur: Sequence[int],
    edges: Sequence[tuple[int, int, int]],
) -> tuple[list[SpaceSpec], list[ItemSpec], list[int]]:
    """The bounded spaces and the items of ``listed`` (the group's items with their accesses),
    in a structural order, with each item's position in ``listed``.

    With ``flag_slots``, a uniform space (one footprint) whose items are first written on one
    pipe and last accessed on another offers at most ``event_ids`` slots: every reuse of a
    slot then needs a flag from the pipe that last read it to the pipe that writes it next,
    and the sync planner can reuse an id only after a WAIT that happens before the new SET
    (the reuse rule). Cycling through more slots than ids leaves ids free in time but never
    reusable -- each id's last WAIT is for a slot the new SET does not depend on -- and the
    reverse pool, full of the same run-ahead's flags, has none for a credit
    (``ffn_layernorm.json``: MTE2 eight loads ahead of MTE1 in 16 L1 slots). With at most
    ``event_ids`` slots a slot's previous WAIT is reached through the slot's own data, as with
    a TQue of that depth (docs/design.md, refinement 9).
    """
    graph, hw, local, flag_slots = group.graph, group.hw, group.local, group.flag_slots
    core_rel = {c: k for k, c in enumerate(group.cores)}
    preds: dict[int, list[tuple[int, int]]] = {}
    for a, b, lat in edges:
        preds.setdefault(b, []).append((a, lat))
    ops = graph.ops
    by_space: dict[tuple[int, str], list[tuple[int, int, int, tuple[int, ...], int]]] = {}
    pipes_of: dict[tuple[int, str], set[str]] = {}
    # an item is named by its position in the group's list (in graph order): the result is
    # then the same for every group with the same structure
    for pos, (gi, accesses) in enumerate(listed):
        it = graph.items[gi]
        first = accesses[0][0]
        last_w, reads = tail_accesses(accesses)
        assert last_w is not None, "a checked graph writes every item it reads"
        tails = sorted({local[last_w], *(local[r] for r in reads)})
        key = (core_rel[ops[first].core], it.space)
        live = _min_live([local[i] for i, _ in accesses], tails, dur, preds)
        by_space.setdefault(key, []).append((pos, it.bytes, local[first], tuple(tails), live))
        pipes_of.setdefault(key, set()).update(ops[i].unit for i in (first, last_w, *reads))
    spaces: list[SpaceSpec] = []
    items: list[ItemSpec] = []
    positions: list[int] = []
    space_order = {s.name: k for k, s in enumerate(hw.spaces)}
    for key in sorted(by_space, key=lambda k: (k[0], space_order[k[1]])):
        sp = hw.space(key[1])
        align = sp.alignment
        entries = by_space[key]
        # structural order (first access, tails, size), not the names' order: identical cores
        # must give identical problems
        entries.sort(key=lambda e: (e[2], e[3], e[1], e[0]))
        feet = [round_up(b, align) for _, b, _, _, _ in entries]
        if len(set(feet)) == 1:
            slot = feet[0]
            n_slots = (sp.capacity - max(e[1] for e in entries)) // slot + 1
            full_limit = n_slots * slot
            ids = hw.sync.event_ids
            capped = flag_slots and len(pipes_of[key]) > 1 and 0 < ids < n_slots
            if capped:
                n_slots = ids
            limit = n_slots * slot
            binding = len(entries) > n_slots
            capped = capped and binding
        else:
            slot, capped = 0, False
            limit = full_limit = round_up(sp.capacity, align)
            total = 0
            binding = False
            for (_, b, _, _, _), f in zip(entries, feet, strict=True):
                binding = binding or total + b > sp.capacity
                total += f
        k = len(spaces)
        spaces.append(SpaceSpec(key[0], key[1], sp.capacity, align, slot, limit, binding, capped,
                                full_limit))
        offset = 0
        for (pos, b, first, tails, live), f in zip(entries, feet, strict=True):
            items.append(ItemSpec(k, b, f, first, tails, 0 if binding else offset, live))
            positions.append(pos)
            offset += f
    return spaces, items, positions


def _min_live(
    accessors: list[int], tails: list[int], dur: Sequence[int], preds: dict[int, list[tuple[int, int]]]
) -> int:
    """Longest path from the first access's start to the end of a tail access, along edges
    between the item's own accesses (program order is topological for them); ``preds``: each
    op's incoming edges ``(source, latency)``."""
    order = list(dict.fromkeys(accessors))
    dist = {order[0]: 0}
    for x in order[1:]:
        best = -1
        for y, lat in preds.get(x, ()):
            d = dist.get(y)
            if d is not None:
                best = max(best, d + dur[y] + lat)
        if best >= 0:
            dist[x] = best
    return max(dist.get(a, 0) + dur[a] for a in tails)
