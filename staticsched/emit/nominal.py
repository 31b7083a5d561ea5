"""Nominal timing: an instruction-level replay of a sync plan's streams with exact durations.

An op issues when its pipe is free and every WAIT before it is released; a SET fires when
everything before it on its pipe has finished, and its flag is visible ``flag_latency``
(across cores ``cross_core_latency``) cycles later; a WAIT is released at the later of the
moment its pipe reaches it and the moment its flag is visible (a GM word's WAIT then holds its
core for the word's polling load). In a flags program the transfers on shared links share them
as the hardware does (:mod:`staticsched.model.fluid`). The program built from the plan
(:mod:`staticsched.emit.build`) records every instruction's cycle from this replay.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import cast

import attrs

from staticsched.emit.sync import SyncPlan
from staticsched.errors import InfeasibleError
from staticsched.model.fluid import FluidLinks, FluidTransfer
from staticsched.model.hardware import RATE_DENOM
from staticsched.model.links import op_transfer
from staticsched.model.schedule import Schedule


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
