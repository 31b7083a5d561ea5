"""Program building: a sync plan becomes per-pipe instruction streams.

:func:`finalize` plans sync, times the plan (:mod:`staticsched.emit.nominal`'s replay, or the
timetable's own cycles in timed mode) and builds the program: every instruction with its
issue cycle, mode-0 and merged mode-2 flags as one instruction each, items with their live
ranges in the replay.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from staticsched.emit.nominal import Replayed, replay, wait_holds
from staticsched.emit.sync import Flag, SyncPlan, plan_sync, plan_timed
from staticsched.emit.sync.barriers import choose_barriers
from staticsched.emit.sync.turnstiles import gather_turnstiles
from staticsched.errors import InputError
from staticsched.model.deps import intended_writes
from staticsched.model.hardware import SyncModel
from staticsched.model.links import op_transfer, rate_text
from staticsched.model.placement import SyncEvent
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.model.schedule import Schedule
from staticsched.options import MODES
from staticsched.progress import Progress, silent

# replay, wait_holds and Replayed: docs/design.md names them here, where the program's
# cycles come from
__all__ = ["Replayed", "build_program", "finalize", "finalize_replayed", "replay", "wait_holds"]


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


def _played(schedule: Schedule, plan: SyncPlan, played: Replayed) -> Schedule:
    """``schedule`` (the plan: its op times and placements stay) with the events, makespan and
    status of the program's replay. ``makespan`` is what runs; ``planned_makespan`` what the
    solver planned. A replay differs from the plan where credits or the baton delay ops, where
    link sharing gives transfers other rates than the planned ones, or where the solver's model
    was more conservative than the flags (a latency gap program order already covers)."""
    starts = _op_starts(plan, played.cycles)
    makespan = played.makespan
    stats = dict(schedule.stats)
    moved = sum(1 for t in schedule.ops if starts[t.id] != t.start or played.ends[t.id] != t.end)
    if moved:
        stats["retimed_ops"] = moved
    status = schedule.status
    if makespan != schedule.makespan and status == "optimal" and makespan > schedule.lower_bound:
        # the proof was for the planned timetable, not for what runs
        status = "feasible"
    return attrs.evolve(schedule, events=_events(plan, played.cycles), makespan=makespan,
                        planned_makespan=schedule.planned_makespan or schedule.makespan,
                        status=status, stats=stats)


def _live_ranges(graph, played: Replayed, starts: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Every accessed item's live range in the replay: first access start to last access end."""
    out = {}
    ops = graph.ops
    for name, acc in graph.accesses.items():
        ids = [ops[i].id for i, _ in acc]
        out[name] = (min(starts[x] for x in ids), max(played.ends[x] for x in ids))
    return out


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


def _program(schedule: Schedule, plan: SyncPlan, played: Replayed, mode: str) -> Program:
    graph = schedule.graph
    rated = _rated(schedule)
    cycles = played.cycles
    live = _live_ranges(graph, played, _op_starts(plan, cycles))
    items = [
        ProgItem(
            name=p.item,
            core=p.core,
            space=p.space,
            offset=p.offset,
            bytes=p.bytes,
            live_start=live.get(p.item, (p.start, p.end))[0],
            live_end=live.get(p.item, (p.start, p.end))[1],
            dtype=graph.item_map[p.item].dtype if p.item in graph.item_map else "",
            shape=graph.item_map[p.item].shape if p.item in graph.item_map else (),
        )
        for p in schedule.items
    ]
    # which write each read of an item several ops write must see (the verifier checks it)
    sees = intended_writes(graph)
    index = graph.op_index
    sync = schedule.hw.sync
    # a chip's identical cores repeat every set and wait, cycle included: each distinct one
    # is made once (two thirds of the 4096^3 GEMM's instructions are flags, 16 times over)
    flag_instrs: dict[tuple[str, str, str, int, int], Instr] = {}
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
                        sees=sees.get(index[op.id], ()),
                    )
                )
            elif mode == "flags":
                f = plan.flags[ref]
                if f.route == "0":
                    # a mode-0 SET (or WAIT) is one flag per other core of the barrier in a row:
                    # one instruction, its WAIT passing when the last of them has set
                    if k and _same_barrier(plan, st.slots[k - 1], what, f):
                        continue
                    j = k + 1
                    while j < len(st.slots) and _same_barrier(plan, st.slots[j], what, f):
                        cycle = max(cycle, int(cycles[s][j]))
                        j += 1
                    instrs.append(Instr(f"{what}_cross", cycle, event=f.event, peer_core=st.core, mode="0"))
                    continue
                # a merged mode-2 flag's AIC side is its group's one instruction
                if not (f.merged and st.core % sync.cluster_size == sync.hub_slot):
                    if f.route == "2":
                        # an AIC's mode-2 WAIT passes when its group's last AIV has set
                        j = k + 1
                        while j < len(st.slots) and st.slots[j][0] == what and \
                                plan.flags[st.slots[j][1]].merged:
                            cycle = max(cycle, int(cycles[s][j]))
                            j += 1
                    if f.kind == "cross":
                        instrs.append(_sync_instr(f, what, cycle, sync))
                        continue
                    key = (what, f.set_unit, f.wait_unit, f.event, cycle)
                    ins = flag_instrs.get(key)
                    if ins is None:
                        ins = flag_instrs[key] = _sync_instr(f, what, cycle, sync)
                    instrs.append(ins)
        streams.append(Stream(st.core, st.unit, instrs))
    return Program(
        hw=schedule.hw.name,
        mode=mode,
        makespan=played.makespan,
        tensors=graph.tensors,
        items=items,
        streams=streams,
        source=graph.source,
    )


def _same_barrier(plan: SyncPlan, slot: tuple[str, Any], what: str, f: Flag) -> bool:
    if slot[0] != what:
        return False
    g = plan.flags[slot[1]]
    return g.route == "0" and g.event == f.event


def _sync_instr(f: Flag, what: str, cycle: int, sync: SyncModel) -> Instr:
    if f.kind == "cross":
        if f.route == "2":
            # a mode-2 flag names its cluster's AIC: the peer on an AIV, the core itself on the AIC
            aic = f.set_core if f.set_core % sync.cluster_size == sync.hub_slot else f.wait_core
            return Instr(f"{what}_cross", cycle, event=f.event, peer_core=aic, mode="2")
        if what == "set":
            return Instr("set_cross", cycle, event=f.event, peer_core=f.wait_core, mode=f.route)
        return Instr("wait_cross", cycle, event=f.event, peer_core=f.set_core, mode=f.route)
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
        cycle; items with their placements and live ranges in the replay.
    """
    return _program(schedule, plan, _timing(schedule, plan), plan.mode)


def _timing(schedule: Schedule, plan: SyncPlan) -> Replayed:
    if plan.mode == "timed":
        start = {t.id: t.start for t in schedule.ops}
        return Replayed([[start[ref] for _, ref in st.slots] for st in plan.streams],
                        {t.id: t.end for t in schedule.ops})
    return replay(schedule, plan)


def finalize(
    schedule: Schedule, mode: str = "flags", progress: Progress | None = None,
    on_final: Callable[[Schedule, SyncPlan], Any] | None = None,
) -> tuple[Schedule, Program, SyncPlan]:
    """Plan sync, build the program and time it: :func:`finalize_replayed` without the
    replay."""
    final, program, plan, _ = finalize_replayed(schedule, mode, progress, on_final)
    return final, program, plan


def planned_flags(schedule: Schedule, progress: Progress) -> SyncPlan:
    """The flags program's sync plan of ``schedule``, as the ``plan sync`` phase of
    ``progress`` (which says when event ids ran short and the baton plan stands in)."""
    with progress.phase("plan sync"):
        plan = plan_sync(schedule, progress=progress)
        if plan.stats.fallback:
            progress.line(f"  event ids ran short ({plan.stats.fallback}); planned one baton of flags "
                          "per group of cores instead (one id per pool, consumers re-timed)")
    return plan


def finalize_replayed(
    schedule: Schedule, mode: str = "flags", progress: Progress | None = None,
    on_final: Callable[[Schedule, SyncPlan], Any] | None = None, plan: SyncPlan | None = None,
) -> tuple[Schedule, Program, SyncPlan, Replayed]:
    """Plan sync, build the program and time it: the last step before writing files.

    Parameters
    ----------
    schedule : Schedule
        A semi-active timetable (as every solver method returns).
    mode : {"flags", "timed"}
        ``"flags"``: streams with SET/WAIT flags, nominal cycles from an instruction-level
        replay in which shared links are shared as the hardware does (:mod:`staticsched.model.fluid`).
        ``"timed"``: the same streams without flags, each instruction at its timetable cycle.
    progress : Progress, optional
        Reports the ``plan sync`` and ``build program`` phases.
    on_final : callable, optional
        Called with the schedule returned and the plan as soon as they are known, before the
        program is built (the CLI starts rendering the files that need no program there).
    plan : SyncPlan, optional
        ``schedule``'s flags sync plan (:func:`planned_flags`) when the caller has it already.

    Returns
    -------
    (Schedule, Program, SyncPlan, Replayed)
        The schedule -- the plan's op times and placements, with the sync events, ``makespan``
        and status of the program's replay and the plan's ``planned_makespan`` -- the program,
        the plan, and the replay the program's cycles come from (what
        :func:`staticsched.emit.explain.explain` reads).

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
            timed = attrs.evolve(schedule, events=(), planned_makespan=schedule.makespan)
            if on_final is not None:
                on_final(timed, plan)
            played = _timing(timed, plan)
            return timed, _program(timed, plan, played, "timed"), plan, played
    if plan is None:
        plan = planned_flags(schedule, rep)
    with rep.phase("build program"):
        played = replay(schedule, plan)
        barred, replayed, choices = choose_barriers(
            schedule.hw, plan, played.makespan, functools.partial(replay, schedule), schedule.ops)
        if choices:
            for choice in choices:
                rep.line(f"  barrier: {choice.line()}")
            plan = attrs.evolve(barred, stats=attrs.evolve(barred.stats, barriers=tuple(choices)))
            played = replayed or played
        plan, played, gathered = gather_turnstiles(schedule.hw, plan, played,
                                                   functools.partial(replay, schedule))
        if gathered:
            rep.line(f"  turnstiles: {gathered} GM-word WAIT(s) joined an earlier poll of their stream")
        final = _played(schedule, plan, played)
        if on_final is not None:
            on_final(final, plan)
        return final, _program(final, plan, played, "flags"), plan, played
