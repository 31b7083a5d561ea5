"""Program building and nominal timing: a sync plan becomes per-pipe instruction streams.

Nominal timing is an instruction-level replay of the planned streams with exact durations:
an op issues when its pipe is free and every WAIT before it is released; a SET fires when
everything before it on its pipe has finished, and its flag is visible ``flag_latency``
(across cores ``cross_core_latency``) cycles later; a WAIT is released at the later of the
moment its pipe reaches it and the moment its flag is visible. Every instruction records that
cycle as its ``cycle``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs

from staticsched.emit.sync import Flag, SyncPlan, plan_sync, plan_timed
from staticsched.emit.sync.barriers import choose_barriers
from staticsched.emit.sync.turnstiles import gather_turnstiles
from staticsched.errors import InfeasibleError, InputError
from staticsched.model.deps import intended_writes
from staticsched.model.fluid import FluidLinks, FluidTransfer
from staticsched.model.hardware import RATE_DENOM, SyncModel
from staticsched.model.links import op_transfer, rate_text
from staticsched.model.placement import SyncEvent
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.model.schedule import Schedule
from staticsched.options import MODES
from staticsched.progress import Progress, silent


@attrs.frozen
class Replayed:
    """A program's nominal replay: the cycle of every slot of every planned stream, and every
    op's end (a transfer on a shared link ends when link sharing lets it, not at its start plus
    its planned duration)."""

    cycles: list[list[int]]
    ends: dict[str, int]

    @property
    def makespan(self) -> int:
        """The last op's end or the last sync instruction's cycle, whichever is later: a
        stream may end in a WAIT (a credit returned after its last op), and the core is not
        done until it passes, as the verifier's replay counts it."""
        last = max((c[-1] for c in self.cycles if c), default=0)
        return max(max(self.ends.values(), default=0), last)


def replay_cycles(schedule: Schedule, plan: SyncPlan) -> list[list[int]]:
    """Nominal issue cycle of every slot of every planned stream (:func:`replay`)."""
    return replay(schedule, plan).cycles


def replay(schedule: Schedule, plan: SyncPlan) -> Replayed:
    """The nominal replay of the planned streams.

    Parameters
    ----------
    schedule : Schedule
        Supplies the op durations and the flag latencies (``schedule.hw.sync``).
    plan : SyncPlan
        The streams to replay.

    Returns
    -------
    Replayed
        ``cycles[s][k]`` for slot ``k`` of ``plan.streams[s]``, and every op's end. In a flags
        program the transfers on shared links share them as the hardware does
        (:mod:`staticsched.model.fluid`); otherwise every op takes its planned duration.

    Raises
    ------
    InfeasibleError
        If the streams deadlock (a WAIT whose SET can never fire).
    """
    fluid = _fluid_transfers(schedule) if plan.mode == "flags" else {}
    if fluid:
        return _fluid_replay(schedule, plan, fluid)
    sync = schedule.hw.sync
    # a transfer slowed by a shared link runs longer than its op's nominal duration
    duration = {t.id: t.end - t.start for t in schedule.ops}
    latency, hold = _latencies(sync, plan), wait_holds(sync, plan)
    streams = plan.streams
    cycles = [[0] * len(s.slots) for s in streams]
    ends: dict[str, int] = {}
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
                ends[ref] = t
            elif what == "set":
                cycles[s][k] = t
                visible[ref] = t + latency[ref]
                if ref in blocked:
                    todo.append(blocked.pop(ref))
            else:
                if ref not in visible:
                    blocked[ref] = s
                    break
                t = max(t, visible[ref]) + hold[ref]
                cycles[s][k] = t
            k += 1
        at[s], cursor[s] = k, t
    _check_finished(plan, at)
    return Replayed(cycles, ends)


def _latencies(sync, plan: SyncPlan) -> list[int]:
    # visibility only: a GM word's polling load is its wait's hold (_holds), paid after the
    # later of the wait's arrival and the word's visibility
    return [sync.route_latency(f.route) if f.route else
            sync.latency((f.set_core, f.set_unit), (f.wait_core, f.wait_unit)) for f in plan.flags]


def wait_holds(sync, plan: SyncPlan) -> list[int]:
    """Per flag, the cycles its WAIT holds its core once its flag is visible: a GM word's
    polling load, paid once by a run of GM-word WAITs in a row on one stream (a turnstile:
    one load polls them all), i.e. by the run's last WAIT only."""
    hold = [sync.wait_hold(f.route) for f in plan.flags]
    for st in plan.streams:
        slots = st.slots
        for (what, ref), (nxt, ref2) in itertools.pairwise(slots):
            if what == "wait" and nxt == "wait" and hold[ref] and hold[ref2]:
                hold[ref] = 0
    return hold


def _check_finished(plan: SyncPlan, at: Sequence[int]) -> None:
    streams = plan.streams
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


def _fluid_transfers(schedule: Schedule) -> dict[str, FluidTransfer]:
    """The ops that move data over a shared link, as link sharing sees them."""
    hw, graph = schedule.hw, schedule.graph
    if not hw.links:
        return {}
    index = {lk.name: k for k, lk in enumerate(hw.links)}
    out = {}
    for op in graph.ops:
        x = op_transfer(op, graph, hw)
        if x is not None:
            out[op.id] = FluidTransfer(x.bytes * RATE_DENOM, x.overhead, x.path_units,
                                       tuple(index[n] for n in x.links))
    return out


def _fluid_replay(schedule: Schedule, plan: SyncPlan, fluid: dict[str, FluidTransfer]) -> Replayed:
    """The replay in time order: pipes issue as in :func:`replay`, transfers on shared links
    end when link sharing (:class:`~staticsched.model.fluid.FluidLinks`) drains them."""
    duration = {t.id: t.end - t.start for t in schedule.ops}
    latency, hold = _latencies(schedule.hw.sync, plan), wait_holds(schedule.hw.sync, plan)
    streams = plan.streams
    cycles = [[0] * len(s.slots) for s in streams]
    ends: dict[str, int] = {}
    at = [0] * len(streams)
    visible: dict[int, int] = {}
    #: a polling wait's completion (arrival or visibility, whichever is later, plus its hold)
    polled: dict[int, int] = {}
    blocked: dict[int, list[tuple[int, int]]] = {}
    heap = [(0, s) for s in range(len(streams))]
    links = FluidLinks([lk.units for lk in schedule.hw.links])
    owner: dict[str, int] = {}

    def run(s: int, t: int) -> None:
        slots, k = streams[s].slots, at[s]
        while k < len(slots):
            what, ref = slots[k]
            if what == "op":
                cycles[s][k] = t
                at[s] = k + 1
                x = fluid.get(ref)
                if x is None:
                    ends[ref] = t + duration[ref]
                    heapq.heappush(heap, (ends[ref], s))
                else:
                    owner[ref] = s
                    links.issue(ref, x, t)
                return
            if what == "set":
                cycles[s][k] = t
                vis = visible[ref] = t + latency[ref]
                for s2, t2 in blocked.pop(ref, ()):
                    heapq.heappush(heap, (max(t2, vis), s2))
            else:
                vis = visible.get(ref)
                if vis is None or vis > t:
                    at[s] = k
                    if vis is None:
                        blocked.setdefault(ref, []).append((s, t))
                    else:
                        heapq.heappush(heap, (vis, s))
                    return
                if hold[ref]:
                    done_at = polled.setdefault(ref, t + hold[ref])
                    if done_at > t:
                        at[s] = k
                        heapq.heappush(heap, (done_at, s))
                        return
                cycles[s][k] = t
            k += 1
        at[s] = k

    never = 1 << 62
    while heap or links.busy():
        done = links.completion(heap[0][0] if heap else never)
        if done is not None:
            key, end = done
            ref = cast(str, key)  # the transfers were added under op ids
            ends[ref] = end
            heapq.heappush(heap, (end, owner[ref]))
            continue
        if not heap:
            break
        t, s = heapq.heappop(heap)
        run(s, t)
    _check_finished(plan, at)
    return Replayed(cycles, ends)


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


def finalize_replayed(
    schedule: Schedule, mode: str = "flags", progress: Progress | None = None,
    on_final: Callable[[Schedule, SyncPlan], Any] | None = None,
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
    with rep.phase("plan sync"):
        plan = plan_sync(schedule, progress=rep)
        if plan.stats.fallback:
            rep.line(f"  event ids ran short ({plan.stats.fallback}); planned one baton of flags "
                     "per group of cores instead (one id per pool, consumers re-timed)")
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
