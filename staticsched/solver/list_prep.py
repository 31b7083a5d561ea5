"""The list scheduler's per-problem tables, shared by every variant and by the families'
trackers: successors, the items each op takes first and releases, the tokens each op opens
and closes, tails, and the orders the variants allocate memory in."""

from __future__ import annotations

from collections.abc import Sequence

from staticsched.solver.paths import tail_lengths, topo_order
from staticsched.solver.problem import Problem


class Prep:
    """Per-problem tables shared by all variants."""

    def __init__(self, prob: Problem) -> None:
        n = prob.n
        self.succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.npred = [0] * n
        for a, b, lat in prob.edges:
            self.succ[a].append((b, lat))
            self.npred[b] += 1
        self.new_items: list[dict[int, list[int]]] = [{} for _ in range(n)]
        self.tail_of: list[list[int]] = [[] for _ in range(n)]
        for k, it in enumerate(prob.items):
            self.new_items[it.first].setdefault(it.space, []).append(k)
            for a in it.tails:
                self.tail_of[a].append(k)
        self.produces: list[list[int]] = [[] for _ in range(n)]
        self.consumes: list[list[int]] = [[] for _ in range(n)]
        for k, tok in enumerate(prob.tokens):
            self.produces[tok.producer].append(k)
            for v in tok.consumers:
                self.consumes[v].append(k)
        self.tail = tail_lengths(prob)
        busy = [0] * len(prob.pipes)
        for i in range(n):
            busy[prob.pipe_of[i]] += prob.dur[i]
        bottleneck = max(range(len(busy)), key=lambda p: (busy[p], -p)) if busy else -1
        self.off_bottleneck = [0 if prob.pipe_of[i] == bottleneck else 1 for i in range(n)]
        self.orders: dict[str, list[int]] = {}

    def order(self, prob: Problem, name: str) -> list[int]:
        if name not in self.orders:
            if name == "graph":
                order = topo_order(prob)
            elif name == "release":
                order = release_order(prob, self.order(prob, "graph"))
            else:
                order = topo_order(prob, [(-self.tail[i], self.off_bottleneck[i], i) for i in range(prob.n)])
            self.orders[name] = order
        return self.orders[name]


def release_order(prob: Problem, graph_order: Sequence[int]) -> list[int]:
    """A topological order in which every op follows its latest predecessor in
    ``graph_order``, not its own place there: an op without predecessors keeps its place, the
    others are released where the last op they wait for stands.

    A graph lists tasks one after another, so a later task's tiles stand behind every tile of
    the earlier one even when they need only its first blocks; allocating memory in graph
    order then keeps them out until the end (the unfused 4096^3 matmul -> gelu: its gelu tiles
    ran after the whole matmul, 1,117,984 cycles; released after the blocks they read,
    1,055,349 against a bound of 1,055,180)."""
    pos = [0] * prob.n
    for k, i in enumerate(graph_order):
        pos[i] = k
    preds: list[list[int]] = [[] for _ in range(prob.n)]
    for a, b, _ in prob.edges:
        preds[b].append(a)
    rel = [0] * prob.n
    for i in graph_order:
        rel[i] = max((rel[p] for p in preds[i]), default=pos[i])
    return topo_order(prob, [(rel[i], pos[i]) for i in range(prob.n)])
