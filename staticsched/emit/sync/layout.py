"""The index-based view of a timetable that sync planning works on, and the dependencies the
flags must cover."""

from __future__ import annotations

import attrs

from staticsched.errors import InfeasibleError, InputError
from staticsched.model.deps import address_edges
from staticsched.model.opgraph import Edge
from staticsched.model.schedule import Schedule


@attrs.define(eq=False)
class Layout:
    """Index-based view of a schedule: pipes, program positions, times."""

    ids: list[str]
    start: list[int]
    end: list[int]
    pipes: list[tuple[int, str]]
    pipe_of: list[int]
    pos: list[int]
    seq: list[list[int]]

    @classmethod
    def of(cls, schedule: Schedule) -> Layout:
        graph = schedule.graph
        n = len(graph.ops)
        by_id = {}
        for ot in schedule.ops:
            by_id.setdefault(ot.id, ot)
        missing = [op.id for op in graph.ops if op.id not in by_id]
        extra = sorted(set(by_id) - set(graph.op_index))
        if missing or extra or len(schedule.ops) != n:
            lines = [f"schedule has no timing for op '{m}'" for m in missing]
            lines += [f"schedule times op '{e}' that is not in the graph" for e in extra]
            if not lines:
                lines = [f"schedule has {len(schedule.ops)} op timings for {n} ops"]
            raise InputError(lines)
        times = [by_id[op.id] for op in graph.ops]
        unit_rank = {u: k for k, u in enumerate(schedule.hw.unit_names)}
        units = set(unit_rank)
        extra_units = sorted({t.unit for t in times} - units)
        for u in extra_units:
            unit_rank[u] = len(unit_rank)
        cores = sorted({t.core for t in times})
        all_units = sorted(unit_rank, key=unit_rank.__getitem__)
        pipes = [(c, u) for c in cores for u in all_units]
        pipe_index = {p: k for k, p in enumerate(pipes)}
        pipe_of = [pipe_index[(t.core, t.unit)] for t in times]
        seq: list[list[int]] = [[] for _ in pipes]
        for i in sorted(range(n), key=lambda i: (times[i].start, i)):
            seq[pipe_of[i]].append(i)
        pos = [0] * n
        for ops in seq:
            for k, i in enumerate(ops):
                pos[i] = k
        return cls(
            ids=[op.id for op in graph.ops],
            start=[t.start for t in times],
            end=[t.end for t in times],
            pipes=pipes,
            pipe_of=pipe_of,
            pos=pos,
            seq=seq,
        )


def dependencies(schedule: Schedule, lay: Layout) -> list[tuple[int, int, Edge]]:
    """Cross-pipe dependencies as (producer index, consumer index, edge), first reason wins.

    Raises
    ------
    InfeasibleError
        When the timetable violates an edge (the planner relies on every edge going forward
        in nominal time), one line per violated edge.
    """
    graph = schedule.graph
    idx = graph.op_index
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int, Edge]] = []
    bad: list[str] = []
    # items in unbounded spaces (GM) all sit at offset 0 and are addressed by name: they never
    # share bytes, so only bounded spaces give address-reuse edges (as the solver assumes)
    bounded = {s.name for s in schedule.hw.spaces if s.bounded}
    placed = [p for p in schedule.items if p.space in bounded]
    for e in (*graph.edges, *address_edges(graph, placed)):
        p, c = idx[e.src], idx[e.dst]
        if p == c or (p, c) in seen:
            continue
        seen.add((p, c))
        if lay.end[p] > lay.start[c]:
            bad.append(
                f"schedule violates {e.reason} edge {e.src} -> {e.dst}"
                f"{f' on item {e.item}' if e.item else ''}: {e.src} ends at cycle {lay.end[p]} "
                f"after {e.dst} starts at cycle {lay.start[c]}"
            )
            continue
        if lay.pipe_of[p] != lay.pipe_of[c]:
            out.append((p, c, e))
    if bad:
        raise InfeasibleError(bad)
    return out


def flag_kind(lay: Layout, a: int, b: int) -> str:
    """``"cross"`` when ops ``a`` and ``b`` sit on different cores, else ``"flag"``."""
    return "cross" if lay.pipes[lay.pipe_of[a]][0] != lay.pipes[lay.pipe_of[b]][0] else "flag"
