"""Pass 4 of sync planning on chips without point-to-point cross-core flags (A2/A3): how each
cross-core flag travels.

Such a chip signals between a cluster's AIC and its AIVs with **mode-2** flags only: one AIC
SET adds one to the counter of the id on *every* AIV of the cluster, and one AIC WAIT passes
only when every AIV has set the id. A mode-2 flag therefore covers a *group*: on the AIC's
stream, one SET slot per AIV of the cluster in a row (nothing between them, so they fire at
the same point), all with the same id, or likewise one WAIT slot per AIV. Such a group becomes
one mode-2 instruction on the AIC; each AIV keeps its own WAIT (or SET), also in mode 2. The
flags keep their ids and anchors, so the plan's guarantees hold unchanged: per receiving core
and id the sets, the waits and the counter are exactly those of the point-to-point pools the
ids were assigned in (the AIC's WAIT is the AIVs' WAITs in a row, which a whole-core stall makes
one). Every other cross-core flag (across clusters, between two AIVs, or an AIC<->AIV flag
without its group) goes through a **GM word** (IBSet/IBWait) with the chip's
``gm_flag_latency``; the program's nominal replay times it so.
"""

from __future__ import annotations

import attrs

from staticsched.emit.sync.plan import Flag, SyncPlan
from staticsched.model.hardware import SyncModel


def assign_routes(sync: SyncModel, plan: SyncPlan) -> SyncPlan:
    """``plan`` with every cross-core flag's route (``Flag.route``) and the members of each
    mode-2 group after its first marked ``merged`` (their AIC-side instruction is the first's)."""
    if sync.pair_flags or not any(f.kind == "cross" for f in plan.flags):
        return plan
    flags = plan.flags
    route = [sync.route(f.set_core, f.wait_core) if f.kind == "cross" else "" for f in flags]
    grouped = [False] * len(flags)
    merged = [False] * len(flags)
    size = sync.cluster_size - 1  # the AIVs a mode-2 flag reaches
    streams = [attrs.evolve(st, slots=_cross_last(st.slots, flags, route))
               if st.core % sync.cluster_size == sync.hub_slot else st for st in plan.streams]
    for st in streams:
        if st.core % sync.cluster_size != sync.hub_slot:
            continue
        slots = st.slots
        k = 0
        while k + size <= len(slots):
            group = _group(flags, route, grouped, slots[k:k + size])
            if group is None:
                k += 1
                continue
            for j, f in enumerate(group):
                grouped[f] = True
                merged[f] = j > 0
            k += size
    out = []
    for f, fl in enumerate(flags):
        r = route[f]
        if r == "2" and not grouped[f]:
            r = "gm"
        out.append(attrs.evolve(fl, route=r, merged=merged[f]) if r else fl)
    return attrs.evolve(plan, flags=out, streams=streams)


def _cross_last(slots: tuple, flags: tuple[Flag, ...], route: list[str]) -> tuple:
    """``slots`` with each run of WAITs (or of SETs) between two ops put in the order: the
    core's own flags first, then the cross-core ones, those that may go in mode 2 by id and
    AIV. The flags of a run all wait before (or set after) the same op, so their order changes
    nothing but when each is reached: a cluster's two waits of one id become adjacent, which
    a mode-2 group needs (an intra-core WAIT between them made both GM words), and a
    cross-core wait, which stalls the whole core, is reached no earlier than before."""
    out: list = []
    k = 0
    while k < len(slots):
        what = slots[k][0]
        j = k
        while j < len(slots) and slots[j][0] == what:
            j += 1
        run = slots[k:j]
        if what != "op" and len(run) > 1:
            run = sorted(run, key=lambda slot: _place_in_run(flags[slot[1]], what, route[slot[1]]))
        out.extend(run)
        k = j
    return tuple(out)


def _place_in_run(flag: Flag, what: str, route: str) -> tuple[int, int, int, int]:
    """Sort key of a flag slot in its run (stable sort): the core's own flags, then mode-2
    candidates by id and AIV, then the other cross-core flags."""
    if not route:
        return (0, 0, 0, 0)
    if route != "2":
        return (1, 1, 0, 0)
    return (1, 0, flag.event, flag.wait_core if what == "set" else flag.set_core)


def _group(flags: tuple[Flag, ...], route: list[str], grouped: list[bool],
           window: tuple) -> list[int] | None:
    """The flags of ``window`` (consecutive slots of an AIC stream) if they form a mode-2
    group: all SETs or all WAITs of mode-2 candidates not yet grouped, one per AIV of the
    cluster, with one id."""
    what = window[0][0]
    if what == "op":
        return None
    fs = []
    for w, f in window:
        if w != what or route[f] != "2" or grouped[f]:
            return None
        fs.append(f)
    peers = {flags[f].wait_core if what == "set" else flags[f].set_core for f in fs}
    if len(peers) != len(fs) or len({flags[f].event for f in fs}) != 1:
        return None
    return fs
