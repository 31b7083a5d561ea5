"""``trace.json``: the schedule as Chrome trace events (opens in Perfetto / chrome://tracing).

One process per core (``pid`` = core), one thread per pipe (``tid`` = the pipe's index in the
hardware's unit list), one complete slice (``"ph": "X"``) per op, each sync event as a flow
(``"s"``/``"f"`` pair bound to the slices of the two ops it orders), the bytes live in every
bounded on-chip space as a counter track per core, and the bytes per cycle held on every
chip link as a counter track of a "chip links" process after the cores. Trace time: one cycle
is written as one microsecond (``otherData`` says so and gives the clock to convert).

The events are written as text directly, one per line: a schedule of 10^5 ops has about a
million events, and a dict per event through a generic encoder costs several times more.
"""

from __future__ import annotations

from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _q

from staticsched.formats import jsonfmt
from staticsched.formats.jsonfmt import encode
from staticsched.model.links import link_usage, rate_text
from staticsched.model.schedule import Schedule


def _meta(what: str, pid: int, tid: int, key: str, value: str) -> str:
    return f'{{"name": "{what}", "ph": "M", "pid": {pid}, "tid": {tid}, "args": {{"{key}": {value}}}}}'


def trace_lines(schedule: Schedule) -> list[str]:
    """Every trace event as one line of JSON: metadata, slices, flows, then counters."""
    hw, graph = schedule.hw, schedule.graph
    tid = {u: k for k, u in enumerate(hw.unit_names)}
    for t in schedule.ops:
        tid.setdefault(t.unit, len(tid))
    cores = sorted({t.core for t in schedule.ops} | {p.core for p in schedule.items})
    lines: list[str] = []
    for c in cores:
        ct = hw.core_type(c)
        # a split chip's core says its type and cluster, and has the threads of its pipes only
        name = f"core {c}" if ct is None else f"core {c} {ct.name} (cluster {hw.cluster_of(c)})"
        lines.append(_meta("process_name", c, 0, "name", _q(name)))
        lines.append(_meta("process_sort_index", c, 0, "sort_index", str(c)))
        for unit, k in tid.items():
            if not hw.core_has_unit(c, unit):
                continue
            lines.append(_meta("thread_name", c, k, "name", _q(unit)))
            lines.append(_meta("thread_sort_index", c, k, "sort_index", str(k)))
    by_id = {}
    for t in sorted(schedule.ops, key=lambda t: (t.core, tid[t.unit], t.start)):
        op = graph.op(t.id)
        by_id[t.id] = t
        kind = _q(op.kind or "op")
        reads, writes = ", ".join(map(_q, op.reads)), ", ".join(map(_q, op.writes))
        lines.append(
            f'{{"name": {_q(t.id)}, "cat": {kind}, "ph": "X", "pid": {t.core}, "tid": {tid[t.unit]}, '
            f'"ts": {t.start}, "dur": {t.end - t.start}, '
            f'"args": {{"kind": {kind}, "reads": [{reads}], "writes": [{writes}]}}}}'
        )
    for n, e in enumerate(schedule.events):
        # both ends bind to the slices of the ops the flag is anchored to: the start of a slice
        # lies inside it, so binding never picks a neighbouring slice
        a, b = by_id[e.producer], by_id[e.consumer]
        common = f'"name": {_q(f"{e.reason} {e.src}->{e.dst} #{e.event}")}, "cat": "sync", "id": {n}'
        lines.append(
            f'{{{common}, "ph": "s", "pid": {a.core}, "tid": {tid[a.unit]}, "ts": {a.start}, '
            f'"args": {{"set_cycle": {e.set_cycle}, "wait_cycle": {e.wait_cycle}, "kind": {_q(e.kind)}}}}}'
        )
        lines.append(
            f'{{{common}, "ph": "f", "bp": "e", "pid": {b.core}, "tid": {tid[b.unit]}, "ts": {b.start}}}'
        )
    lines += _counters(schedule)
    lines += _link_counters(schedule, max(cores, default=-1) + 1)
    return lines


def _link_counters(schedule: Schedule, pid: int) -> list[str]:
    """One counter track per link, in a process of its own after the cores: the bytes per
    cycle its transfers hold (data phases), from the link usage of the schedule."""
    uses = link_usage(schedule)
    if not uses:
        return []
    out = [_meta("process_name", pid, 0, "name", _q("chip links")),
           _meta("process_sort_index", pid, 0, "sort_index", str(pid))]
    for use in uses:
        deltas: dict[int, int] = {}
        for b, e, u in use.holds:
            deltas[b] = deltas.get(b, 0) + u
            deltas[e] = deltas.get(e, 0) - u
        name = _q(f"{use.name} B/cycle (of {use.bytes_per_cycle:g})")
        level = 0
        out.append(f'{{"name": {name}, "ph": "C", "pid": {pid}, "ts": 0, "args": {{"B/cycle": 0}}}}')
        for ts, d in sorted(deltas.items()):
            level += d
            out.append(f'{{"name": {name}, "ph": "C", "pid": {pid}, "ts": {ts}, '
                       f'"args": {{"B/cycle": {rate_text(level):g}}}}}')
    return out


def _counters(schedule: Schedule) -> list[str]:
    bounded = {s.name for s in schedule.hw.spaces if s.bounded}
    deltas: dict[tuple[int, str], dict[int, int]] = {}
    for p in schedule.items:
        if p.space in bounded and p.bytes > 0 and p.end > p.start:
            d = deltas.setdefault((p.core, p.space), {})
            d[p.start] = d.get(p.start, 0) + p.bytes
            d[p.end] = d.get(p.end, 0) - p.bytes
    out = []
    for core, space in sorted(deltas):
        live = 0
        name = _q(f"{space} bytes")
        for ts, delta in sorted(deltas[(core, space)].items()):
            live += delta
            out.append(
                f'{{"name": {name}, "ph": "C", "pid": {core}, "ts": {ts}, "args": {{"bytes": {live}}}}}'
            )
    return out


def dumps_trace(schedule: Schedule) -> str:
    """``trace.json`` text: ``{"traceEvents": [...], "otherData": {...}}``, one event per line."""
    return "".join(iter_trace(schedule))


def iter_trace(schedule: Schedule) -> Iterator[str]:
    """:func:`dumps_trace`'s text in chunks of events."""
    hw = schedule.hw
    other = {
        "generator": "staticsched",
        "hw": hw.name,
        "time_unit": "1 trace microsecond = 1 cycle",
        "clock_ghz": hw.clock_ghz,
        "makespan_cycles": schedule.makespan,
        "makespan_us": round(hw.cycles_to_us(schedule.makespan), 6),
    }
    yield '{\n "traceEvents": [\n  '
    lines = trace_lines(schedule)
    for k in range(0, len(lines), jsonfmt.BATCH):
        yield ("" if k == 0 else ",\n  ") + ",\n  ".join(lines[k : k + jsonfmt.BATCH])
    yield f'\n ],\n "otherData": {encode(other)}\n}}\n'
