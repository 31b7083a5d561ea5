"""The solver's own view of an OpGraph: index-based, name-free scheduling problems.

:func:`build_problems` splits a graph into groups of cores that share no cross-core edge and
turns each group into a :class:`Problem`. A problem holds only structure (durations, pipes,
edges with latencies, item sizes and accesses, flag lifetimes) and no op or item names, so two
cores running the same program produce *equal* problems: the problem itself is the canonical
signature used to solve identical cores once. :class:`ProblemMap` maps local indices back to
the graph.

Flag lifetimes (DESIGN §5, refinement 4 of docs/design.md)
----------------------------------------------------------
The sync planner keeps a flag ``u -> v`` (pipe ``Q`` to pipe ``P``) only when the dependency is
not already implied by happens-before. Two facts bound what it can keep: if ``u`` is not the
last of ``v``'s predecessors on ``Q``, the last one implies it (program order on ``Q``); if
another successor of ``u`` on ``P`` starts before ``v``, that one implies it (program order on
``P``). So at most one flag leaves each producer per destination pipe, it exists only when the
producer is the last same-pipe predecessor of at least one consumer, and it is live from the
producer's end to the first start among its consumers on ``P`` (plus ``flag_latency``). A
:class:`Token` is that interval; counting tokens per (core, src pipe, dst pipe) bounds the
planner's live flags from above without counting every edge (which would wrongly reject fan-in
and fan-out at one event id).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver.links import LinkSpec, Xfer


@attrs.frozen
class SpaceSpec:
    """One bounded (core, space) with items in it.

    ``slot`` is the common footprint when every item rounds up to the same aligned size (then
    addresses are slots ``k * slot`` for ``k < limit // slot``), else 0 ("mixed": any aligned
    offset with ``offset + bytes <= capacity``). ``limit`` is the capacity the cumulative
    constraint uses. ``binding`` is False when every item fits at its own address at once (then
    items never share bytes and need no capacity or address constraint at all).
    """

    core: int
    name: str
    capacity: int
    alignment: int
    slot: int
    limit: int
    binding: bool


@attrs.frozen
class ItemSpec:
    """An item in a bounded space: its first access (a write) and its tail accesses (the last
    write and the reads after it), which end its live range."""

    space: int
    bytes: int
    footprint: int
    first: int
    tails: tuple[int, ...] = attrs.field(converter=tuple)
    static_offset: int = 0
    #: shortest possible live range: the longest path along the item's own accesses
    min_live: int = 0


@attrs.frozen
class Token:
    """The possible flag from ``producer`` to its successors ``consumers`` on one other pipe.

    It is live over ``[end(producer), min start(consumers) + latency + 1)``: the id stays taken
    through the cycle of the WAIT, since two SETs of one id in one cycle would be ambiguous
    (:meth:`Token.end`). Each entry of
    ``triggers`` belongs to a consumer that can need the flag and lists its *rivals*: its other
    predecessors on the producer's pipe. The token must be counted when the producer runs after
    all rivals of some trigger. Consumers that a later op of the producer's pipe reaches anyway
    (through some path) never need the flag and are no trigger; without triggers there is no
    token.
    """

    producer: int
    budget: int
    consumers: tuple[int, ...] = attrs.field(converter=tuple)
    latency: int
    triggers: tuple[tuple[int, ...], ...] = attrs.field(converter=tuple)

    @property
    def mandatory(self) -> bool:
        return any(not r for r in self.triggers)

    def end(self, first_consumer_start: int) -> int:
        """End of the lifetime given the first consumer's start."""
        return first_consumer_start + self.latency + 1


@attrs.frozen
class Budget:
    """An event-id pool: ``("flag", core, src unit, dst unit)`` or ``("cross", core, core)``."""

    key: tuple
    capacity: int
    binding: bool


@attrs.frozen(cache_hash=True)
class Problem:
    """A name-free scheduling problem over one group of cores (cores renumbered from 0).

    Attributes
    ----------
    pipes : tuple of (core, unit)
        Ops run on ``pipes[pipe[i]]``.
    edges : tuple of (src, dst, latency)
        ``start[dst] >= start[src] + dur[src] + latency``; sorted, no duplicates.
    hold : int
        Gap between two items sharing bytes: the flag latency (the reuse edge may cross pipes).
    links, xfers : tuple
        The shared links that bind this problem (:class:`~.links.LinkSpec`, with the units the
        problem may use) and its transfers on them (:class:`~.links.Xfer`). A transfer's
        ``dur`` is its full-rate duration until its rate is fixed (:func:`~.links.fix_rates`).
    link_overhead_holds : bool
        Whether a transfer holds its rate from its start (flags mode: a link's order is kept
        by flags, which release a transfer when another ends) or only from its data phase
        after its overhead (timed mode: exact cycles keep it).
    """

    n_cores: int
    pipes: tuple[tuple[int, str], ...] = attrs.field(converter=tuple)
    dur: tuple[int, ...] = attrs.field(converter=tuple)
    pipe: tuple[int, ...] = attrs.field(converter=tuple)
    edges: tuple[tuple[int, int, int], ...] = attrs.field(converter=tuple)
    spaces: tuple[SpaceSpec, ...] = attrs.field(converter=tuple)
    items: tuple[ItemSpec, ...] = attrs.field(converter=tuple)
    tokens: tuple[Token, ...] = attrs.field(converter=tuple)
    budgets: tuple[Budget, ...] = attrs.field(converter=tuple)
    hold: int = 0
    links: tuple[LinkSpec, ...] = attrs.field(converter=tuple, default=())
    xfers: tuple[Xfer, ...] = attrs.field(converter=tuple, default=())
    link_overhead_holds: bool = True
    #: cycles a flag takes from one core to another (``sync.cross_core_latency``)
    cross_hold: int = 0

    @property
    def n(self) -> int:
        return len(self.dur)


@attrs.frozen
class ProblemMap:
    """Where a problem's local indices live in the graph."""

    cores: tuple[int, ...] = attrs.field(converter=tuple)
    ops: tuple[int, ...] = attrs.field(converter=tuple)
    items: tuple[int, ...] = attrs.field(converter=tuple)


def relax_event_budgets(prob: Problem) -> Problem:
    """``prob`` with no event-id pool binding: for a program without flags (timed mode), or
    when the sync planner is left to fit the ids by moving SETs."""
    return attrs.evolve(prob, budgets=[attrs.evolve(b, binding=False) for b in prob.budgets])


def roundup(x: int, q: int) -> int:
    return -(-x // q) * q


def core_groups(graph: OpGraph, merge: Sequence[Sequence[int]] = ()) -> list[tuple[int, ...]]:
    """Cores connected by cross-core edges (or in one set of ``merge``), each group sorted,
    groups sorted by first core."""
    parent = {c: c for c in graph.cores}

    def find(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    idx, ops = graph.op_index, graph.ops
    for e in graph.edges:
        a, b = ops[idx[e.src]].core, ops[idx[e.dst]].core
        if a != b:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    for cores in merge:
        cores = [c for c in cores if c in parent]
        for a, b in itertools.pairwise(cores):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for c in graph.cores:
        groups.setdefault(find(c), []).append(c)
    return sorted(tuple(sorted(g)) for g in groups.values())


def build_problems(
    graph: OpGraph, hw: Hardware, merge: Sequence[Sequence[int]] = ()
) -> list[tuple[Problem, ProblemMap]]:
    """Split ``graph`` into independent core groups and describe each as a :class:`Problem`.

    Parameters
    ----------
    graph
        A checked OpGraph.
    hw
        Its hardware: pipes, bounded spaces (capacity, alignment), event-id budgets, latencies.
    merge
        Sets of cores that must be one problem besides (cores coupled by a shared link).

    Returns
    -------
    list of (Problem, ProblemMap)
        One pair per group of cores joined by cross-core edges (or ``merge``), in core order.
        Groups running the same program give equal problems (the problem is the canonical
        signature).
    """
    groups = core_groups(graph, merge)
    group_of = {c: k for k, g in enumerate(groups) for c in g}
    ops = graph.ops
    local = [0] * len(ops)
    members: list[list[int]] = [[] for _ in groups]
    for i, op in enumerate(ops):
        g = members[group_of[op.core]]
        local[i] = len(g)
        g.append(i)
    idx = graph.op_index
    edge_lists: list[list[tuple[int, int]]] = [[] for _ in groups]
    for e in graph.edges:
        s, d = idx[e.src], idx[e.dst]
        if s != d:
            edge_lists[group_of[ops[s].core]].append((s, d))
    item_lists: list[list[tuple[int, list[tuple[int, str]]]]] = [[] for _ in groups]
    item_index = {it.name: k for k, it in enumerate(graph.items)}
    acc = graph.accesses
    bounded = {s.name for s in hw.spaces if s.bounded}
    for name in sorted(acc, key=item_index.__getitem__):
        it = graph.items[item_index[name]]
        if it.space in bounded and it.bytes > 0:
            item_lists[group_of[ops[acc[name][0][0]].core]].append((item_index[name], acc[name]))
    token_cache: dict = {}
    return [
        _build_one(graph, hw, groups[k], members[k], local, edge_lists[k], item_lists[k], token_cache)
        for k in range(len(groups))
    ]


def _build_one(
    graph: OpGraph,
    hw: Hardware,
    cores: tuple[int, ...],
    members: list[int],
    local: list[int],
    edge_list: list[tuple[int, int]],
    item_list: list[tuple[int, list[tuple[int, str]]]],
    token_cache: dict,
) -> tuple[Problem, ProblemMap]:
    ops = graph.ops
    core_rel = {c: k for k, c in enumerate(cores)}
    unit_rank = {u: k for k, u in enumerate(hw.unit_names)}
    pipe_keys = sorted(
        {(core_rel[ops[i].core], ops[i].unit) for i in members}, key=lambda p: (p[0], unit_rank[p[1]])
    )
    pipe_index = {p: k for k, p in enumerate(pipe_keys)}
    pipe = [pipe_index[(core_rel[ops[i].core], ops[i].unit)] for i in members]
    dur = [ops[i].duration for i in members]
    sync = hw.sync

    def latency(a: int, b: int) -> int:
        pa, pb = pipe_keys[pipe[a]], pipe_keys[pipe[b]]
        if pa[0] != pb[0]:
            return sync.cross_core_latency
        return sync.flag_latency if pa[1] != pb[1] else 0

    edges = sorted({(local[s], local[d]) for s, d in edge_list}, key=lambda e: (e[1], e[0]))
    edge_t = tuple((a, b, latency(a, b)) for a, b in edges)

    edge_lat = {(a, b): lat for a, b, lat in edge_t}
    spaces, items, item_ids = _items(graph, hw, core_rel, local, item_list, dur, edge_lat)
    # tokens depend on pipes, edges and items only: cores running the same program share them
    key = (tuple(pipe_keys), tuple(pipe), edge_t, tuple(items), tuple(spaces))
    if key not in token_cache:
        op_items: list[list[int]] = [[] for _ in members]
        for k, gi in enumerate(item_ids):
            for i, _ in graph.accesses[graph.items[gi].name]:
                op_items[local[i]].append(k)
        found = _tokens(len(members), pipe, pipe_keys, edge_t)
        token_cache[key] = _budgets(found, op_items, items, spaces, hw)
    tokens, budgets = token_cache[key]
    prob = Problem(
        n_cores=len(cores),
        pipes=pipe_keys,
        dur=dur,
        pipe=pipe,
        edges=edge_t,
        spaces=spaces,
        items=items,
        tokens=tokens,
        budgets=budgets,
        hold=sync.flag_latency,
        cross_hold=sync.cross_core_latency,
    )
    return prob, ProblemMap(cores, members, item_ids)


def _items(
    graph: OpGraph,
    hw: Hardware,
    core_rel: dict[int, int],
    local: list[int],
    item_list: list[tuple[int, list[tuple[int, str]]]],
    dur: Sequence[int],
    edge_lat: dict[tuple[int, int], int],
) -> tuple[list[SpaceSpec], list[ItemSpec], list[int]]:
    ops = graph.ops
    by_space: dict[tuple[int, str], list[tuple[int, int, int, tuple[int, ...], int]]] = {}
    for gi, accesses in item_list:
        it = graph.items[gi]
        first = accesses[0][0]
        last_w, reads = -1, []
        for i, mode in accesses:
            if mode == "w":
                last_w, reads = i, []
            else:
                reads.append(i)
        tails = sorted({local[last_w], *(local[r] for r in reads)})
        key = (core_rel[ops[first].core], it.space)
        live = _min_live([local[i] for i, _ in accesses], tails, dur, edge_lat)
        by_space.setdefault(key, []).append((gi, it.bytes, local[first], tuple(tails), live))
    spaces: list[SpaceSpec] = []
    items: list[ItemSpec] = []
    item_ids: list[int] = []
    space_order = {s.name: k for k, s in enumerate(hw.spaces)}
    for key in sorted(by_space, key=lambda k: (k[0], space_order[k[1]])):
        sp = hw.space(key[1])
        align = sp.alignment
        entries = by_space[key]
        # structural order (first access, tails, size), not the names' order: identical cores
        # must give identical problems
        entries.sort(key=lambda e: (e[2], e[3], e[1], e[0]))
        feet = [roundup(b, align) for _, b, _, _, _ in entries]
        if len(set(feet)) == 1:
            slot = feet[0]
            n_slots = (sp.capacity - max(e[1] for e in entries)) // slot + 1
            limit = n_slots * slot
            binding = len(entries) > n_slots
        else:
            slot = 0
            limit = roundup(sp.capacity, align)
            total = 0
            binding = False
            for (_, b, _, _, _), f in zip(entries, feet, strict=True):
                binding = binding or total + b > sp.capacity
                total += f
        k = len(spaces)
        spaces.append(SpaceSpec(key[0], key[1], sp.capacity, align, slot, limit, binding))
        offset = 0
        for (gi, b, first, tails, live), f in zip(entries, feet, strict=True):
            items.append(ItemSpec(k, b, f, first, tails, 0 if binding else offset, live))
            item_ids.append(gi)
            offset += f
    return spaces, items, item_ids


def _min_live(
    accessors: list[int], tails: list[int], dur: Sequence[int], edge_lat: dict[tuple[int, int], int]
) -> int:
    """Longest path from the first access's start to the end of a tail access, along edges
    between the item's own accesses (program order is topological for them)."""
    order = list(dict.fromkeys(accessors))
    dist = {order[0]: 0}
    for k, x in enumerate(order[1:], 1):
        best = -1
        for y in order[:k]:
            lat = edge_lat.get((y, x))
            if lat is not None and y in dist:
                best = max(best, dist[y] + dur[y] + lat)
        if best >= 0:
            dist[x] = best
    return max(dist.get(a, 0) + dur[a] for a in tails)


def _tokens(
    n: int,
    pipe: Sequence[int],
    pipe_keys: Sequence[tuple[int, str]],
    edges: Sequence[tuple[int, int, int]],
) -> list[Token]:
    succ_by_pipe: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(n)]
    pred_by_pipe: list[dict[int, list[int]]] = [{} for _ in range(n)]
    for a, b, lat in edges:
        if pipe[a] != pipe[b]:
            succ_by_pipe[a].setdefault(pipe[b], []).append((b, lat))
            pred_by_pipe[b].setdefault(pipe[a], []).append(a)
    reach = _Reach(n, edges, pipe) if n <= REACH_LIMIT else None
    budget_index: dict[tuple, int] = {}
    raw: list[tuple[int, int, tuple[int, ...], int, tuple[tuple[int, ...], ...]]] = []
    for u in range(n):
        q = pipe[u]
        for p in sorted(succ_by_pipe[u]):
            cons = sorted(succ_by_pipe[u][p])
            triggers = tuple(
                tuple(r for r in pred_by_pipe[v][q] if r != u)
                for v, _ in cons
                if reach is None or not reach.bypassed(u, v)
            )
            if not triggers:
                continue
            (cq, uq), (cp, up) = pipe_keys[q], pipe_keys[p]
            key = ("flag", cq, uq, up) if cq == cp else ("cross", cq, cp)
            b = budget_index.setdefault(key, len(budget_index))
            raw.append((u, b, tuple(v for v, _ in cons), cons[0][1], triggers))
    keys = [key for key, _ in sorted(budget_index.items(), key=lambda kv: kv[1])]
    return [Token(*r) for r in raw], keys


def _budgets(
    found: tuple[list[Token], list[tuple]],
    op_items: list[list[int]],
    items: Sequence[ItemSpec],
    spaces: Sequence[SpaceSpec],
    hw: Hardware,
) -> tuple[list[Token], list[Budget]]:
    """Event-id pools, each marked binding unless it provably cannot overflow.

    A token whose producer and some consumer access one item ``X`` lives inside ``X``'s hold
    (``X`` is live from its first access, which is not after the producer, to past the
    consumer's end plus the flag latency; the token ends one cycle after the consumer starts,
    within the consumer's duration). Tokens matched to distinct such items can be live
    no more often than those items can be resident at once.
    """
    tokens, keys = found
    by_budget: list[list[Token]] = [[] for _ in keys]
    for tok in tokens:
        by_budget[tok.budget].append(tok)
    out = []
    for b, key in enumerate(keys):
        cap = hw.sync.cross_core_event_ids if key[0] == "cross" else hw.sync.event_ids
        toks = by_budget[b]
        binding = len(toks) > cap and _may_overflow(toks, op_items, items, spaces, cap)
        out.append(Budget(key, cap, binding))
    return tokens, out


def _may_overflow(
    toks: list[Token],
    op_items: list[list[int]],
    items: Sequence[ItemSpec],
    spaces: Sequence[SpaceSpec],
    cap: int,
) -> bool:
    used: set[int] = set()
    per_space: dict[int, int] = {}
    for tok in toks:
        shared: set[int] = set()
        mine = set(op_items[tok.producer])
        for v in tok.consumers:
            shared |= mine.intersection(op_items[v])
        free = sorted(shared - used)
        if not free:
            return True
        used.add(free[0])
        s = items[free[0]].space
        per_space[s] = per_space.get(s, 0) + 1
    live = 0
    for s, count in per_space.items():
        sp = spaces[s]
        smallest = sp.slot or min(it.footprint for it in items if it.space == s)
        live += min(count, sp.limit // smallest if sp.binding else count)
    return live > cap


#: problems up to this many ops get the reachability refinement of flag tokens (bitsets of
#: n bits per op: 10^4 ops take about 25 MB)
REACH_LIMIT = 20000


class _Reach:
    """Ancestor and descendant sets as integer bitsets."""

    def __init__(self, n: int, edges: Sequence[tuple[int, int, int]], pipe: Sequence[int]) -> None:
        succ: list[list[int]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        for a, b, _ in edges:
            succ[a].append(b)
            pred[b].append(a)
        order = _kahn(n, succ, pred)
        self.anc = [0] * n
        for i in order:
            acc = 0
            for a in pred[i]:
                acc |= self.anc[a] | (1 << a)
            self.anc[i] = acc
        self.desc = [0] * n
        for i in reversed(order):
            acc = 0
            for b in succ[i]:
                acc |= self.desc[b] | (1 << b)
            self.desc[i] = acc
        self.mask: dict[int, int] = {}
        for i in range(n):
            self.mask[pipe[i]] = self.mask.get(pipe[i], 0) | (1 << i)
        self.pipe = pipe

    def bypassed(self, u: int, v: int) -> bool:
        """Some later op on ``u``'s pipe (a descendant of ``u``) is an ancestor of ``v``: then
        ``u -> v`` is implied by program order and that path in every schedule."""
        return bool(self.desc[u] & self.mask[self.pipe[u]] & self.anc[v])


def _kahn(n: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    indeg = [len(p) for p in pred]
    ready = [i for i in range(n) if indeg[i] == 0]
    out = []
    while ready:
        i = ready.pop()
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out


def topo_order(prob: Problem, key: Sequence | None = None) -> list[int]:
    """Topological order of the edges, smallest ``key`` (default: index) first among ready ops."""
    n = prob.n
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b, _ in prob.edges:
        succ[a].append(b)
        indeg[b] += 1
    k = key if key is not None else range(n)
    heap = [(k[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, i = heapq.heappop(heap)
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (k[j], j))
    return out


def tail_lengths(prob: Problem) -> list[int]:
    """Longest path from each op's start to the end of the schedule (its duration included)."""
    n = prob.n
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, lat in prob.edges:
        succ[a].append((b, lat))
    q = [0] * n
    for i in reversed(topo_order(prob)):
        best = 0
        for j, lat in succ[i]:
            v = lat + q[j]
            if v > best:
                best = v
        q[i] = prob.dur[i] + best
    return q


def head_lengths(prob: Problem) -> list[int]:
    """Earliest start of each op from the edges alone (no resources)."""
    n = prob.n
    pred: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, lat in prob.edges:
        pred[b].append((a, lat))
    h = [0] * n
    for i in topo_order(prob):
        best = 0
        for j, lat in pred[i]:
            v = h[j] + prob.dur[j] + lat
            if v > best:
                best = v
        h[i] = best
    return h
