"""The summary lines of a split chip (AIC and AIV cores): the seed's profile table (§4.4) per
core type and the cross-core flags with their peak counter values (the workspaces:
:mod:`staticsched.emit.workspace_summary`)."""

from __future__ import annotations

from collections.abc import Mapping

from staticsched.emit.sync import SyncPlan
from staticsched.model.schedule import Schedule


def profile_by_type(schedule: Schedule, busy: Mapping[tuple[int, str], int]) -> list[dict]:
    """Per core type: its cores, the mean active % of each of its pipes over those cores, and
    the mean idle % (no pipe of the core busy), over the makespan."""
    hw, ms = schedule.hw, max(1, schedule.makespan, schedule.plan_makespan)
    spans: dict[int, list[tuple[int, int]]] = {}
    for t in schedule.ops:
        spans.setdefault(t.core, []).append((t.start, t.end))
    # the cost model's durations (a transfer at its path's full rate): the work of a pipe,
    # which no schedule can finish sooner than
    work: dict[tuple[int, str], int] = {}
    for op in schedule.graph.ops:
        work[(op.core, op.unit)] = work.get((op.core, op.unit), 0) + op.duration
    out = []
    for ct in hw.core_types:
        cores = hw.cores_of_type(ct.name)
        active = {u: sum(busy.get((c, u), 0) for c in cores) / (len(cores) * ms) for u in ct.units}
        idle = sum(ms - _covered(spans.get(c, [])) for c in cores) / (len(cores) * ms)
        bound, pipe = max(((work.get((c, u), 0), u) for c in cores for u in ct.units), default=(0, "-"))
        out.append({"type": ct.name, "cores": len(cores), "active": active, "idle": idle,
                    "bound": bound, "bound_pipe": pipe})
    return out


def _covered(intervals: list[tuple[int, int]]) -> int:
    """Cycles in the union of ``intervals``."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def flag_peaks(schedule: Schedule, plan: SyncPlan) -> dict[tuple[int, int, int, str], tuple[int, int]]:
    """Per cross-core counter ``(set core, wait core, id, route)``: how many flags used it and
    the peak of its counter (sets fired, waits not yet passed) along the nominal timetable."""
    when = {t.id: (t.start, t.end) for t in schedule.ops}
    events: dict[tuple[int, int, int, str], list[tuple[int, int]]] = {}
    for f in plan.flags:
        if f.kind != "cross":
            continue
        s = when[f.set_op][1 if f.set_side == "after" else 0]
        w = when[f.wait_op][0 if f.wait_side == "before" else 1]
        events.setdefault((f.set_core, f.wait_core, f.event, f.route), []).extend([(s, 1), (w, -1)])
    out = {}
    for key in sorted(events):
        level = peak = 0
        for _, d in sorted(events[key], key=lambda e: (e[0], e[1])):  # waits before sets at a tie
            level += d
            peak = max(peak, level)
        out[key] = (len(events[key]) // 2, peak)
    return out


def split_lines(schedule: Schedule, plan: SyncPlan, busy: Mapping[tuple[int, str], int]) -> list[str]:
    """The profile per core type and the cross-core flags of a split chip."""
    hw = schedule.hw
    if not hw.split:
        return []
    lines = ["profile      : active % per pipe and idle %, mean over the cores of each type "
             "(of the timetable, as the utilisation)"]
    for row in profile_by_type(schedule, busy):
        pipes = "  ".join(f"{u.lower()} {100 * a:5.1f}%" for u, a in row["active"].items())
        lines.append(f"  {row['type']:<4} x{row['cores']:<3} {pipes}  idle {100 * row['idle']:5.1f}%  "
                     f"bound {row['bound']} ({row['bound_pipe'].lower()} work of its busiest core)")
    peaks = flag_peaks(schedule, plan)
    if peaks:
        ids = len(peaks)
        most = max(n for n, _ in peaks.values())
        peak = max(p for _, p in peaks.values())
        lines.append(f"cross-core   : {sum(n for n, _ in peaks.values())} flags on {ids} (core pair, id)s, "
                     f"at most {most} per id; peak counter {peak} of capacity "
                     f"{hw.sync.cross_core_capacity} (nominal timetable)")
        routes = [f.route for f in plan.flags if f.kind == "cross"]
        if any(routes):
            groups = sum(1 for f in plan.flags if f.route == "2" and not f.merged)
            lines.append(f"  routes     : {routes.count('2')} mode 2 (one broadcast SET or AND WAIT "
                         f"for each {hw.cluster_size - 1} of them on the AIC: {groups} instructions), "
                         f"{routes.count('gm')} GM words"
                         + (f", {routes.count('0')} mode 0 (barriers: one SET and one WAIT per core "
                            "for each barrier)" if "0" in routes else ""))
        for choice in plan.stats.barriers:
            lines.append(f"  barrier    : {choice.line()}")
        if plan.stats.turnstiles:
            lines.append(f"  turnstiles : {plan.stats.turnstiles} GM-word WAIT(s) moved up into an earlier "
                         "poll of their stream (their words visible by then: one load polls them all)")
    return lines
