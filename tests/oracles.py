"""Reference implementations the tests hold the fast ones to: written plainly, on op names,
with networkx, and used nowhere in the package."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import networkx as nx

from staticsched.errors import InfeasibleError
from staticsched.model.deps import edge_latency
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import Edge, OpGraph
from staticsched.model.program import Program


def semi_active_starts(
    graph: OpGraph,
    hw: Hardware,
    order: Mapping[tuple[int, str], Sequence[str]],
    edges: Iterable[Edge],
) -> dict[str, int]:
    """Earliest start of each op given each pipe's order and the happens-before edges: the
    longest path (DESIGN §5 normalisation; the solver's :func:`~staticsched.solver.normalize.
    semi_active` does this in index space).

    Parameters
    ----------
    order
        ``(core, unit) -> op ids`` in execution order; every op appears exactly once.
    edges
        Requirements ``end(src) + latency <= start(dst)`` (latency from
        :func:`staticsched.model.deps.edge_latency`).

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


def fluid_segments(
    capacities: Sequence[int], transfers: Sequence[tuple[int, int, int, tuple[int, ...]]]
) -> tuple[list[tuple[int, int, dict[int, Fraction]]], dict[int, int]]:
    """Max-min fair link sharing, event by event, written plainly (docs/program-format.md,
    "Shared links"): ``transfers`` are ``(data start, work, cap, links)``. Events are whole
    cycles: a data start, or the first cycle by which an active transfer has moved its work at
    the current rates. Between two events the rates are constant; at each event the transfers
    that have moved their work leave, and the rates are recomputed from scratch by filling: the
    smallest of the remaining caps and the links' equal shares fixes its transfers, then the
    rest go on.

    Returns the segments ``(t0, t1, {transfer: rate})`` and every transfer's end cycle.
    """
    # a transfer's work left is brought up to date only when its rate changes (at ``since``);
    # its end at an unchanged rate stays where it was (hundreds of transfers share a link at
    # once in drawn programs, and most keep their rate from one event to the next)
    left = {i: Fraction(w) for i, (_, w, _, _) in enumerate(transfers)}
    since: dict[int, int] = {}
    rate_of: dict[int, Fraction] = {}
    end_of: dict[int, int] = {}
    starts = sorted(d for d, _, _, _ in transfers)
    ended: dict[int, int] = {}
    segments = []
    t = min((d for d, _, _, _ in transfers), default=0)
    while len(ended) < len(transfers):
        active = [i for i, (d, _, _, _) in enumerate(transfers) if d <= t and i not in ended]
        rates: dict[int, Fraction] = {}
        room = {k: Fraction(c) for k, c in enumerate(capacities)}
        while len(rates) < len(active):
            rest = [i for i in active if i not in rates]
            # each link's unfixed users and equal share, once per level
            users = {k: sum(1 for i in rest if k in transfers[i][3]) for k in room}
            share = {k: room[k] / users[k] for k in room if users[k]}
            level = min([Fraction(min(transfers[i][2] for i in rest)), *share.values()])
            fixed = [i for i in rest if transfers[i][2] == level
                     or any(share[k] == level for k in transfers[i][3])]
            for i in fixed:
                rates[i] = level
            for k in room:
                room[k] -= level * sum(1 for i in fixed if k in transfers[i][3])
        for i in active:
            if rate_of.get(i) == rates[i]:
                continue
            if i in rate_of:
                left[i] -= rate_of[i] * (t - since[i])
            since[i], rate_of[i] = t, rates[i]
            if rates[i] > 0:
                end_of[i] = t + math.ceil(left[i] / rates[i])
            else:
                end_of.pop(i, None)
        k = bisect.bisect_right(starts, t)
        future = starts[k:k + 1]
        nxt = min([*future, *(end_of[i] for i in active if i in end_of)])
        segments.append((t, nxt, dict(rates)))
        for i in active:
            done = end_of[i] <= nxt if i in end_of else left[i] <= 0  # no work left at nxt
            if done:
                ended[i] = nxt
        t = nxt
    return segments, ended


def hb_graph(
    p: Program, pairs: Iterable[tuple[tuple[int, int], tuple[int, int]]] | None = None
) -> nx.DiGraph:
    """Happens-before of a flags program as a graph of (stream, index) nodes: program order
    plus, per flag key, the n-th set -> the n-th wait, n-th by stated cycle (an independent
    oracle, not the verifier's clocks; a counting flag's n-th wait needs n sets, so the edge
    holds for it too).
    ``pairs`` replaces the set -> wait edges by given ones (a sync plan's own pairing)."""
    g = nx.DiGraph()
    sets: dict[tuple, list] = {}
    waits: dict[tuple, list] = {}
    for s, st in enumerate(p.streams):
        for i, ins in enumerate(st.instrs):
            g.add_node((s, i))
            if i:
                g.add_edge((s, i - 1), (s, i))
            if ins.kind in ("set_flag", "wait_flag"):
                key = ("f", st.core, ins.src, ins.dst, ins.event)
            elif ins.kind == "set_cross":
                key = ("c", st.core, ins.peer_core, ins.event)
            elif ins.kind == "wait_cross":
                key = ("c", ins.peer_core, st.core, ins.event)
            else:
                continue
            (sets if ins.kind.startswith("set") else waits).setdefault(key, []).append((s, i))
    if pairs is not None:
        g.add_edges_from(pairs)
        return g
    # the n-th of a key's sets or waits is n-th in time: one core's pipes issue the waits of a
    # counting cross-core flag in their cycles' order, not in the order streams are listed
    def when(node: tuple[int, int]) -> tuple[int, int, int]:
        return (p.streams[node[0]].instrs[node[1]].cycle, *node)

    for key, ss in sets.items():
        g.add_edges_from(zip(sorted(ss, key=when), sorted(waits.get(key, []), key=when), strict=False))
    return g
