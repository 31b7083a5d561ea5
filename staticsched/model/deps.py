"""Happens-before requirements of a placed schedule and the timing they imply.

``graph.edges`` gives explicit deps and same-item RAW/WAR/WAW edges. Once items
have addresses, two different items whose byte ranges overlap in one core's
space and whose live ranges follow each other add WAR/WAW edges from the
earlier item's last accesses to the later item's first write
(:func:`address_edges`). :func:`semi_active_starts` then gives the earliest
start of every op an in-order executor would reach (DESIGN §5 normalisation).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import Edge, OpGraph
from staticsched.model.placement import Placement


def address_edges(graph: OpGraph, placements: Sequence[Placement]) -> tuple[Edge, ...]:
    """WAR/WAW edges created by address reuse between different items.

    For items ``X`` then ``Y`` (``X.end <= Y.start``) overlapping in ``(core, space)`` bytes:
    ``WAW`` from X's last write to Y's first write and ``WAR`` from each read of X after its
    last write to Y's first write. Only the latest earlier occupant of each byte gets an edge:
    it is itself ordered after the occupants before it, so together with the same-item edges
    this orders every access of every earlier occupant before every access of ``Y`` — with a
    number of edges linear in the number of items. Deterministic order.
    """
    acc = graph.accesses
    by_space: dict[tuple[int, str], list[Placement]] = {}
    for p in placements:
        if p.space and p.bytes > 0 and p.item in acc:
            by_space.setdefault((p.core, p.space), []).append(p)
    found: dict[tuple[int, int], Edge] = {}
    for key in sorted(by_space):
        plist = sorted(by_space[key], key=lambda p: (p.start, p.end, p.offset, p.item))
        segs = _SegmentMap()
        for y in plist:
            y_first = _first_write(acc[y.item])
            if y_first is None:
                continue
            dst = graph.ops[y_first].id
            for x in segs.owners(y.offset, y.offset + y.bytes):
                if x.end > y.start:
                    # overlapping live ranges in overlapping bytes: not an edge, a conflict
                    # that Schedule.verify reports
                    continue
                last_w, reads_after = _tail_accesses(acc[x.item])
                if last_w is not None and last_w != y_first:
                    found.setdefault((last_w, y_first), Edge(graph.ops[last_w].id, dst, "waw", y.item))
                for r in reads_after:
                    if r != y_first:
                        found.setdefault((r, y_first), Edge(graph.ops[r].id, dst, "war", y.item))
            segs.assign(y.offset, y.offset + y.bytes, y)
    return tuple(found[k] for k in sorted(found, key=lambda k: (k[1], k[0])))


class _SegmentMap:
    """Disjoint address segments ``[lo, hi)`` each owned by the item that last occupied it."""

    def __init__(self) -> None:
        self.los: list[int] = []
        self.segs: list[tuple[int, int, Placement]] = []

    def _span(self, lo: int, hi: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.los, lo) - 1
        if i < 0 or self.segs[i][1] <= lo:
            i += 1
        j = bisect.bisect_left(self.los, hi)
        return max(i, 0), j

    def owners(self, lo: int, hi: int) -> list[Placement]:
        i, j = self._span(lo, hi)
        out: dict[str, Placement] = {}
        for _, _, p in self.segs[i:j]:
            out[p.item] = p
        return [out[k] for k in sorted(out)]

    def assign(self, lo: int, hi: int, owner: Placement) -> None:
        i, j = self._span(lo, hi)
        keep: list[tuple[int, int, Placement]] = []
        if i < j:
            first_lo, _first_hi, first_p = self.segs[i]
            if first_lo < lo:
                keep.append((first_lo, lo, first_p))
        keep.append((lo, hi, owner))
        if i < j:
            _last_lo, last_hi, last_p = self.segs[j - 1]
            if last_hi > hi:
                keep.append((hi, last_hi, last_p))
        self.segs[i:j] = keep
        self.los[i:j] = [s[0] for s in keep]


def _first_write(acc: list[tuple[int, str]]) -> int | None:
    for i, m in acc:
        if m == "w":
            return i
    return None


def _tail_accesses(acc: list[tuple[int, str]]) -> tuple[int | None, list[int]]:
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
    """Cycles between ``edge.src`` ending and ``edge.dst`` starting: the flag latency when the
    edge crosses pipes (a flag carries it), the cross-core latency across cores, else 0."""
    a = graph.op(edge.src)
    b = graph.op(edge.dst)
    if a.core != b.core:
        return hw.sync.cross_core_latency
    if a.unit != b.unit:
        return hw.sync.flag_latency
    return 0


def semi_active_starts(
    graph: OpGraph,
    hw: Hardware,
    order: Mapping[tuple[int, str], Sequence[str]],
    edges: Iterable[Edge],
) -> dict[str, int]:
    """Earliest start of each op given each pipe's order and the happens-before edges.

    Parameters
    ----------
    order
        ``(core, unit) -> op ids`` in execution order; every op appears exactly once.
    edges
        Requirements ``end(src) + latency <= start(dst)`` (latency from :func:`edge_latency`).

    Raises
    ------
    InfeasibleError
        If the pipe orders contradict the edges (a cycle), naming the cycle.
    """
    g = nx.DiGraph()
    dur = {op.id: op.duration for op in graph.ops}
    g.add_nodes_from(op.id for op in graph.ops)
    for key in sorted(order):
        seq = order[key]
        for a, b in itertools.pairwise(seq):
            g.add_edge(a, b, w=0)
    for e in edges:
        w = edge_latency(graph, hw, e)
        if g.has_edge(e.src, e.dst):
            g[e.src][e.dst]["w"] = max(g[e.src][e.dst]["w"], w)
        else:
            g.add_edge(e.src, e.dst, w=w)
    try:
        topo = list(nx.lexicographical_topological_sort(g, key=lambda n: graph.op_index[n]))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(g)
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        raise InfeasibleError(f"pipe order contradicts dependencies: cycle {path}") from None
    start: dict[str, int] = {}
    for n in topo:
        s = 0
        for p in g.predecessors(n):
            s = max(s, start[p] + dur[p] + g[p][n]["w"])
        start[n] = s
    return start
