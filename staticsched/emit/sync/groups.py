"""Sync planning once per distinct group of cores (the scale issue's regularity).

Cores that no cross-core dependency connects share nothing a flag plan depends on: their
vector clocks never meet, their id pools are their own, and every ordering the planner uses
(consumers by nominal start, producers by end and pipe, the traversal's points by time and
pipe) restricted to one group is the same order as in the whole schedule. So the elimination
and the id assignment of each group are those of the whole plan, and a group whose timetable
is a copy of another's (the same pipes, op times, program order and dependency pattern, as
the 16 cores of a GEMM are) gets a copy of its flags. :func:`plan_by_groups` plans one group
of each shape and instantiates the others; the flags are then numbered as the whole-schedule
planner numbers them (by consumer start, consumer, and place among its producers).

Credits are numbered by when the traversal creates them, which interleaves groups, so a plan
that needs credits (or the baton fallback) is left to the whole-schedule planner: the caller
gets ``None`` and plans everything at once, with the same result either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from staticsched.emit.sync.eliminate import eliminate
from staticsched.emit.sync.ids import Draft, IdAssigner
from staticsched.emit.sync.layout import Layout, flag_kind
from staticsched.errors import EventBudgetError, InfeasibleError
from staticsched.model.hardware import SyncModel
from staticsched.model.opgraph import Edge

Dep = tuple[int, int, Edge]


@attrs.frozen
class _Group:
    """One group of cores as its own layout: ``ops`` maps local op indices to global ones,
    ``pipes`` local pipes to global ones; ``deps`` are its dependencies in local indices,
    in the order of the whole list."""

    ops: tuple[int, ...]
    pipes: tuple[int, ...]
    lay: Layout
    deps: tuple[Dep, ...]

    def shape(self) -> tuple:
        """What the plan of this group depends on (the op names and items do not count)."""
        lay = self.lay
        cores = sorted({c for c, _ in lay.pipes})
        rank = {c: k for k, c in enumerate(cores)}
        return (
            tuple((rank[c], u) for c, u in lay.pipes),
            tuple(lay.pipe_of), tuple(lay.start), tuple(lay.end),
            tuple((p, c, e.reason) for p, c, e in self.deps),
        )


@attrs.frozen
class _Planned:
    """The plan of one group shape: per kept flag its dependency (position in the group's
    list) and id, and the streams with local op indices and local flag numbers."""

    kept: tuple[int, ...]
    events: tuple[int, ...]
    streams: tuple[tuple[tuple[str, int], ...], ...]


def core_groups(lay: Layout, deps: Sequence[Dep]) -> list[list[int]]:
    """The cores that cross-core dependencies connect, as sorted lists, by their first core."""
    cores = sorted({c for c, _ in lay.pipes})
    parent = {c: c for c in cores}

    def find(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for p, c, _ in deps:
        a, b = find(lay.pipes[lay.pipe_of[p]][0]), find(lay.pipes[lay.pipe_of[c]][0])
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for c in cores:
        groups.setdefault(find(c), []).append(c)
    return [groups[r] for r in sorted(groups)]


def _split(lay: Layout, deps: Sequence[Dep], groups: list[list[int]]) -> list[_Group]:
    group_of_core = {c: g for g, cores in enumerate(groups) for c in cores}
    pipes: list[list[int]] = [[] for _ in groups]
    for q, (core, _) in enumerate(lay.pipes):
        pipes[group_of_core[core]].append(q)
    group_of_pipe = [group_of_core[core] for core, _ in lay.pipes]
    ops: list[list[int]] = [[] for _ in groups]
    for i, q in enumerate(lay.pipe_of):
        ops[group_of_pipe[q]].append(i)
    local = [0] * len(lay.ids)
    for members in ops:
        for k, i in enumerate(members):
            local[i] = k
    local_pipe = [0] * len(lay.pipes)
    for members in pipes:
        for k, q in enumerate(members):
            local_pipe[q] = k
    gdeps: list[list[Dep]] = [[] for _ in groups]
    for p, c, e in deps:
        gdeps[group_of_pipe[lay.pipe_of[p]]].append((local[p], local[c], e))
    out = []
    for g, members in enumerate(ops):
        sub = Layout(
            ids=[lay.ids[i] for i in members],
            start=[lay.start[i] for i in members],
            end=[lay.end[i] for i in members],
            pipes=[lay.pipes[q] for q in pipes[g]],
            pipe_of=[local_pipe[lay.pipe_of[i]] for i in members],
            pos=[lay.pos[i] for i in members],
            seq=[[local[i] for i in lay.seq[q]] for q in pipes[g]],
        )
        out.append(_Group(tuple(members), tuple(pipes[g]), sub, tuple(gdeps[g])))
    return out


def _plan_group(sync: SyncModel, group: _Group) -> _Planned | None:
    """Eliminate and assign ids on one group alone; ``None`` when it needs credits or runs
    out of ids (the whole-schedule planner then decides, as it numbers credits globally)."""
    position = {(p, c): k for k, (p, c, _) in enumerate(group.deps)}
    kept = eliminate(group.lay, list(group.deps))
    assigner = IdAssigner(sync, group.lay, kept)
    try:
        drafts = assigner.run()
    except (EventBudgetError, InfeasibleError):
        return None
    if len(drafts) != len(kept):
        return None
    index = {op: k for k, op in enumerate(group.lay.ids)}
    streams = tuple(
        tuple((what, index[ref] if what == "op" else ref) for what, ref in slots)
        for _, _, slots in assigner.streams()
    )
    return _Planned(tuple(position[(p, c)] for p, c, _ in kept),
                    tuple(d.event for d in drafts), streams)


def plan_by_groups(
    sync: SyncModel, lay: Layout, deps: Sequence[Dep], tick: Callable[[int], None] | None = None
) -> tuple[list[Draft], list[list[tuple[str, object]]]] | None:
    """The drafts (global op indices, in the whole planner's order) and, per pipe of ``lay``,
    the stream slots of a plan made once per distinct group of cores; ``None`` when the
    cores form one group or some group needs what only the whole planner numbers (credits,
    the baton fallback)."""
    groups = core_groups(lay, deps)
    if len(groups) < 2:
        return None
    parts = _split(lay, deps, groups)
    planned: dict[tuple, _Planned | None] = {}
    per_group: list[_Planned] = []
    for part in parts:
        shape = part.shape()
        if shape not in planned:
            planned[shape] = _plan_group(sync, part)
        got = planned[shape]
        if got is None:
            return None
        per_group.append(got)
    # number the flags as eliminate() orders them: by consumer start, consumer, then place
    keyed = []
    for g, (part, got) in enumerate(zip(parts, per_group, strict=True)):
        for j, k in enumerate(got.kept):
            c = part.ops[part.deps[k][1]]
            keyed.append((lay.start[c], c, j, g))
    keyed.sort()
    number: list[list[int]] = [[0] * len(got.kept) for got in per_group]
    drafts: list[Draft] = []
    for f, (_, _, j, g) in enumerate(keyed):
        number[g][j] = f
        part, got = parts[g], per_group[g]
        p, c, e = part.deps[got.kept[j]]
        gp, gc = part.ops[p], part.ops[c]
        drafts.append(Draft(flag_kind(lay, gp, gc), e.reason, gp, "after", gc, "before", e.item,
                            got.events[j]))
    streams: list[list[tuple[str, object]]] = [[] for _ in lay.pipes]
    for g, (part, got) in enumerate(zip(parts, per_group, strict=True)):
        nums = number[g]
        for lq, slots in enumerate(got.streams):
            streams[part.pipes[lq]] = [
                ("op", lay.ids[part.ops[ref]]) if what == "op" else (what, nums[ref])
                for what, ref in slots
            ]
    if tick is not None:
        tick(len(lay.ids))
    return drafts, streams
