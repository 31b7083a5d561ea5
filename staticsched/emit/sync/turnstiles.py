"""Turnstiles gathered: a GM word's WAIT joins an earlier run of GM-word WAITs on its stream
when the word is already visible as that run's polling load starts (design refinement 50).

A run of GM-word WAITs in a row is one turnstile: one polling load reads every word of the
run, and only the run's last WAIT pays ``gm_flag_poll`` (:func:`staticsched.emit.nominal.wait_holds`).
A consumer that reads its inputs block by block (a matmul's K steps, each fed by another
producer core) has a WAIT before each load, so each load paid its own poll: ``gpt_block``'s
down projection waited 8 x 200 cycles for words stored long before. A WAIT moved up into the
run costs nothing there when its word is visible by the time the run's poll starts (the poll
reads it with the others), and the ops after its old place no longer wait for a poll.

Moving a WAIT earlier only adds waiting, so it can change no value a read sees; it cannot
deadlock either: in the nominal replay the word's SET fired before the run passed, hence
before every slot between the run and the WAIT's old place, so the SET's causes include none
of them. The pass still replays the result and keeps it only when it is no slower; the
verifier checks the program as it checks any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from staticsched.emit.sync.plan import SyncPlan
from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware


def gather_turnstiles(hw: Hardware, plan: SyncPlan, played: Any,
                      replay: Callable[[SyncPlan], Any]) -> tuple[SyncPlan, Any, int]:
    """``plan`` with each GM-word WAIT moved into the stream's previous turnstile where its
    word is visible as that turnstile polls, the replay of the result, and how many moved
    (``plan``, ``played`` and 0 when none did, or when the result would be slower).

    ``played`` is ``plan``'s nominal replay (:class:`staticsched.emit.nominal.Replayed`) and
    ``replay`` replays a plan.
    """
    sync = hw.sync
    flags = plan.flags
    hold = [sync.wait_hold(f.route) for f in flags]
    visible: dict[int, int] = {}
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what == "set" and hold[ref]:
                visible[ref] = played.cycles[s][k] + sync.route_latency(flags[ref].route)
    moved = 0
    streams = []
    for s, st in enumerate(plan.streams):
        out: list[tuple[str, Any]] = []
        cycles = played.cycles[s]
        run_end = -1  # slots out[:run_end] end with the stream's latest turnstile
        run_poll = -1  # the cycle that turnstile's polling load starts
        for k, slot in enumerate(st.slots):
            what, ref = slot
            if what == "wait" and hold[ref]:
                joins = run_end == len(out)
                if not joins and run_end >= 0 and visible[ref] <= run_poll:
                    out.insert(run_end, slot)
                    run_end += 1
                    moved += 1
                    continue
                out.append(slot)
                run_end = len(out)
                # the run's last WAIT passes at its poll's start plus the poll
                run_poll = cycles[k] - hold[ref]
                continue
            out.append(slot)
        streams.append(attrs.evolve(st, slots=out) if out != list(st.slots) else st)
    if not moved:
        return plan, played, 0
    gathered = attrs.evolve(plan, streams=streams, stats=attrs.evolve(plan.stats, turnstiles=moved))
    try:
        again = replay(gathered)
    except InfeasibleError:  # not reachable by the argument above; kept as the guard it is
        return plan, played, 0
    if again.makespan > played.makespan:
        return plan, played, 0
    return gathered, again, moved
