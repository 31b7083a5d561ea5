"""Building the solver's problems from an OpGraph: the graph split into groups of cores that
share no cross-core edge (:func:`core_groups`), each described as a name-free
:class:`~.problem.Problem` (:func:`build_problems`): the pipes, durations and edges, to which
each resource family attaches its own data in :data:`~.families.FAMILIES` order."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs

from staticsched.model.graphs import DisjointSets
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.base import Group
from staticsched.solver.problem import Problem, ProblemMap, shared_problems


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
        ``event_ids`` slots (:func:`~.families.memory._items`). False for a timed program, which has no flags.

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
    cache: dict = {}
    out = []
    for k, cores in enumerate(groups):
        prob, pmap = _base(graph, hw, cores, members[k], local, edge_lists[k])
        group = Group(graph, hw, cores, members[k], local, item_lists[k], flag_slots, cache)
        for family in FAMILIES:
            prob, pmap = family.attach(prob, pmap, group)
        out.append((prob, pmap))
    return shared_problems(out)


def _places(hw: Hardware, cores: tuple[int, ...]) -> tuple[int, ...]:
    """:attr:`Problem.places` of a group of ``cores``: on a split chip each core's slot in
    its cluster, in the group's clusters numbered from 0 (so equal groups of clusters give
    equal problems); empty elsewhere."""
    cs = hw.sync.cluster_size
    if not cs:
        return ()
    rank = {c: k for k, c in enumerate(sorted({core // cs for core in cores}))}
    return tuple(rank[core // cs] * cs + core % cs for core in cores)


def _base(
    graph: OpGraph,
    hw: Hardware,
    cores: tuple[int, ...],
    members: list[int],
    local: list[int],
    edge_list: list[tuple[int, int]],
) -> tuple[Problem, ProblemMap]:
    """The group's pipes, durations and edges, before any family adds its data."""
    ops = graph.ops
    core_rel = {c: k for k, c in enumerate(cores)}
    unit_rank = {u: k for k, u in enumerate(hw.unit_names)}
    pipe_keys = sorted(
        {(core_rel[ops[i].core], ops[i].unit) for i in members}, key=lambda p: (p[0], unit_rank[p[1]])
    )
    pipe_index = {p: k for k, p in enumerate(pipe_keys)}
    pipe_of = [pipe_index[(core_rel[ops[i].core], ops[i].unit)] for i in members]
    sync = hw.sync
    places = _places(hw, cores)
    prob = Problem(n_cores=len(cores), pipes=pipe_keys, dur=[ops[i].duration for i in members],
                   pipe_of=pipe_of, edges=(), spaces=(), items=(), tokens=(), budgets=(), sync=sync,
                   places=places)
    edges = sorted({(local[s], local[d]) for s, d in edge_list}, key=lambda e: (e[1], e[0]))
    prob = attrs.evolve(prob, edges=tuple((a, b, prob.latency(a, b)) for a, b in edges))
    return prob, ProblemMap(cores, members, ())
