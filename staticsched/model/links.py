"""Transfers on shared links: which ops cross which link, how long they take at a rate, and
how much of a link a set of transfers uses at every cycle.

A *transfer* is a micro-op whose path (source space -> destination space) a hardware link
carries (``load``: the GM tensor's space -> the item's space; ``store``: the item's space ->
the tensor's space; ``move``/``fixpipe``: item -> item). It runs at a *rate* in units of
``1/RATE_DENOM`` bytes per cycle, at most its path's rate: ``cycles = overhead +
ceil(bytes / rate)``. During its *data phase* ``[start + overhead, end)`` it holds its rate on
every link of its path; the overhead (descriptor issue, first-burst latency) moves no bytes.
At no cycle may the rates held on a link sum to more than its bandwidth.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

import attrs
import numpy as np

from staticsched.model.hardware import RATE_DENOM, Hardware, rate_cycles
from staticsched.model.opgraph import Op, OpGraph
from staticsched.model.opkinds import KINDS, TRANSFER_KINDS, item_shape, path_units, transfer_route


@attrs.frozen
class Transfer:
    """What a transfer op moves: ``bytes`` over ``path`` (src, dst), with ``overhead`` cycles
    first, at most ``path_units`` (its path's rate, in rate units), on ``links`` (names)."""

    bytes: int
    #: (src space, dst space)
    path: tuple[str, ...] = attrs.field(converter=tuple)
    overhead: int
    path_units: int
    links: tuple[str, ...] = attrs.field(converter=tuple)
    #: the duration at the path's own rate
    full: int = 0

    def cycles(self, rate: int) -> int:
        """Duration at ``rate`` units (0, or the path's rate: ``full``)."""
        return transfer_cycles(self.bytes, self.overhead, self.path_units, self.full, rate)


def transfer_cycles(nbytes: int, overhead: int, path_units: int, full: int, rate: int) -> int:
    """The duration of a transfer of ``nbytes`` after ``overhead`` cycles at ``rate`` units:
    at 0, or at least its path's ``path_units``, ``full`` when known (else computed)."""
    if not rate or rate >= path_units:
        return full or overhead + rate_cycles(nbytes, path_units)
    return overhead + rate_cycles(nbytes, rate)


def rate_units(bytes_per_cycle: float) -> int:
    """A rate in bytes per cycle as integer rate units (floored)."""
    return int(bytes_per_cycle * RATE_DENOM)


def rate_text(units: int) -> float:
    """Rate units as bytes per cycle (exact: ``RATE_DENOM`` is a power of two)."""
    return units / RATE_DENOM


def op_transfer(op: Op, graph: OpGraph, hw: Hardware) -> Transfer | None:
    """The transfer ``op`` (an op of ``graph``) makes on ``hw``'s links, or None (not a
    transfer, or no link carries its path): :func:`op_transfers`' entry for it."""
    return op_transfers(graph, hw)[graph.op_index[op.id]]


def op_transfers(graph: OpGraph, hw: Hardware) -> tuple[Transfer | None, ...]:
    """:func:`_transfer` of every op of ``graph`` on ``hw``, in op order. Computed once per
    (graph, hardware) and kept with the graph (the solver, the program builder, the schedule
    check and three output files each ask for all of them), and once per distinct op shape:
    a 4096^3 GEMM's 167K ops have a handful."""
    kept = graph.memo.get("op_transfers")
    if kept is not None and kept[0] is hw:
        return kept[1]
    if not hw.links:
        out: tuple[Transfer | None, ...] = (None,) * len(graph.ops)
    else:
        shapes: dict[tuple, Transfer | None] = {}
        items = graph.item_map
        found = []
        for op in graph.ops:
            if op.kind not in TRANSFER_KINDS:
                found.append(None)
                continue
            try:
                key = (op.kind, tuple(op.attr.items()),
                       tuple((items[n].space, items[n].bytes, items[n].dtype, items[n].shape)
                             if n in items else n for n in (*op.reads, *op.writes)), len(op.reads))
                hash(key)
            except TypeError:  # an unhashable attribute value: no sharing for this op
                found.append(_transfer(op, graph, hw))
                continue
            if key not in shapes:
                shapes[key] = _transfer(op, graph, hw)
            found.append(shapes[key])
        out = tuple(found)
    graph.memo["op_transfers"] = (hw, out)  # one hardware at a time (the usual case)
    return out


def _transfer(op: Op, graph: OpGraph, hw: Hardware) -> Transfer | None:
    """The transfer ``op`` makes on ``hw``'s links, or None (not a transfer, or no link carries
    its path). Its bytes and path are the kind table's (:func:`~staticsched.model.opkinds.
    transfer_route`), so durations and link use never disagree."""
    if not hw.links or op.kind not in TRANSFER_KINDS:
        return None
    kind = KINDS[op.kind]
    a = {**dict(kind.defaults), **op.attr}
    if kind.missing(a):
        return None
    shapes = []
    for name in (*op.reads, *op.writes):
        it = graph.item_map.get(name)
        if it is None:
            return None
        shapes.append(item_shape(it.space, it.bytes, it.dtype, it.shape))
    reads, writes = shapes[: len(op.reads)], shapes[len(op.reads):]
    if len(reads) < len(kind.reads) or len(writes) < len(kind.writes):
        return None
    route = transfer_route(hw, op.kind, a, reads, writes)
    assert route is not None  # a transfer kind
    src, dst, nbytes = route
    links = hw.links_of(src, dst)
    if not links or not hw.has_path(src, dst):
        return None
    p = hw.path(src, dst)
    # the cap and the full-rate duration are the kind table's: a load converting ND -> NZ
    # moves at its derated rate (opkinds.path_units)
    full = kind.duration(hw, {**a, "rate": 0.0}, reads, writes)
    return Transfer(nbytes, (src, dst), p.overhead, path_units(hw, a, src, dst),
                    tuple(lk.name for lk in links), full)


def _cycle_levels(intervals: Sequence[tuple]) -> tuple[np.ndarray, ...] | None:
    """The units held after each cycle's events by ``(begin, end, units, ...)`` intervals
    (half-open; empty ones and 0 units dropped): ``(begins, ends, kept mask, cycles,
    levels)``, or None for no interval. A chip's links carry ~10^5 transfers: the level is a
    cumulative sum over the events sorted by cycle, read after all of one cycle's events."""
    if not intervals:
        return None
    b, e, u = (np.fromiter((iv[k] for iv in intervals), np.int64, len(intervals)) for k in range(3))
    real = (e > b) & (u != 0)
    b, e, u = b[real], e[real], u[real]
    if not len(b):
        return None
    times = np.concatenate((b, e))
    order = np.argsort(times, kind="stable")
    times = times[order]
    level = np.cumsum(np.concatenate((u, -u))[order])
    last = np.append(times[1:] != times[:-1], True)  # the last event of each cycle
    return b, e, real, times[last], level[last]


def peak_usage(intervals: Iterable[tuple[int, int, int]]) -> tuple[int, int]:
    """The most units held at once by ``(begin, end, units)`` intervals (half-open) and the
    first cycle it is reached: ``(peak, cycle)``; ``(0, 0)`` for none."""
    got = _cycle_levels(intervals if isinstance(intervals, Sequence) else list(intervals))
    if got is None:
        return 0, 0
    cycles, levels = got[3], got[4]
    k = int(np.argmax(levels))  # the first cycle the maximum is reached
    return (int(levels[k]), int(cycles[k])) if levels[k] > 0 else (0, 0)


def overflows(
    capacity: int, intervals: Sequence[tuple[int, int, int, str]]
) -> list[tuple[int, int, list[str]]]:
    """Where ``(begin, end, units, label)`` intervals hold more than ``capacity`` units: one
    ``(cycle, units held, labels of the holders)`` per maximal stretch of overflow, at its
    first cycle."""
    got = _cycle_levels(intervals)
    if got is None:
        return []
    b, e, real, cycles, levels = got
    over = levels > capacity
    first = over & ~np.append(False, over[:-1])
    labels = [iv[3] for iv, keep in zip(intervals, real.tolist(), strict=True) if keep]
    out = []
    for t, lv in zip(cycles[first].tolist(), levels[first].tolist(), strict=True):
        held = np.flatnonzero((b <= t) & (t < e)).tolist()
        out.append((t, lv, sorted(labels[k] for k in held)))
    return out


@attrs.frozen
class LinkUse:
    """How a schedule uses one link: bytes moved, the capacity it offered over the makespan
    (``bytes_per_cycle * makespan``), the highest rate held at once, and the holds themselves
    (``(data start, end, units)`` in start order) for pictures."""

    name: str
    bytes_per_cycle: float
    bytes: int
    makespan: int
    peak_units: int
    holds: tuple[tuple[int, int, int], ...] = attrs.field(converter=tuple, repr=False)

    @property
    def utilisation(self) -> float:
        cap = self.bytes_per_cycle * self.makespan
        return self.bytes / cap if cap > 0 else 0.0


def link_usage(schedule) -> tuple[LinkUse, ...]:
    """Every link of ``schedule.hw`` as the schedule uses it (in the hardware's order).

    Kept with the graph for the last schedule asked about: the timetable, the trace, the Gantt
    chart and the summary all ask (0.4 s each on the 4096^3 chip)."""
    kept = schedule.graph.memo.get("link_usage")
    if kept is not None and kept[0] is schedule:
        return kept[1]
    found = _link_usage(schedule)
    schedule.graph.memo["link_usage"] = (schedule, found)
    return found


def _link_usage(schedule) -> tuple[LinkUse, ...]:
    hw, graph = schedule.hw, schedule.graph
    holds: dict[str, list[tuple[int, int, int]]] = {lk.name: [] for lk in hw.links}
    moved = {lk.name: 0 for lk in hw.links}
    if hw.links:
        for op, ot in zip(graph.ops, schedule.ops, strict=True):
            x = op_transfer(op, graph, hw)
            if x is None:
                continue
            for name in x.links:
                holds[name].append((ot.start + x.overhead, ot.end, ot.rate or x.path_units))
                moved[name] += x.bytes
    out = []
    for lk in hw.links:
        lst = sorted(holds[lk.name])
        out.append(LinkUse(lk.name, lk.bytes_per_cycle, moved[lk.name], schedule.makespan,
                           peak_usage(lst)[0], lst))
    return tuple(out)


def flow_edges(
    capacities: Sequence[int],
    holds: Sequence[tuple[int, int, int, int, tuple[int, ...]]],
    groups: Mapping[int, int] | None = None,
) -> list[tuple[int, int]]:
    """A feasible timetable's link usage as precedence edges (a resource flow): any timetable
    that respects them (and the rates) respects every link, which keeps "timing = longest
    path" true for normalisation and emission.

    ``holds`` are ``(op, hold start, end, units, links)``; an edge ``(a, b)`` says op ``b``'s
    hold begins no earlier than op ``a`` ends: per link, every transfer takes its units from
    the transfers whose hold ended before its own began, or from the link's spare units (no
    edge). ``groups`` (op -> core) makes a transfer take from its own core's finished
    transfers first, then the spare units, then other cores': a timetable whose cores each
    stay within a share of the link gets no edge across cores. Deterministic: transfers in
    (hold start, op) order, units taken from the earliest-ending holders first.

    Raises
    ------
    ValueError
        If the timetable holds more units than a link has (it was not feasible).
    """
    group = groups or {}
    edges: set[tuple[int, int]] = set()
    by_link: list[list[tuple[int, int, int, int]]] = [[] for _ in capacities]
    for op, begin, end, units, on in holds:
        for k in on:
            by_link[k].append((begin, op, end, units))
    for k, cap in enumerate(capacities):
        spare = cap
        freed: list[list[int]] = []  # [end, op, units left] of finished holders, by end
        running: list[tuple[int, int, int]] = []  # (end, op, units) heap
        for begin, op, end, units in sorted(by_link[k]):
            while running and running[0][0] <= begin:
                e, a, u = heapq.heappop(running)
                freed.append([e, a, u])
            freed.sort()
            need = units
            mine = group.get(op)
            own = [f for f in freed if group.get(f[1]) == mine]
            need = _take(own, need, op, edges)
            take = min(need, spare)
            spare -= take
            need = _take(freed, need - take, op, edges)
            freed = [f for f in freed if f[2]]
            if need:
                raise ValueError(f"link {k}: op {op} needs {units} units at {begin} but fewer are free")
            heapq.heappush(running, (end, op, units))
    return sorted(edges)


def _take(entries: list[list[int]], need: int, op: int, edges: set[tuple[int, int]]) -> int:
    """Take up to ``need`` units for ``op`` from ``entries`` in order (each ``[end, holder,
    units left]``, updated in place), adding a holder -> op edge per entry used; returns what
    is still needed."""
    for entry in entries:
        if not need:
            break
        got = min(need, entry[2])
        if got:
            entry[2] -= got
            need -= got
            edges.add((entry[1], op))
    return need
