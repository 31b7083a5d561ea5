"""Happens-before requirements of a placed schedule.

``graph.edges`` gives explicit deps and same-item RAW/WAR/WAW edges. Once items
have addresses, two different items whose byte ranges overlap in one core's
space and whose live ranges follow each other add WAR/WAW edges from the
earlier item's tail accesses (:func:`tail_accesses`) to the later item's first
write (:func:`address_edges`, by the rule of :func:`reuse_predecessors`).
Each edge carries :func:`edge_latency`. The solver's normaliser
(:mod:`staticsched.solver.normalize`) turns a timetable into its semi-active form
with these edges (DESIGN §5 normalisation).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import Edge, OpGraph
from staticsched.model.placement import Placement


def address_edges(graph: OpGraph, placements: Sequence[Placement]) -> tuple[Edge, ...]:
    """WAR/WAW edges created by address reuse between different items.

    For items ``X`` then ``Y`` (``X.end <= Y.start``) overlapping in ``(core, space)`` bytes:
    ``WAW`` from X's last write to Y's first write and ``WAR`` from each read of X after its
    last write to Y's first write. Only the latest earlier occupant of each byte gets an edge
    (:func:`reuse_predecessors`): it is itself ordered after the occupants before it, so
    together with the same-item edges this orders every access of every earlier occupant
    before every access of ``Y`` — with a number of edges linear in the number of items.
    Deterministic order.
    """
    acc = graph.accesses
    by_space: dict[tuple[int, str], list[Placement]] = {}
    for p in placements:
        # an item nothing writes never occupies its bytes
        if p.space and p.bytes > 0 and p.item in acc and first_write(acc[p.item]) is not None:
            by_space.setdefault((p.core, p.space), []).append(p)
    found: dict[tuple[int, int], Edge] = {}
    # identical cores lay their items out alike: the rule runs once per distinct layout
    reuses: dict[tuple[tuple[int, int], ...], list[set[int]]] = {}
    for key in sorted(by_space):
        plist = sorted(by_space[key], key=lambda p: (p.start, p.end, p.offset, p.item))
        spans = tuple((p.offset, p.offset + p.bytes) for p in plist)
        prev = reuses.get(spans)
        if prev is None:
            prev = reuses[spans] = reuse_predecessors(spans)
        for y, owners in zip(plist, prev, strict=True):
            y_first = first_write(acc[y.item])
            assert y_first is not None
            dst = graph.ops[y_first].id
            for x in sorted((plist[k] for k in owners), key=lambda p: p.item):
                if x.end > y.start:
                    # overlapping live ranges in overlapping bytes: not an edge, a conflict
                    # that Schedule.verify reports
                    continue
                last_w, reads_after = tail_accesses(acc[x.item])
                if last_w is not None and last_w != y_first:
                    found.setdefault((last_w, y_first), Edge(graph.ops[last_w].id, dst, "waw", y.item))
                for r in reads_after:
                    if r != y_first:
                        found.setdefault((r, y_first), Edge(graph.ops[r].id, dst, "war", y.item))
    return tuple(found[k] for k in sorted(found, key=lambda k: (k[1], k[0])))


def reuse_predecessors(spans: Sequence[tuple[int, int]]) -> list[set[int]]:
    """The address-reuse rule on one space: for the byte ranges ``[lo, hi)`` of its items in
    the order they occupy them (by live range), the indices of the earlier items that were the
    latest occupant of some byte of each. Only those need a reuse edge to it; the occupants
    before them reach it through them. :func:`address_edges` (names) and the solver's
    normaliser (indices) both derive their edges from this."""
    segs = _SegmentMap()
    out: list[set[int]] = []
    for k, (lo, hi) in enumerate(spans):
        out.append(segs.owners(lo, hi))
        segs.assign(lo, hi, k)
    return out


class _SegmentMap:
    """Disjoint address segments ``[lo, hi)`` each owned by the item that last occupied it."""

    def __init__(self) -> None:
        self.los: list[int] = []
        self.segs: list[tuple[int, int, int]] = []

    def _span(self, lo: int, hi: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.los, lo) - 1
        if i < 0 or self.segs[i][1] <= lo:
            i += 1
        j = bisect.bisect_left(self.los, hi)
        return max(i, 0), j

    def owners(self, lo: int, hi: int) -> set[int]:
        i, j = self._span(lo, hi)
        return {owner for _, _, owner in self.segs[i:j]}

    def assign(self, lo: int, hi: int, owner: int) -> None:
        i, j = self._span(lo, hi)
        keep: list[tuple[int, int, int]] = []
        if i < j:
            first_lo, _first_hi, first_owner = self.segs[i]
            if first_lo < lo:
                keep.append((first_lo, lo, first_owner))
        keep.append((lo, hi, owner))
        if i < j:
            _last_lo, last_hi, last_owner = self.segs[j - 1]
            if last_hi > hi:
                keep.append((hi, last_hi, last_owner))
        self.segs[i:j] = keep
        self.los[i:j] = [s[0] for s in keep]


def intended_writes(graph: OpGraph) -> dict[int, tuple[str, ...]]:
    """Per op (index) with a read of an item that several ops write, the op each of its reads
    must see: the item's latest writer before it in the op list (design refinement 1: the op
    list is a sequential program), ``""`` for a read of an item one op writes. A
    read-modify-write op's read sees the write before its own."""
    writers: dict[str, int] = {}
    for name, acc in graph.accesses.items():
        writers[name] = len({i for i, m in acc if m == "w"})
    seen: dict[tuple[int, str], str] = {}
    for name, acc in graph.accesses.items():
        if writers[name] < 2:
            continue
        last = ""
        for i, m in acc:
            if m == "w":
                last = graph.ops[i].id
            else:
                seen[(i, name)] = last
    out: dict[int, tuple[str, ...]] = {}
    for i in sorted({i for i, _ in seen}):
        out[i] = tuple(seen.get((i, r), "") for r in graph.ops[i].reads)
    return out


def first_write(acc: Sequence[tuple[int, str]]) -> int | None:
    """The first op (index) writing an item, from its accesses in program order
    (``OpGraph.accesses``): where its live range begins."""
    for i, m in acc:
        if m == "w":
            return i
    return None


def tail_accesses(acc: Sequence[tuple[int, str]]) -> tuple[int | None, list[int]]:
    """An item's tail accesses, which end its live range: its last write and the reads after
    it (sorted, without the last write's own read of a read-modify-write op)."""
    last_w = None
    reads: list[int] = []
    for i, m in acc:
        if m == "w":
            last_w = i
            reads = []
        else:
            reads.append(i)
    # a read-modify-write op appears as ("r", "w") with the same index: not a later read
    reads = [r for r in reads if r != last_w]
    return last_w, sorted(set(reads))


def edge_latency(graph: OpGraph, hw: Hardware, edge: Edge) -> int:
    """Cycles between ``edge.src`` ending and ``edge.dst`` starting
    (:meth:`~staticsched.model.hardware.SyncModel.latency` of their pipes)."""
    a = graph.op(edge.src)
    b = graph.op(edge.dst)
    return hw.sync.latency((a.core, a.unit), (b.core, b.unit))
