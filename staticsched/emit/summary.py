"""The human summary of a schedule: makespan, bound, status, per-pipe utilisation, sync counts."""

from __future__ import annotations

import json

from staticsched.emit.split_summary import split_lines
from staticsched.emit.sync import SyncPlan
from staticsched.emit.workspace_summary import workspace_lines
from staticsched.model.schedule import Schedule

#: above this many cores, utilisation is shown as min/mean/max over cores per pipe
COMPACT_CORES = 4


def _busy(schedule: Schedule) -> dict[tuple[int, str], int]:
    busy: dict[tuple[int, str], int] = {}
    for t in schedule.ops:
        busy[(t.core, t.unit)] = busy.get((t.core, t.unit), 0) + t.end - t.start
    return busy


def summary_lines(schedule: Schedule, plan: SyncPlan) -> list[str]:
    """Lines for a terminal: the figures of ``schedule`` and ``plan``.

    Utilisation is busy cycles over the makespan per (core, pipe), like the seed article's
    profile table (``cube_active : 548 us (89.5%)``); with more than :data:`COMPACT_CORES`
    cores each pipe gets one row with the minimum, mean and maximum over the cores.
    """
    hw = schedule.hw
    ms = schedule.makespan
    lines = [
        f"makespan     : {ms} cycles ({hw.cycles_to_us(ms):.3f} us at {hw.clock_ghz:g} GHz)",
        *plan_lines(schedule),
        f"lower bound  : {schedule.lower_bound} cycles, gap {100 * schedule.gap:.2f}%"
        + (
            " (static bound; CP-SAT proved this makespan optimal)"
            if schedule.status == "optimal" and schedule.makespan > schedule.lower_bound
            else ""
        ),
        f"status       : {schedule.status} (method {schedule.method}, "
        f"stop reason {schedule.stop_reason or '-'})",
        *net_lines(schedule),
    ]
    busy = _busy(schedule)
    cores = sorted({t.core for t in schedule.ops})
    units = list(hw.unit_names) + sorted({t.unit for t in schedule.ops} - set(hw.unit_names))
    # the busy cycles are the timetable's (the plan's op times): over a program that runs
    # faster than its plan they are shares of the planned makespan, or they would pass 100%
    span = max(ms, schedule.plan_makespan)
    pct = (lambda b: 100.0 * b / span) if span > 0 else (lambda b: 0.0)
    over = "the makespan" if span == ms else f"the planned makespan ({span} cycles)"
    width = max([8, *(len(u) for u in units)])
    if len(cores) <= COMPACT_CORES:
        lines.append(f"utilisation  : busy cycles per pipe over {over}")
        for c in cores:
            for u in units:
                if not hw.core_has_unit(c, u):
                    continue  # a split chip's core lists only the pipes its type has
                b = busy.get((c, u), 0)
                lines.append(
                    f"  c{c}.{u:<{width}} : {b:>10} cycles {hw.cycles_to_us(b):>10.3f} us ({pct(b):5.1f}%)"
                )
    else:
        lines.append(f"utilisation  : busy % per pipe over {over}, across {len(cores)} cores")
        lines.append(f"  {'pipe':<{width}}      min     mean      max")
        for u in units:
            vals = [pct(busy.get((c, u), 0)) for c in cores if hw.core_has_unit(c, u)]
            if not vals:
                continue
            lines.append(f"  {u:<{width}} {min(vals):7.1f}% {sum(vals) / len(vals):7.1f}% {max(vals):7.1f}%")
    s = plan.stats
    lines.append(
        f"sync ({plan.mode}) : {s.dependencies} cross-pipe dependencies, {s.flags_kept} flags kept, "
        f"{s.flags_eliminated} eliminated as implied, {s.credits} credits, {s.cross_core} cross-core"
    )
    if s.fallback:
        lines.append(f"               event ids ran short: one baton of flags per group of cores "
                     f"({s.relays} relay flags, one id per pool), consumers re-timed")
    if s.ids_used:
        many = len(cores) > COMPACT_CORES or len(s.ids_used) > 12
        lines.append("event ids    : " + ", ".join(_ids_used(plan, compact=many)))
    lines += split_lines(schedule, plan, busy)
    lines += workspace_lines(schedule)
    lines += traffic_lines(schedule)
    lines += layout_lines(schedule)
    tilings = tiling_lines(schedule)
    if tilings:
        lines.append("tiling       : " + tilings[0] + " (the bound and gap are for this tiling)")
        lines += [f"               {t}" for t in tilings[1:]]
    lines += candidate_lines(schedule)
    return lines


def plan_lines(schedule: Schedule) -> list[str]:
    """Where the program's replay differs from the solver's plan: by how much, and why it can."""
    planned, ms = schedule.plan_makespan, schedule.makespan
    if planned == ms:
        return []
    why = []
    if schedule.hw.links:
        why.append("links shared by the hardware")
    why.append("flags")
    return [f"planned      : {planned} cycles; the program runs {100 * (ms / planned - 1):+.2f}% "
            f"({' and '.join(why)} re-time the plan)"]


def net_lines(schedule: Schedule) -> list[str]:
    """An error line when the wall-clock safety net, not the deterministic budget, ended a
    deterministic search: the run is then not reproducible."""
    st = dict(schedule.stats)
    if not st.get("safety_net_fired"):
        return []
    limit, net, spent = st.get("time_limit", 0.0), st.get("safety_net", 0.0), st.get("budget_spent", 0.0)
    share = f" ({100 * spent / limit:.0f}%)" if limit else ""
    return [f"error        : the wall-clock safety net ({net:g} s) stopped the search when its "
            f"deterministic budget had used {spent:.1f} of {limit:g} calibrated seconds{share}: "
            "this result is not reproducible (the machine is far slower or busier than the "
            "calibration; give a smaller --time-limit, or --wall-clock)"]


def candidate_lines(schedule: Schedule) -> list[str]:
    """How many legal tilings each tunable task of the source TaskGraph has (``staticsched
    tune`` searches them); a count that stopped early says "at least"."""
    if not schedule.graph.source:
        return []
    from staticsched.frontend.taskgraph import taskgraph_from_dict
    from staticsched.tasks.space import count_candidates, tunable

    tg = taskgraph_from_dict(json.loads(schedule.graph.source))
    parts = []
    for task in tg.ordered_tasks:
        if tunable(task):
            n, exact = count_candidates(task, schedule.hw)
            parts.append(f"{task.id} {n if exact else f'at least {n}'}")
    if not parts:
        return []
    return [f"candidates   : legal tilings {', '.join(parts)} (staticsched tune searches them)"]


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def traffic_lines(schedule: Schedule) -> list[str]:
    """GM bytes read and written (all tensors) and, per link, the bytes it moved, its
    utilisation over the makespan and the highest rate held at once."""
    from staticsched.model.links import link_usage, rate_text
    from staticsched.model.traffic import gm_traffic

    t = gm_traffic(schedule.graph, schedule.hw)
    lines = []
    if t.tensors:
        lines.append(f"gm traffic   : {_bytes(t.read)} read, {_bytes(t.written)} written "
                     f"(per tensor and link in timetable.json)")
    # a link no transfer of this graph crosses says nothing about it
    for k, use in enumerate(u for u in link_usage(schedule) if u.bytes):
        head = "links        : " if k == 0 else "               "
        lines.append(f"{head}{use.name} {use.bytes_per_cycle:g} B/cycle: {_bytes(use.bytes)} moved, "
                     f"{100 * use.utilisation:.1f}% of its capacity over the makespan, peak "
                     f"{rate_text(use.peak_units):g} B/cycle")
    stats = dict(schedule.stats)
    if stats.get("links"):
        lines.append(f"link plan    : {stats['links']}")
    if stats.get("link_bounds"):
        lines.append(f"link bounds  : {stats['link_bounds']} cycles (bound from "
                     f"{stats.get('lower_bound_source', '-')})")
    return lines


def layout_lines(schedule: Schedule) -> list[str]:
    """The Cube operand loads that convert ND to the fractal format on the fly (``nd2nz``):
    how many, the pipe time their conversion adds over the same loads at the path's full rate
    (summed over the cores) and its share of that pipe's time on the cores that convert; and
    how many GM tensors are NZ. Nothing when neither happens (a chip that does not price
    layouts and a graph without NZ tensors)."""
    from staticsched.model.opkinds import KINDS, item_shape

    graph, hw = schedule.graph, schedule.hw
    items = graph.item_map
    load = KINDS["load"]
    count = extra = 0
    where: set[tuple[int, str]] = set()
    for op in graph.ops:
        if op.kind != "load" or not op.attr.get("nd2nz", False):
            continue
        shapes = [item_shape(it.space, it.bytes, it.dtype, it.shape) for it in (items[n] for n in op.writes)]
        a = {**dict(load.defaults), **op.attr, "rate": 0.0}
        count += 1
        extra += load.duration(hw, a, (), shapes) - load.duration(hw, {**a, "nd2nz": False}, (), shapes)
        where.add((op.core, op.unit))
    nz = sum(1 for t in graph.tensors if t.layout == "NZ")
    if not count and not nz:
        return []
    cube = hw.cube
    model = ("the ND2NZ model of [cube.nd2nz]" if cube is not None and cube.nd2nz is not None
             else f"nd2nz_derate {cube.nd2nz_derate if cube is not None else 0:g}")
    if count:
        units = sorted({u for _, u in where})
        types = sorted({ct.name for c, _ in where if (ct := hw.core_type(c)) is not None})
        cores = {c for c, _ in where}
        if types:  # the converting pipes on every core of their type
            cores = {c for t in types for c in hw.cores_of_type(t)}
        busy = sum(op.duration for op in graph.ops if op.core in cores and op.unit in units)
        on = f"{'/'.join(types)} " if types else ""
        share = f", {100 * extra / busy:.1f}% of the {on}{'/'.join(units)} time" if busy else ""
        done = (f"{count:,} ND->NZ conversions on {'/'.join(units)} loads, +{extra:,} cycles{share} "
                f"({model})")
    else:
        done = f"no ND->NZ conversion ({model})"
    return [f"layouts      : {done}; NZ tensors: {nz}"]


def tiling_lines(schedule: Schedule) -> list[str]:
    """One line per task of the source TaskGraph: the tiling lowering used (empty for an
    OpGraph input, which carries no tasks)."""
    return [t.text() for t in tilings(schedule)]


def tilings(schedule: Schedule) -> tuple:
    """The :class:`~staticsched.frontend.lowering.TilingInfo` of every task of the source
    TaskGraph; recomputed from the source and the hardware, as lowering did."""
    if not schedule.graph.source:
        return ()
    from staticsched.frontend.lowering import tiling_info
    from staticsched.frontend.taskgraph import taskgraph_from_dict

    return tiling_info(taskgraph_from_dict(json.loads(schedule.graph.source)), schedule.hw)


def phase_table(timings: list[tuple[str, float]] | tuple[tuple[str, float], ...]) -> list[str]:
    """The summary's last lines: wall seconds per phase, in the order the phases ran."""
    if not timings:
        return []
    total = sum(t for _, t in timings)
    width = max(len(name) for name, _ in timings)
    out = ["phases       : wall seconds"]
    for name, t in timings:
        out.append(f"  {name:<{width}} {t:9.2f} s")
    out.append(f"  {'total':<{width}} {total:9.2f} s")
    return out


def _ids_used(plan: SyncPlan, compact: bool) -> list[str]:
    """``"c0 MTE2->MTE1 2"`` per pool; with many cores the maximum per pipe pair over the cores
    (``"MTE2->MTE1 max 2"``) and one entry for all cross-core pools."""
    if not compact:
        return [f"{k} {n}" for k, n in plan.stats.ids_used]
    pairs: dict[str, int] = {}
    cross = []
    for key, n in plan.stats.ids_used:
        if key.startswith("core"):
            cross.append(n)
        else:
            pair = key.split(" ", 1)[1]
            pairs[pair] = max(pairs.get(pair, 0), n)
    out = [f"{pair} max {n}" for pair, n in pairs.items()]
    if cross:
        out.append(f"cross-core: {len(cross)} core pairs, max {max(cross)}")
    return out
