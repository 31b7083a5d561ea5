"""The sync plan that always exists: one baton of flags per group of linked cores.

The main planner (:mod:`staticsched.emit.sync.ids`) gives every kept flag an id under the budget
and the reuse rule without moving any op. When ids run short -- a timetable whose flags stay
set for long stretches, typically many cross-core results produced long before they are
consumed -- it may find no id that a credit can free. This planner then trades time for ids
and never fails (given at least one id per pool it uses):

* the kept dependencies of each group of cores joined by cross-core flags are put in one
  chain, in the order their consumers start in the timetable;
* a *baton* visits, for each dependency in turn, a slot on the producer's pipe after the
  producer (the SET side; never earlier than where the baton was before) and then the slot
  right before the consumer (the WAIT side);
* each move of the baton to another pipe is a flag; a move to another core goes through one
  *gateway* pipe per core (an empty pipe when the core has one, else its least busy one), so
  every cross-core flag of a core pair is set on one pipe and waited on one pipe.

Every SET is then happens-after every WAIT before it on the baton's path, so one id per pool
(id 0) satisfies the reuse rule, and since the WAITs of each pool sit on one pipe in program
order, no WAIT can consume another one's SET. Deadlock-freedom: on each pipe the baton's
instructions sit in baton order (slots only grow along the path), so ranking each instruction
by the next baton instruction at or after it on its pipe, program order never lowers the rank
and every flag raises it: there is no cycle. The program's nominal replay then re-times it:
consumers whose dependency waited for the baton start later.
"""

from __future__ import annotations

import bisect
import itertools

from staticsched.emit.sync.layout import Layout
from staticsched.emit.sync.plan import Flag, PlanStream, SyncPlan, SyncStats, ids_used
from staticsched.model.graphs import DisjointSets
from staticsched.model.opgraph import Edge


def _groups(lay: Layout, kept: list[tuple[int, int, Edge]]) -> dict[int, int]:
    """Core -> group (its smallest core): cores joined by kept cross-core dependencies."""
    sets = DisjointSets(dict.fromkeys(c for c, _ in lay.pipes))
    for p, c, _ in kept:
        sets.union(lay.pipes[lay.pipe_of[p]][0], lay.pipes[lay.pipe_of[c]][0])
    return {c: sets.find(c) for c, _ in lay.pipes}


def _gateways(lay: Layout) -> dict[int, int]:
    """Core -> the pipe its cross-core baton moves use: an empty one, else the least busy."""
    busy: dict[int, int] = {}
    for q, seq in enumerate(lay.seq):
        busy[q] = sum(lay.end[x] - lay.start[x] for x in seq)
    out: dict[int, int] = {}
    for q, (core, _) in enumerate(lay.pipes):
        if core not in out or busy[q] < busy[out[core]]:
            out[core] = q
    return out


class _Baton:
    """Builds the baton's path: slots per pipe and the flags between them."""

    def __init__(self, lay: Layout) -> None:
        self.lay = lay
        self.starts = [[lay.start[x] for x in seq] for seq in lay.seq]
        self.gateway = _gateways(lay)
        #: (pipe, slot) -> sync entries in baton order; slot k sits right before op k
        self.slots: dict[tuple[int, int], list[tuple[str, int]]] = {}
        self.flags: list[Flag] = []
        self.last_slot: dict[int, int] = {}
        self.at: tuple[int, int] | None = None  # where the baton is: (pipe, slot)
        self.moves = 0

    def slot_at(self, q: int, time: int, floor: int = 0) -> int:
        """The first slot of pipe ``q`` whose op starts at ``time`` or later, not before
        ``floor`` nor before what the baton already used on ``q``."""
        return max(bisect.bisect_left(self.starts[q], time), floor, self.last_slot.get(q, 0))

    def visit(self, q: int, slot: int, src_op: int, dst_op: int, reason: str, item: str,
              time: int) -> None:
        """Move the baton to ``slot`` of pipe ``q``; flags name ``src_op -> dst_op``."""
        assert slot >= self.last_slot.get(q, 0), "baton slots must grow on every pipe"
        if self.at is not None and self.at[0] != q:
            pq, pslot = self.at
            pcore, core = self.lay.pipes[pq][0], self.lay.pipes[q][0]
            if pcore == core:
                self.flag("flag", (pq, pslot), (q, slot), src_op, dst_op, reason, item)
            else:
                ga, gb = self.gateway[pcore], self.gateway[core]
                hops = [(pq, pslot)]
                if ga != pq:
                    hops.append((ga, self.slot_at(ga, time)))
                if gb != q:
                    hops.append((gb, self.slot_at(gb, time)))
                hops.append((q, slot))
                for a, b in itertools.pairwise(hops):
                    kind = "cross" if self.lay.pipes[a[0]][0] != self.lay.pipes[b[0]][0] else "flag"
                    last = b == hops[-1]
                    self.flag(kind, a, b, src_op, dst_op, reason if last else "relay",
                              item if last else "")
                    self.last_slot[b[0]] = b[1]
        self.last_slot[q] = slot
        self.at = (q, slot)

    def flag(self, kind: str, a: tuple[int, int], b: tuple[int, int], src_op: int, dst_op: int,
             reason: str, item: str) -> None:
        lay = self.lay
        (sc, su), (wc, wu) = lay.pipes[a[0]], lay.pipes[b[0]]
        f = len(self.flags)
        self.flags.append(Flag(f, kind, reason, sc, su, lay.ids[src_op], "after", wc, wu,
                               lay.ids[dst_op], "before", 0, item))
        self.slots.setdefault(a, []).append(("set", f))
        self.slots.setdefault(b, []).append(("wait", f))
        self.moves += 1

    def streams(self) -> list[PlanStream]:
        lay = self.lay
        out = []
        for q, (core, unit) in enumerate(lay.pipes):
            entries: list[tuple[str, str | int]] = []
            seq = lay.seq[q]
            for k in range(len(seq) + 1):
                entries += self.slots.get((q, k), ())
                if k < len(seq):
                    entries.append(("op", lay.ids[seq[k]]))
            out.append(PlanStream(core, unit, entries))
        return out


def plan_baton(
    lay: Layout, deps: list[tuple[int, int, Edge]], kept: list[tuple[int, int, Edge]], reason: str
) -> SyncPlan:
    """The baton plan of the ``kept`` dependencies (see the module docstring).

    Parameters
    ----------
    lay
        The timetable's layout (pipes, program order, times).
    deps, kept
        Every cross-pipe dependency, and those not implied by program order and other kept
        flags (the main planner's elimination).
    reason
        Why the main planner gave up; recorded in the stats.
    """
    group_of = _groups(lay, kept)
    chains: dict[int, list[int]] = {}
    for f, (_, c, _) in enumerate(kept):
        chains.setdefault(group_of[lay.pipes[lay.pipe_of[c]][0]], []).append(f)
    baton = _Baton(lay)
    for group in sorted(chains):
        baton.at = None
        order = sorted(
            chains[group],
            key=lambda f: (lay.start[kept[f][1]], lay.pipe_of[kept[f][1]], lay.end[kept[f][0]],
                           lay.pipe_of[kept[f][0]], f),
        )
        time = 0
        for f in order:
            p, c, e = kept[f]
            sq, dq = lay.pipe_of[p], lay.pipe_of[c]
            time = max(time, lay.end[p])
            # the SET side: after the producer, where the pipe's ops start no earlier than the
            # baton got here (the consumer of the previous dependency started)
            baton.visit(sq, baton.slot_at(sq, time, lay.pos[p] + 1), p, p, "relay", "", time)
            time = lay.start[c]
            baton.visit(dq, lay.pos[c], p, c, e.reason, e.item, time)
    flags = baton.flags
    stats = SyncStats(
        dependencies=len(deps),
        flags_naive=len(deps),
        flags_kept=len(kept),
        flags_eliminated=len(deps) - len(kept),
        credits=0,
        cross_core=sum(1 for f in flags if f.kind == "cross"),
        ids_used=ids_used(lay.pipes, flags),
        relays=sum(1 for f in flags if f.reason == "relay"),
        fallback=reason,
    )
    return SyncPlan("flags", baton.streams(), flags, [e for _, _, e in deps], stats)
