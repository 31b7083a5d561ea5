"""Timetable files: ``timetable.json`` (DESIGN §6), ``timetable.csv`` and ``timetable.txt``.

Nothing non-deterministic goes in: no wall-clock times, no solver statistics (they may hold
timings); the same schedule always gives the same bytes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _q
from typing import Any

from staticsched.emit.summary import tilings
from staticsched.emit.sync import SyncPlan
from staticsched.formats import jsonfmt
from staticsched.formats.jsonfmt import RawDict, RawList, encode, iter_json
from staticsched.model.links import link_usage, rate_text
from staticsched.model.placement import OpTime, Placement, SyncEvent
from staticsched.model.schedule import Schedule
from staticsched.model.traffic import gm_traffic

FORMAT = "staticsched.timetable"
VERSION = 1


def timetable_to_dict(schedule: Schedule, plan: SyncPlan) -> dict[str, Any]:
    """The ``timetable.json`` content as a dict with a fixed key order."""
    return _timetable(schedule, plan, raw=False)


def _timetable(schedule: Schedule, plan: SyncPlan, raw: bool) -> dict[str, Any]:
    """:func:`timetable_to_dict`; with ``raw`` its op, item and event records as their JSON
    texts (:class:`~staticsched.formats.jsonfmt.RawList`, ``RawDict``), for writing the file:
    a chip has ~5 x 10^5 of them, and a dict per record and the generic encoder cost twice as
    much as text made directly."""
    if raw:
        ops: list = RawList(map(_op_text, schedule.ops))
        items: dict = RawDict((p.item, _item_text(p)) for p in schedule.items)
        events: list = RawList(map(_event_text, schedule.events))
    else:
        # a transfer slowed by a shared link also says its rate (bytes per cycle)
        ops = [{"id": t.id, "core": t.core, "unit": t.unit, "start": t.start, "end": t.end,
                **({"rate": rate_text(t.rate)} if t.rate else {})} for t in schedule.ops]
        items = {p.item: {"core": p.core, "space": p.space, "offset": p.offset, "bytes": p.bytes,
                          "start": p.start, "end": p.end} for p in schedule.items}
        events = [{"kind": e.kind, "core": e.core, "src": e.src, "dst": e.dst, "dst_core": e.dst_core,
                   "event": e.event, "producer": e.producer, "consumer": e.consumer,
                   "set_cycle": e.set_cycle, "wait_cycle": e.wait_cycle, "reason": e.reason}
                  for e in schedule.events]
    return {
        "format": FORMAT,
        "version": VERSION,
        "hw": schedule.hw.name,
        "makespan": schedule.makespan,
        # what the solver planned, where the program's replay (link sharing, credits) differs
        **({"planned_makespan": schedule.plan_makespan}
           if schedule.plan_makespan != schedule.makespan else {}),
        "lower_bound": schedule.lower_bound,
        "gap": round(schedule.gap, 6),
        "status": schedule.status,
        "method": schedule.method,
        "stop_reason": schedule.stop_reason,
        "mode": plan.mode,
        "ops": ops,
        "items": items,
        "events": events,
        "sync": plan.stats.as_dict(),
        "tilings": [t.as_dict() for t in tilings(schedule)],
        "traffic": traffic_dict(schedule),
    }


# the records' texts, exactly as the JSON encoder writes the dicts above (ints and strings)
def _op_text(t: OpTime) -> str:
    rate = f', "rate": {encode(rate_text(t.rate))}' if t.rate else ""
    return (f'{{"id": {_q(t.id)}, "core": {int(t.core)}, "unit": {_q(t.unit)}, '
            f'"start": {int(t.start)}, "end": {int(t.end)}{rate}}}')


def _item_text(p: Placement) -> str:
    return (f'{{"core": {int(p.core)}, "space": {_q(p.space)}, "offset": {int(p.offset)}, '
            f'"bytes": {int(p.bytes)}, "start": {int(p.start)}, "end": {int(p.end)}}}')


def _event_text(e: SyncEvent) -> str:
    return (f'{{"kind": {_q(e.kind)}, "core": {int(e.core)}, "src": {_q(e.src)}, "dst": {_q(e.dst)}, '
            f'"dst_core": {int(e.dst_core)}, "event": {int(e.event)}, "producer": {_q(e.producer)}, '
            f'"consumer": {_q(e.consumer)}, "set_cycle": {int(e.set_cycle)}, '
            f'"wait_cycle": {int(e.wait_cycle)}, "reason": {_q(e.reason)}}}')


def traffic_dict(schedule: Schedule) -> dict[str, Any]:
    """GM bytes per tensor (read, written) and per link (bytes moved, utilisation over the
    makespan, peak rate)."""
    traffic = gm_traffic(schedule.graph, schedule.hw)
    return {
        "tensors": {name: {"read": r, "written": w} for name, (r, w) in traffic.tensors},
        "links": {
            use.name: {
                "bytes_per_cycle": use.bytes_per_cycle,
                "bytes": use.bytes,
                "utilisation": round(use.utilisation, 6),
                "peak_bytes_per_cycle": rate_text(use.peak_units),
            }
            for use in link_usage(schedule)
        },
    }


def dumps_timetable_json(schedule: Schedule, plan: SyncPlan) -> str:
    """``timetable.json``: one op, item and event per line."""
    return "".join(iter_timetable_json(schedule, plan))


def iter_timetable_json(schedule: Schedule, plan: SyncPlan) -> Iterator[str]:
    """:func:`dumps_timetable_json`'s text in chunks (the text of ``dumps_json`` of
    :func:`timetable_to_dict`)."""
    return iter_json(_timetable(schedule, plan, raw=True))


def dumps_timetable_csv(schedule: Schedule) -> str:
    """``timetable.csv``: ``id,core,unit,kind,start,end,duration`` per op, in graph order."""
    return "".join(iter_timetable_csv(schedule))


def iter_timetable_csv(schedule: Schedule) -> Iterator[str]:
    """:func:`dumps_timetable_csv`'s text in chunks of rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "core", "unit", "kind", "start", "end", "duration"])
    graph = schedule.graph
    for k in range(0, len(schedule.ops), jsonfmt.BATCH):
        for t in schedule.ops[k : k + jsonfmt.BATCH]:
            w.writerow([t.id, t.core, t.unit, graph.op(t.id).kind, t.start, t.end, t.end - t.start])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()


def _fmt_us(schedule: Schedule, cycles: int) -> str:
    return f"{schedule.hw.cycles_to_us(cycles):.3f} us"


def dumps_timetable_text(schedule: Schedule, plan: SyncPlan) -> str:
    """``timetable.txt``: a header and one row per op in start order, for people."""
    return "".join(iter_timetable_text(schedule, plan))


def iter_timetable_text(schedule: Schedule, plan: SyncPlan) -> Iterator[str]:
    """:func:`dumps_timetable_text`'s text in chunks of rows."""
    hw = schedule.hw
    s = schedule
    lines = [
        f"# timetable: hw {hw.name}, {s.method} ({s.status}, stop: {s.stop_reason or '-'})",
        f"# makespan {s.makespan} cycles ({_fmt_us(s, s.makespan)} at {hw.clock_ghz:g} GHz), "
        f"lower bound {s.lower_bound} cycles, gap {100 * s.gap:.2f}%",
        f"# {len(s.ops)} ops, {len(s.items)} items, {len(s.events)} sync events ({plan.mode})",
    ]
    rank = {u: k for k, u in enumerate(hw.unit_names)}
    graph = schedule.graph
    rows = sorted(
        range(len(s.ops)),
        key=lambda i: (s.ops[i].start, s.ops[i].core, rank.get(s.ops[i].unit, len(rank)), i),
    )
    id_w = max([2, *(len(t.id) for t in schedule.ops)])
    unit_w = max([4, *(len(u) for u in hw.unit_names)])
    lines.append(f"{'start':>10} {'end':>10} {'dur':>8} {'core':>4} {'unit':<{unit_w}} {'op':<{id_w}} kind")
    yield "\n".join(lines) + "\n"
    for k in range(0, len(rows), jsonfmt.BATCH):
        out = []
        for i in rows[k : k + jsonfmt.BATCH]:
            t = schedule.ops[i]
            kind = graph.op(t.id).kind or "-"
            dur = t.end - t.start
            out.append(
                f"{t.start:>10} {t.end:>10} {dur:>8} {t.core:>4} {t.unit:<{unit_w}} {t.id:<{id_w}} {kind}\n"
            )
        yield "".join(out)
