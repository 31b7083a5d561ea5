"""Building the solver's problems from an OpGraph: the graph split into groups of cores that
share no cross-core edge (:func:`core_groups`), each described as a name-free
:class:`~.problem.Problem` (:func:`build_problems`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from staticsched.model.deps import tail_accesses
from staticsched.model.graphs import DisjointSets
from staticsched.model.hardware import Hardware, round_up
from staticsched.model.opgraph import OpGraph
from staticsched.solver.problem import ItemSpec, Problem, ProblemMap, SpaceSpec
from staticsched.solver.tokens import event_budgets, flag_tokens


def core_groups(graph: OpGraph, merge: Sequence[Sequence[int]] = ()) -> list[tuple[int, ...]]:
    """Cores connected by cross-core edges (or in one set of ``merge``), each group sorted,
    groups sorted by first core."""
    sets = DisjointSets(graph.cores)
    idx, ops = graph.op_index, graph.ops
    for e in graph.edges:
        a, b = ops[idx[e.src]].core, ops[idx[e.dst]].core
        if a != b:
            sets.union(a, b)
    for cores in merge:
        cores = [c for c in cores if c in sets]
        for a, b in itertools.pairwise(cores):
            sets.union(a, b)
    return sets.groups()


def build_problems(
    graph: OpGraph, hw: Hardware, merge: Sequence[Sequence[int]] = (), flag_slots: bool = True
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
    flag_slots
        A flags program (the default): a uniform space whose reuse crosses pipes offers at most
        ``event_ids`` slots (:func:`_items`). False for a timed program, which has no flags.

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
        _build_one(graph, hw, groups[k], members[k], local, edge_lists[k], item_lists[k], token_cache,
                   flag_slots)
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
    flag_slots: bool,
) -> tuple[Problem, ProblemMap]:
    ops = graph.ops
    core_rel = {c: k for k, c in enumerate(cores)}
    unit_rank = {u: k for k, u in enumerate(hw.unit_names)}
    pipe_keys = sorted(
        {(core_rel[ops[i].core], ops[i].unit) for i in members}, key=lambda p: (p[0], unit_rank[p[1]])
    )
    pipe_index = {p: k for k, p in enumerate(pipe_keys)}
    pipe_of = [pipe_index[(core_rel[ops[i].core], ops[i].unit)] for i in members]
    dur = [ops[i].duration for i in members]
    sync = hw.sync

    edges = sorted({(local[s], local[d]) for s, d in edge_list}, key=lambda e: (e[1], e[0]))
    edge_t = tuple((a, b, sync.latency(pipe_keys[pipe_of[a]], pipe_keys[pipe_of[b]])) for a, b in edges)

    edge_lat = {(a, b): lat for a, b, lat in edge_t}
    spaces, items, item_ids = _items(graph, hw, core_rel, local, item_list, dur, edge_lat, flag_slots)
    # tokens depend on pipes, edges and items only: cores running the same program share them
    key = (tuple(pipe_keys), tuple(pipe_of), edge_t, tuple(items), tuple(spaces))
    if key not in token_cache:
        op_items: list[list[int]] = [[] for _ in members]
        for k, gi in enumerate(item_ids):
            for i, _ in graph.accesses[graph.items[gi].name]:
                op_items[local[i]].append(k)
        found = flag_tokens(len(members), pipe_of, pipe_keys, edge_t)
        token_cache[key] = event_budgets(found, op_items, items, spaces, sync)
    tokens, budgets = token_cache[key]
    prob = Problem(
        n_cores=len(cores),
        pipes=pipe_keys,
        dur=dur,
        pipe_of=pipe_of,
        edges=edge_t,
        spaces=spaces,
        items=items,
        tokens=tokens,
        budgets=budgets,
        sync=sync,
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
    flag_slots: bool = True,
) -> tuple[list[SpaceSpec], list[ItemSpec], list[int]]:
    """The bounded spaces and their items, in a structural order.

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
    ops = graph.ops
    by_space: dict[tuple[int, str], list[tuple[int, int, int, tuple[int, ...], int]]] = {}
    pipes_of: dict[tuple[int, str], set[str]] = {}
    for gi, accesses in item_list:
        it = graph.items[gi]
        first = accesses[0][0]
        last_w, reads = tail_accesses(accesses)
        assert last_w is not None, "a checked graph writes every item it reads"
        tails = sorted({local[last_w], *(local[r] for r in reads)})
        key = (core_rel[ops[first].core], it.space)
        live = _min_live([local[i] for i, _ in accesses], tails, dur, edge_lat)
        by_space.setdefault(key, []).append((gi, it.bytes, local[first], tuple(tails), live))
        pipes_of.setdefault(key, set()).update(ops[i].unit for i in (first, last_w, *reads))
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
