"""Reference implementations the tests hold the fast ones to: written plainly, on op names,
with networkx, and used nowhere in the package."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from staticsched.errors import InfeasibleError
from staticsched.model.deps import edge_latency
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import Edge, OpGraph


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
