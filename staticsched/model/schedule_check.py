"""``Schedule.verify()``: check a timetable against its graph and hardware.

Independent of the solver (CIRCT's check()/verify() split): it reads only the schedule, the
OpGraph and the hardware model, and reports every violation as one line naming the ops/items
and the numbers. An empty result means the timetable is valid:

* each op is timed once, on its own core and unit, for exactly its duration (a transfer on a
  link: the duration at its rate);
* no two ops overlap on one (core, unit);
* every graph edge and every address-reuse edge holds with its latency;
* items: the right core/space/size, aligned, in bounds, unbounded ones at offset 0, live
  ranges covering their accesses, no two items sharing bytes while both live, and the bytes
  live per (core, space) never above the capacity;
* sync events: ids within the budget, flags between two different pipes, no two events on one
  (core, src, dst, id) live at once;
* links: a transfer's duration follows its rate (at most its path's), and at no cycle do the
  rates held on a link during data phases sum to more than its bandwidth;
* the makespan is the last end, the lower bound at most the makespan, the status known.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Protocol

from staticsched.model.deps import edge_latency, first_write, tail_accesses
from staticsched.model.hardware import Hardware
from staticsched.model.links import op_transfer, overflows, rate_text
from staticsched.model.opgraph import OpGraph
from staticsched.model.placement import STATUSES, OpTime, Placement, SyncEvent
from staticsched.model.pools import PoolKey


class Schedule(Protocol):
    """What the check reads of a :class:`staticsched.model.schedule.Schedule` (a protocol, so
    that the value type can call the check without a circle of imports)."""

    @property
    def graph(self) -> OpGraph: ...
    @property
    def hw(self) -> Hardware: ...
    @property
    def ops(self) -> Sequence[OpTime]: ...
    @property
    def items(self) -> Sequence[Placement]: ...
    @property
    def events(self) -> Sequence[SyncEvent]: ...
    @property
    def makespan(self) -> int: ...
    @property
    def lower_bound(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def plan_makespan(self) -> int: ...

#: report at most this many lines per check, then a count of the rest
MAX_LINES = 50


class _Report:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counts: dict[str, int] = {}

    def add(self, check: str, line: str) -> None:
        c = self.counts.get(check, 0) + 1
        self.counts[check] = c
        if c <= MAX_LINES:
            self.lines.append(line)
        elif c == MAX_LINES + 1:
            self.lines.append(f"({check}: further violations not listed)")


def verify_schedule(schedule: Schedule) -> tuple[str, ...]:
    """All violations of ``schedule``, one line each; empty when it is valid."""
    rep = _Report()
    times = _ops(schedule, rep)
    if times is None:
        return tuple(rep.lines)
    _pipes(schedule, rep)
    _edges(schedule, times, rep)
    live = _items(schedule, times, rep)
    if live is not None:
        _overlaps_and_capacity(schedule, live, rep)
        _address_edges(schedule, times, live, rep)
    for _, check in RESOURCE_CHECKS:
        check(schedule, rep)
    _summary(schedule, rep)
    return tuple(rep.lines)


def _ops(s: Schedule, rep: _Report) -> list[tuple[int, int]] | None:
    g = s.graph
    if len(s.ops) != len(g.ops):
        rep.add("ops", f"schedule times {len(s.ops)} ops, graph has {len(g.ops)}")
        return None
    times = []
    for op, ot in zip(g.ops, s.ops, strict=True):
        if ot.id != op.id:
            rep.add("ops", f"op timing '{ot.id}' is where graph op '{op.id}' belongs (graph order)")
            return None
        if (ot.core, ot.unit) != (op.core, op.unit):
            rep.add(
                "ops",
                f"op '{op.id}' timed on core {ot.core} unit {ot.unit}, graph says core {op.core} "
                f"unit {op.unit}",
            )
        want = op.duration
        if ot.rate:
            x = op_transfer(op, g, s.hw)
            if x is None:
                rep.add("ops", f"op '{op.id}' has rate {rate_text(ot.rate)} B/cycle but crosses no link")
            elif ot.rate > x.path_units or ot.rate < 0:
                rep.add("ops", f"op '{op.id}' runs at {rate_text(ot.rate)} B/cycle, above its path "
                               f"{x.path[0]}->{x.path[1]}'s {rate_text(x.path_units)}")
            else:
                want = x.cycles(ot.rate)
        if ot.end - ot.start != want:
            at = f" at {rate_text(ot.rate)} B/cycle" if ot.rate else ""
            rep.add(
                "ops",
                f"op '{op.id}' runs {ot.start}..{ot.end} = {ot.end - ot.start} cycles, duration is "
                f"{want}{at}",
            )
        if ot.start < 0:
            rep.add("ops", f"op '{op.id}' starts at negative cycle {ot.start}")
        times.append((ot.start, ot.end))
    return times


def _pipes(s: Schedule, rep: _Report) -> None:
    by_pipe: dict[tuple[int, str], list[tuple[int, int, str]]] = {}
    for ot in s.ops:
        by_pipe.setdefault((ot.core, ot.unit), []).append((ot.start, ot.end, ot.id))
    for (core, unit), lst in sorted(by_pipe.items()):
        lst.sort()
        latest = None
        for st, en, name in lst:
            if latest is not None and st < latest[0]:
                rep.add(
                    "pipes",
                    f"ops '{latest[1]}' (ends {latest[0]}) and '{name}' (starts {st}) overlap on "
                    f"core {core} unit {unit}",
                )
            if latest is None or en > latest[0]:
                latest = (en, name)


def _edges(s: Schedule, times: list[tuple[int, int]], rep: _Report) -> None:
    g = s.graph
    idx = g.op_index
    for e in g.edges:
        a, b = idx[e.src], idx[e.dst]
        lat = edge_latency(g, s.hw, e)
        if times[a][1] + lat > times[b][0]:
            on = f" on item '{e.item}'" if e.item else ""
            rep.add(
                "edges",
                f"{e.reason} edge '{e.src}' -> '{e.dst}'{on}: '{e.src}' ends at {times[a][1]}, "
                f"latency {lat}, but '{e.dst}' starts at {times[b][0]}",
            )


def _items(s: Schedule, times: list[tuple[int, int]], rep: _Report) -> dict[str, tuple] | None:
    """Per item in a bounded space with bytes: (core, space, offset, bytes, start, end)."""
    g, hw = s.graph, s.hw
    if len(s.items) != len(g.items):
        rep.add("items", f"schedule places {len(s.items)} items, graph has {len(g.items)}")
        return None
    acc = g.accesses
    live: dict[str, tuple] = {}
    for it, pl in zip(g.items, s.items, strict=True):
        if pl.item != it.name:
            rep.add("items", f"placement '{pl.item}' is where graph item '{it.name}' belongs (graph order)")
            return None
        if (pl.space, pl.bytes) != (it.space, it.bytes):
            rep.add(
                "items",
                f"item '{it.name}' placed as {pl.bytes} B in '{pl.space}', graph says {it.bytes} B in "
                f"'{it.space}'",
            )
        uses = acc.get(it.name, [])
        if uses:
            first = min(times[i][0] for i, _ in uses)
            last = max(times[i][1] for i, _ in uses)
            if pl.start > first or pl.end < last:
                rep.add(
                    "items",
                    f"item '{it.name}' live {pl.start}..{pl.end} does not cover its accesses {first}..{last}",
                )
        space = hw.space(it.space) if it.space and hw.has_space(it.space) else None
        if space is None or not space.bounded:
            if pl.offset != 0:
                rep.add(
                    "items", f"item '{it.name}' in unbounded space '{it.space}' has offset {pl.offset}, not 0"
                )
            continue
        if uses:
            cores = sorted({g.ops[i].core for i, _ in uses})
            if cores != [pl.core]:
                rep.add("items", f"item '{it.name}' placed on core {pl.core}, accessed from cores {cores}")
        if pl.offset < 0 or pl.offset + pl.bytes > space.capacity:
            rep.add(
                "items",
                f"item '{it.name}' at {pl.offset}..{pl.offset + pl.bytes} is outside {it.space} "
                f"(0..{space.capacity})",
            )
        if pl.offset % space.alignment:
            rep.add(
                "items",
                f"item '{it.name}' offset {pl.offset} is not a multiple of {it.space}'s alignment "
                f"{space.alignment}",
            )
        if pl.bytes > 0 and pl.end > pl.start:
            live[it.name] = (pl.core, pl.space, pl.offset, pl.bytes, pl.start, pl.end)
    return live


def _overlaps_and_capacity(s: Schedule, live: dict[str, tuple], rep: _Report) -> None:
    by_space: dict[tuple[int, str], list[tuple[int, int, int, int, str]]] = {}
    for name, (core, space, off, nbytes, st, en) in live.items():
        by_space.setdefault((core, space), []).append((st, en, off, nbytes, name))
    for (core, space), lst in sorted(by_space.items()):
        cap = s.hw.space(space).capacity
        lst.sort()
        active: list[tuple[int, int, int, int, str]] = []  # heap by end
        used = 0
        for st, en, off, nbytes, name in lst:
            while active and active[0][0] <= st:
                used -= heapq.heappop(active)[3]
            for _, _, o2, b2, n2 in active:
                if off < o2 + b2 and o2 < off + nbytes:
                    rep.add(
                        "overlap",
                        f"items '{n2}' ({o2}..{o2 + b2}) and '{name}' ({off}..{off + nbytes}) share "
                        f"bytes of {space} on core {core} while both live (at cycle {st})",
                    )
            heapq.heappush(active, (en, st, off, nbytes, name))
            used += nbytes
            if used > cap:
                rep.add(
                    "capacity",
                    f"{space} on core {core} holds {used} B at cycle {st}, capacity {cap} B",
                )


def _address_edges(s: Schedule, times: list[tuple[int, int]], live: dict[str, tuple], rep: _Report) -> None:
    """Reuse of bytes: every tail access of the earlier item ends, plus latency, before the
    later item's first write starts. Only the latest earlier owner of each byte is checked: the
    older owners precede it through the same ordering (their tails before its first write,
    whose own accesses are ordered by the checked graph edges), and a path that changes pipes
    carries at least the latency of a direct edge.

    This walk over the bytes is written here on purpose rather than taken from
    :func:`staticsched.model.deps.reuse_predecessors`, which the solver and the sync planner
    derive their reuse edges from: a check sharing the producers' code would share their bugs.
    The tail accesses and the latency are definitions, not derivations, and are shared."""
    g = s.graph
    acc = g.accesses
    by_space: dict[tuple[int, str], list[tuple[int, int, int, int, str]]] = {}
    for name, (core, space, off, nbytes, st, en) in live.items():
        by_space.setdefault((core, space), []).append((st, en, off, nbytes, name))
    for key in sorted(by_space):
        segs: list[tuple[int, int, str]] = []  # latest owner per byte range
        for st, _en, off, nbytes, name in sorted(by_space[key]):
            owners, keep = set(), []
            for a, b, owner in segs:
                if b <= off or a >= off + nbytes:
                    keep.append((a, b, owner))
                    continue
                owners.add(owner)
                if a < off:
                    keep.append((a, off, owner))
                if b > off + nbytes:
                    keep.append((off + nbytes, b, owner))
            keep.append((off, off + nbytes, name))
            segs = sorted(keep)
            first = first_write(acc[name])
            if first is None:
                continue
            for x in sorted(owners):
                if live[x][5] > st:
                    continue  # overlapping live ranges: reported by the overlap check
                last_w, reads = tail_accesses(acc[x])
                for a in sorted({last_w, *reads} - {None}):
                    if a == first:
                        continue
                    oa, of = g.ops[a], g.ops[first]
                    lat = s.hw.sync.latency((oa.core, oa.unit), (of.core, of.unit))
                    if times[a][1] + lat > times[first][0]:
                        rep.add(
                            "address",
                            f"item '{name}' reuses bytes of '{x}': its first write "
                            f"'{g.ops[first].id}' starts at {times[first][0]}, before '{g.ops[a].id}' "
                            f"(last use of '{x}') ends at {times[a][1]} plus latency {lat}",
                        )


def _events(s: Schedule, rep: _Report) -> None:
    names = s.graph.op_index
    units = set(s.hw.unit_names)
    by_id: dict[tuple[PoolKey, int], list[tuple[int, int, str]]] = {}
    for ev in s.events:
        what = f"{ev.kind} {ev.producer} -> {ev.consumer} id {ev.event}"
        for op in (ev.producer, ev.consumer):
            if op not in names:
                rep.add("events", f"event {what}: unknown op '{op}'")
        if ev.kind == "cross":
            pool = PoolKey.cross(ev.core, ev.dst_core)
            if ev.core == ev.dst_core:
                rep.add("events", f"event {what}: cross-core flag within core {ev.core}")
        else:
            pool = PoolKey.flag(ev.core, ev.src, ev.dst)
            if ev.src == ev.dst:
                rep.add("events", f"event {what}: flag from pipe {ev.src} to itself")
            for u in (ev.src, ev.dst):
                if u not in units:
                    rep.add("events", f"event {what}: unknown pipe '{u}'")
        budget, key = pool.budget(s.hw.sync), (pool, ev.event)
        if not 0 <= ev.event < budget:
            rep.add("events", f"event {what}: id out of range 0..{budget - 1}")
        if ev.wait_cycle < ev.set_cycle:
            rep.add("events", f"event {what}: waited at {ev.wait_cycle} before it is set at {ev.set_cycle}")
        by_id.setdefault(key, []).append((ev.set_cycle, ev.wait_cycle, what))
    for key in sorted(by_id):
        cap = key[0].capacity(s.hw.sync)
        live: list[tuple[int, int, str]] = []  # events set and not yet waited, by wait cycle
        for s2, w2, b in sorted(by_id[key]):
            live = [e for e in live if e[1] > s2]
            if len(live) >= cap:
                s1, w1, a = max(live, key=lambda e: e[1])
                what = "one id at once" if cap == 1 else f"one id with {cap} others live (its capacity)"
                rep.add("events", f"events '{a}' (live {s1}..{w1}) and '{b}' (set at {s2}) use {what}")
            live.append((s2, w2, b))


def _links(s: Schedule, rep: _Report) -> None:
    """At no cycle do the transfers on a link hold more than its bandwidth (data phases)."""
    hw = s.hw
    if not hw.links:
        return
    holds: dict[str, list[tuple[int, int, int, str]]] = {lk.name: [] for lk in hw.links}
    for op, ot in zip(s.graph.ops, s.ops, strict=True):
        x = op_transfer(op, s.graph, hw)
        if x is None:
            continue
        units = ot.rate or x.path_units
        for name in x.links:
            holds[name].append((ot.start + x.overhead, ot.end, units, op.id))
    for lk in hw.links:
        for t, level, who in overflows(lk.units, holds[lk.name]):
            more = f" and {len(who) - 6} more" if len(who) > 6 else ""
            shown = ", ".join(f"'{w}'" for w in who[:6]) + more
            rep.add("links", f"link {lk.name}: transfers move {rate_text(level)} B/cycle at cycle {t}, "
                             f"above its {lk.bytes_per_cycle:g} B/cycle ({shown})")


#: the checks of resources beyond pipes, edges and items, one per family, in report order (a
#: new family adds its check here: below the solver, reading only the schedule, the graph and
#: the hardware, as the rest of this module does)
RESOURCE_CHECKS: tuple[tuple[str, Callable[[Schedule, _Report], None]], ...] = (
    ("events", _events),
    ("links", _links),
)


def _summary(s: Schedule, rep: _Report) -> None:
    last = max((ot.end for ot in s.ops), default=0)
    if s.plan_makespan != last:
        rep.add("summary", f"makespan {s.plan_makespan} is not the last op end {last}")
    if s.lower_bound > s.makespan:
        rep.add("summary", f"lower bound {s.lower_bound} exceeds makespan {s.makespan}")
    if s.status not in STATUSES:
        rep.add("summary", f"status '{s.status}' is not one of {', '.join(STATUSES)}")
