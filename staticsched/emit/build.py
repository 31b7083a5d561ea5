"""Program building and nominal timing: a sync plan becomes per-pipe instruction streams.

Nominal timing is an instruction-level replay of the planned streams with exact durations:
an op issues when its pipe is free and every WAIT before it is released; a SET fires when
everything before it on its pipe has finished, and its flag is visible ``flag_latency``
(across cores ``cross_core_latency``) cycles later; a WAIT is released at the later of the
moment its pipe reaches it and the moment its flag is visible. Every instruction records that
cycle as its ``cycle``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from staticsched.emit.sync import Flag, SyncPlan, plan_sync, plan_timed
from staticsched.errors import InfeasibleError, InputError
from staticsched.model.links import link_usage, op_transfer, rate_text
from staticsched.model.placement import SyncEvent
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.model.schedule import Schedule
from staticsched.options import MODES
from staticsched.progress import Progress, silent


def replay_cycles(schedule: Schedule, plan: SyncPlan) -> list[list[int]]:
    """Nominal issue cycle of every slot of every planned stream.

    Parameters
    ----------
    schedule : Schedule
        Supplies the op durations and the flag latencies (``schedule.hw.sync``).
    plan : SyncPlan
        The streams to replay.

    Returns
    -------
    list of list of int
        ``cycles[s][k]`` for slot ``k`` of ``plan.streams[s]``.

    Raises
    ------
    InfeasibleError
        If the streams deadlock (a WAIT whose SET can never fire).
    """
    sync = schedule.hw.sync
    # a transfer slowed by a shared link runs longer than its op's nominal duration
    duration = {t.id: t.end - t.start for t in schedule.ops}
    latency = [sync.latency((f.set_core, f.set_unit), (f.wait_core, f.wait_unit)) for f in plan.flags]
    streams = plan.streams
    cycles = [[0] * len(s.slots) for s in streams]
    at = [0] * len(streams)
    cursor = [0] * len(streams)
    visible: dict[int, int] = {}
    blocked: dict[int, int] = {}
    # the cycles are a longest path over a DAG, so the order pipes are advanced in does not
    # change them; a stack just avoids rescanning pipes that are still blocked
    todo = list(range(len(streams) - 1, -1, -1))
    while todo:
        s = todo.pop()
        slots, k, t = streams[s].slots, at[s], cursor[s]
        while k < len(slots):
            what, ref = slots[k]
            if what == "op":
                cycles[s][k] = t
                t += duration[ref]
            elif what == "set":
                cycles[s][k] = t
                visible[ref] = t + latency[ref]
                if ref in blocked:
                    todo.append(blocked.pop(ref))
            else:
                if ref not in visible:
                    blocked[ref] = s
                    break
                t = max(t, visible[ref])
                cycles[s][k] = t
            k += 1
        at[s], cursor[s] = k, t
    stuck = [s for s in range(len(streams)) if at[s] < len(streams[s].slots)]
    if stuck:
        lines = []
        for s in stuck:
            f = plan.flags[streams[s].slots[at[s]][1]]
            lines.append(
                f"deadlock: core {streams[s].core} pipe {streams[s].unit} waits for flag "
                f"{f.set_unit}->{f.wait_unit} id {f.event} ({f.set_op} -> {f.wait_op}) that is never set"
            )
        raise InfeasibleError(lines)
    return cycles


def _op_starts(plan: SyncPlan, cycles: Sequence[Sequence[int]]) -> dict[str, int]:
    return {
        ref: cycles[s][k]
        for s, st in enumerate(plan.streams)
        for k, (what, ref) in enumerate(st.slots)
        if what == "op"
    }


def _flag_cycles(plan: SyncPlan, cycles: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    set_at = [0] * len(plan.flags)
    wait_at = [0] * len(plan.flags)
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what == "set":
                set_at[ref] = cycles[s][k]
            elif what == "wait":
                wait_at[ref] = cycles[s][k]
    return set_at, wait_at


def _events(plan: SyncPlan, cycles: Sequence[Sequence[int]]) -> list[SyncEvent]:
    set_at, wait_at = _flag_cycles(plan, cycles)
    return [_event(f, set_at[f.index], wait_at[f.index]) for f in plan.flags]


def _event(f: Flag, set_cycle: int, wait_cycle: int) -> SyncEvent:
    return SyncEvent(
        kind=f.kind,
        core=f.set_core,
        src=f.set_unit,
        dst=f.wait_unit,
        event=f.event,
        producer=f.set_op,
        consumer=f.wait_op,
        set_cycle=set_cycle,
        wait_cycle=wait_cycle,
        reason=f.reason,
        dst_core=f.wait_core if f.kind == "cross" else -1,
    )


def _overloads_links(schedule: Schedule, starts: dict[str, int]) -> bool:
    """Whether the ops at ``starts`` (same durations and rates) overload a shared link."""
    if not schedule.hw.links or all(starts[t.id] == t.start for t in schedule.ops):
        return False
    ops = [attrs.evolve(t, start=starts[t.id], end=starts[t.id] + t.end - t.start) for t in schedule.ops]
    return any(u.peak_units > lk.units for u, lk in zip(link_usage(attrs.evolve(schedule, ops=ops)),
                                                         schedule.hw.links, strict=True))


def _retimed(schedule: Schedule, starts: dict[str, int], events: list[SyncEvent]) -> Schedule:
    """``schedule`` with the replayed op starts, live ranges, makespan and events."""
    graph = schedule.graph
    if all(starts[t.id] == t.start for t in schedule.ops):
        return attrs.evolve(schedule, events=events)
    ops = [attrs.evolve(t, start=starts[t.id], end=starts[t.id] + (t.end - t.start)) for t in schedule.ops]
    by_id = {t.id: t for t in ops}
    items = []
    for p in schedule.items:
        acc = graph.accesses.get(p.item)
        if acc:
            first = min(by_id[graph.ops[i].id].start for i, _ in acc)
            last = max(by_id[graph.ops[i].id].end for i, _ in acc)
            p = attrs.evolve(p, start=first, end=last)
        items.append(p)
    makespan = max((t.end for t in ops), default=0)
    status = schedule.status
    if makespan > schedule.makespan and status == "optimal":
        # a credit delayed the proven timetable: the proof no longer covers this one
        status = "feasible"
    return Schedule(
        graph=graph,
        hw=schedule.hw,
        ops=ops,
        items=items,
        events=events,
        makespan=makespan,
        lower_bound=schedule.lower_bound,
        status=status,
        method=schedule.method,
        stop_reason=schedule.stop_reason,
        stats=schedule.stats,
    )


def _rated(schedule: Schedule) -> dict[str, tuple[int, tuple]]:
    """Op id -> (duration, attributes) of every transfer a shared link slows below its path's
    rate: its ``rate`` attribute (bytes per cycle) makes the cost model give that duration."""
    out = {}
    graph, hw = schedule.graph, schedule.hw
    for op, t in zip(graph.ops, schedule.ops, strict=True):
        if not t.rate:
            continue
        x = op_transfer(op, graph, hw)
        if x is not None and t.rate < x.path_units:
            out[op.id] = (t.end - t.start, (*op.attrs, ("rate", rate_text(t.rate))))
    return out


def _program(schedule: Schedule, plan: SyncPlan, cycles: Sequence[Sequence[int]], mode: str) -> Program:
    graph = schedule.graph
    rated = _rated(schedule)
    items = [
        ProgItem(
            name=p.item,
            core=p.core,
            space=p.space,
            offset=p.offset,
            bytes=p.bytes,
            live_start=p.start,
            live_end=p.end,
            dtype=graph.item_map[p.item].dtype if p.item in graph.item_map else "",
            shape=graph.item_map[p.item].shape if p.item in graph.item_map else (),
        )
        for p in schedule.items
    ]
    streams = []
    for s, st in enumerate(plan.streams):
        instrs = []
        for k, (what, ref) in enumerate(st.slots):
            cycle = int(cycles[s][k])
            if what == "op":
                op = graph.op(ref)
                duration, attrs_ = rated.get(op.id, (op.duration, op.attrs))
                instrs.append(
                    Instr(
                        kind=op.kind or "op",
                        cycle=cycle,
                        id=op.id,
                        duration=duration,
                        reads=op.reads,
                        writes=op.writes,
                        attrs=attrs_,
                    )
                )
            elif mode == "flags":
                instrs.append(_sync_instr(plan.flags[ref], what, cycle))
        streams.append(Stream(st.core, st.unit, instrs))
    return Program(
        hw=schedule.hw.name,
        mode=mode,
        makespan=schedule.makespan,
        tensors=graph.tensors,
        items=items,
        streams=streams,
        source=graph.source,
    )


def _sync_instr(f: Flag, what: str, cycle: int) -> Instr:
    if f.kind == "cross":
        if what == "set":
            return Instr("set_cross", cycle, event=f.event, peer_core=f.wait_core)
        return Instr("wait_cross", cycle, event=f.event, peer_core=f.set_core)
    return Instr(f"{what}_flag", cycle, src=f.set_unit, dst=f.wait_unit, event=f.event)


def build_program(schedule: Schedule, plan: SyncPlan) -> Program:
    """The program of ``plan`` with nominal cycles (flags mode) or the timetable's cycles (timed).

    Parameters
    ----------
    schedule : Schedule
        The timetable the plan was made from.
    plan : SyncPlan
        From :func:`plan_sync` (``mode == "flags"``) or :func:`plan_timed` (``"timed"``).

    Returns
    -------
    Program
        Streams sorted by core and the hardware's unit order, every instruction with its issue
        cycle; items with their placements and live ranges.
    """
    if plan.mode == "timed":
        start = {t.id: t.start for t in schedule.ops}
        cycles = [[start[ref] for _, ref in st.slots] for st in plan.streams]
    else:
        cycles = replay_cycles(schedule, plan)
    return _program(schedule, plan, cycles, plan.mode)


def finalize(
    schedule: Schedule, mode: str = "flags", progress: Progress | None = None
) -> tuple[Schedule, Program, SyncPlan]:
    """Plan sync, build the program and time it: the last step before writing files.

    Parameters
    ----------
    schedule : Schedule
        A semi-active timetable (as every solver method returns).
    mode : {"flags", "timed"}
        ``"flags"``: streams with SET/WAIT flags, nominal cycles from an instruction-level replay.
        ``"timed"``: the same streams without flags, each instruction at its timetable cycle.
    progress : Progress, optional
        Reports the ``plan sync`` and ``build program`` phases.

    Returns
    -------
    (Schedule, Program, SyncPlan)
        The schedule with its sync events (flags mode; timed by the program's nominal replay,
        which differs from the input only where credit flags delay ops or the input had slack),
        the program, and the plan.

    Raises
    ------
    InputError
        For an unknown mode.
    InfeasibleError
        When a pool the plan needs has no event id at all (see :func:`plan_sync`).
    """
    if mode not in MODES:
        raise InputError(f"emission mode '{mode}' is not one of {', '.join(MODES)}")
    rep = progress if progress is not None else silent()
    if mode == "timed":
        with rep.phase("plan sync"):
            plan = plan_timed(schedule)
        with rep.phase("build program"):
            # a timed program has no flags, so the schedule it describes has no events either
            timed = attrs.evolve(schedule, events=())
            return timed, build_program(timed, plan), plan
    with rep.phase("plan sync"):
        plan = plan_sync(schedule, progress=rep)
        if plan.stats.fallback:
            rep.line(f"  event ids ran short ({plan.stats.fallback}); planned one baton of flags "
                     "per group of cores instead (one id per pool, consumers re-timed)")
    with rep.phase("build program"):
        cycles = replay_cycles(schedule, plan)
        starts = _op_starts(plan, cycles)
        if _overloads_links(schedule, starts):
            # flags moved transfers so that a link would carry more than its bandwidth: order
            # the transfers on the links too (as the solver's timetable did) and replay again
            plan = plan_sync(schedule, progress=rep, links=True)
            rep.line("  re-timing by flags overloaded a shared link; transfers are ordered on "
                     "their links by flags too")
            cycles = replay_cycles(schedule, plan)
            starts = _op_starts(plan, cycles)
        # The program's replay is what the executor does, so it is the emitted timetable.
        # Without credits it normally equals the solver's; where the solver's model was more
        # conservative than the planned flags (e.g. a latency gap on an address edge that
        # program order already orders), ops move earlier. Say how many did rather than failing.
        moved = sum(1 for t in schedule.ops if starts[t.id] != t.start)
        if moved and not plan.stats.credits:
            schedule = attrs.evolve(schedule, stats={**dict(schedule.stats), "retimed_ops": moved})
        final = _retimed(schedule, starts, _events(plan, cycles))
        return final, _program(final, plan, cycles, "flags"), plan
