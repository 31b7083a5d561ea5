"""Pass 5 of sync planning on A2/A3: a barrier instead of GM words, where it costs less.

Across clusters, and between two AIVs, cores signal only through GM words (:mod:`.routes`): a
store, and on the waiting core a polling load that holds it ``gm_flag_poll`` cycles even when
the word was stored long before. A rowwise task on every AIV feeding a matmul on every AIC, a
matmul's epilogue feeding the next matmul, or one elementwise task feeding another cut into
other tiles makes hundreds to thousands of them (ffn_layernorm on ``ascend-a2``: 11,091). The
chip's alternative is a barrier: a **mode-0** flag joins all AIVs (each SETs the id once, each
WAIT passes when every other AIV has set it); an AIV then tells its own AIC with a **mode-2**
flag (the AIC's AND wait needs both of its AIVs). That orders every AIV's work before the
barrier ahead of every consumer's work after its wait, with one instruction per core instead
of a GM word per dependency, but it makes every consumer wait for the slowest producer.

*Per dependency* means per pair of tasks (the lowering names every op after its task: the
part of its id before the first dot): the bundle of GM words from the producer task's ops on
AIVs to the consumer task's ops. A bundle's barrier replaces all of its GM words:

- on every AIV, right after its last op of the producer task (with that op's own SETs), on
  that op's stream, a mode-0 SET (an AIV with no op of the task puts it first on its stream);
- its mode-0 WAIT right after, or, on an AIV that consumes, where its first GM WAIT of the
  bundle was; then a mode-2 SET to its AIC when that AIC consumes;
- on every consuming AIC, where its first GM WAIT of the bundle was: the mode-2 AND WAIT.

The plan keeps a point-to-point view (as for mode 2): a mode-0 SET on AIV ``v`` is one flag
per other AIV, in a row, and its WAIT one flag per other AIV, in a row; the program builder
turns each row into one instruction, and the verifier expands it back.

*When a barrier applies*: an AIV's GM SETs of the bundle all sit on one stream, a consumer's
GM WAITs of the bundle all on one stream, and a mode-0 id and each consuming cluster's mode-2
id are free (no flag of the plan uses them; a flag's identity is its mode and id, and reusing
an id across modes needs the old one drained, so the pass takes only unused ids). Bundles
whose producers are AICs (only a split-K partial, read by its own task) keep their GM words.
*The choice* is by the program's nominal replay: the barrier is kept when the program is no
longer with it (fewer instructions at equal time), and dropped when it is longer or the
replay finds the program stuck (a consumer's loads interleaved with its own producer's on one
pipe make a barrier wait for itself). Bundles are tried in task order, each against the plan
with the bundles before it decided. The solver prices an edge from an AIV across clusters at
the cheaper of the two (:meth:`~staticsched.model.hardware.SyncModel.latency`), so that its
bounds hold whichever is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from staticsched.emit.sync.plan import Flag, PlanStream, SyncPlan
from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware


@attrs.frozen
class BarrierChoice:
    """One bundle of GM words and what became of it: ``kept`` a barrier, else why not.
    ``gm_words`` is the bundle's size; the makespans are the nominal replays' without and with
    the barrier (0 where the barrier did not apply)."""

    producer: str
    consumer: str
    gm_words: int
    makespan_gm: int
    makespan_barrier: int
    kept: bool
    why: str

    def line(self) -> str:
        """The summary's line for this choice."""
        head = f"{self.producer} -> {self.consumer}: {self.gm_words} GM words"
        if not self.makespan_barrier:
            return f"{head} kept ({self.why})"
        verdict = "barrier" if self.kept else "GM words kept"
        return (f"{head}: {verdict} (makespan {self.makespan_gm} with GM words, "
                f"{self.makespan_barrier} with a barrier{'' if not self.why else '; ' + self.why})")


def task_of(op_id: str) -> str:
    """The task an op of a lowered TaskGraph belongs to: its id up to the first dot."""
    return op_id.split(".", 1)[0]


def bundles(hw: Hardware, plan: SyncPlan) -> list[tuple[tuple[str, str, str], list[int]]]:
    """The GM-word flags by (producer task, consumer task, the producers' core type: ``"AIC"``
    or ``"AIV"``), in that order."""
    sync = hw.sync
    cs, hub = sync.cluster_size, sync.hub_slot
    out: dict[tuple[str, str, str], list[int]] = {}
    for f in plan.flags:
        if f.route == "gm" and f.reason != "credit":
            side = "AIC" if f.set_core % cs == hub else "AIV"
            out.setdefault((task_of(f.set_op), task_of(f.wait_op), side), []).append(f.index)
    return sorted(out.items())


def choose_barriers(
    hw: Hardware,
    plan: SyncPlan,
    makespan: int,
    replay: Callable[[SyncPlan], Any],
    timed_ops: Sequence[Any],
) -> tuple[SyncPlan, Any, list[BarrierChoice]]:
    """Try a barrier for each bundle of GM words (see the module docstring).

    Parameters
    ----------
    hw
        The chip (its ``sync`` model and cores).
    plan
        A routed plan (:func:`staticsched.emit.sync.routes.assign_routes`).
    makespan
        The nominal replay's makespan of ``plan``.
    replay
        Replays a plan; returns an object with ``makespan``; raises
        :class:`~staticsched.errors.InfeasibleError` when the plan deadlocks.
    timed_ops
        The schedule's timed ops (``id``, ``start``): which op of a task is an AIV's last.

    Returns
    -------
    (SyncPlan, replay or None, list of BarrierChoice)
        The plan with the barriers kept, the replay of that plan (None when no barrier was
        kept: the caller's replay stands), and every bundle's choice in task order.
    """
    sync = hw.sync
    if (sync.pair_flags or 0 not in sync.cross_core_modes or 2 not in sync.cross_core_modes
            or not sync.cross_core_ids_per_core):
        return plan, None, []
    choices: list[BarrierChoice] = []
    played = None
    if plan.stats.fallback:
        # the baton plan relays flags through other pipes: its GM words stay as planned
        return plan, None, [BarrierChoice(p, c, len(m), makespan, 0, False,
                                          "ids ran short: the baton plan keeps its GM words")
                            for (p, c, _), m in bundles(hw, plan) if p != c]
    keys = [key for key, _ in bundles(hw, plan)]
    start = {t.id: t.start for t in timed_ops} if keys else {}
    for key in keys:
        producer, consumer, side = key
        if producer == consumer:
            # within one task (a ring's slot handed back): a barrier would order a block
            # after every block of the task, its own later ones included
            continue
        # the bundle in the plan as decided so far (a kept barrier renumbers the flags)
        members = dict(bundles(hw, plan))[key]
        if side == "AIC":
            # only a split-K partial is stored by FixPipe and read across clusters, by its own
            # task; an OpGraph's AIC stores keep their GM words
            choices.append(BarrierChoice(producer, consumer, len(members), makespan, 0, False,
                                         "producers on AICs: GM words kept"))
            continue
        cand = _with_barrier(hw, plan, producer, members, start)
        if isinstance(cand, str):
            choices.append(BarrierChoice(producer, consumer, len(members), makespan, 0, False, cand))
            continue
        try:
            rep = replay(cand)
        except InfeasibleError:
            choices.append(BarrierChoice(producer, consumer, len(members), makespan, 0, False,
                                         "the barrier would deadlock the program"))
            continue
        kept = rep.makespan <= makespan
        choices.append(BarrierChoice(producer, consumer, len(members), makespan, rep.makespan, kept, ""))
        if kept:
            plan, played, makespan = cand, rep, rep.makespan
    return plan, played, choices


def _with_barrier(hw: Hardware, plan: SyncPlan, producer: str, members: Sequence[int],
                  start: Mapping[str, int]) -> SyncPlan | str:
    """``plan`` with the GM words ``members`` (from AIVs) replaced by a barrier of every AIV
    after ``producer``'s ops (``start``: the ops' planned starts), or why it cannot be."""
    sync = hw.sync
    cs, hub = sync.cluster_size, sync.hub_slot
    flags = plan.flags
    drop = set(members)
    party = [c for c in range(hw.cores) if c % cs != hub]
    by_core: dict[int, list[int]] = {}
    for s, st in enumerate(plan.streams):
        by_core.setdefault(st.core, []).append(s)

    set_streams: dict[int, set[int]] = {}
    wait_at: dict[int, list[tuple[int, int]]] = {}
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what != "op" and ref in drop:
                if what == "set":
                    set_streams.setdefault(st.core, set()).add(s)
                else:
                    wait_at.setdefault(st.core, []).append((s, k))
    # each party core's anchor: its last op of the producer task, on the stream of its bundle
    # SETs, else on the stream whose op of the task starts last
    anchor: dict[int, tuple[int, int]] = {}
    for v in party:
        mine = set_streams.get(v, set())
        if len(mine) > 1:
            return f"AIV core {v} stores for the bundle from more than one pipe"
        last = None
        for s in sorted(mine) or by_core.get(v, ()):
            for k, (what, ref) in enumerate(plan.streams[s].slots):
                if what == "op" and task_of(ref) == producer and (last is None or start[ref] >= last[0]):
                    last = (start[ref], s, k)
        if last is not None:
            anchor[v] = (last[1], last[2])
    for a, places in wait_at.items():
        if len({s for s, _ in places}) > 1:
            return f"core {a} waits for the bundle on more than one pipe"
    for v in party:
        if v in anchor:
            continue
        # no op of the task (an AIV the producer left idle): its part goes first on the stream
        # it consumes on, or on its first stream with an op
        mine = [wait_at[v][0][0]] if v in wait_at else [
            s for s in by_core.get(v, ()) if any(w == "op" for w, _ in plan.streams[s].slots)][:1]
        if not mine:
            return f"AIV core {v} has no op to put its part of a barrier before"
        anchor[v] = (mine[0], -1)
    # the consuming AICs, reached in mode 2 from their cluster's AIVs
    others = sorted(c for c in wait_at if c not in anchor)

    # ids of the chip's own flags (modes 0 and 2) per cluster; a GM word's id is a word's
    used: dict[int, set[int]] = {}
    for f in flags:
        if f.route in ("0", "2"):
            used.setdefault(f.set_core // cs, set()).add(f.event)
            used.setdefault(f.wait_core // cs, set()).add(f.event)
    taken = set().union(*used.values())
    # a mode-0 or mode-2 id is one of the receiving core's own, within the per-pair pools too
    limit = min(sync.cross_core_ids_per_core, sync.cross_core_event_ids)
    free = [i for i in range(limit) if i not in taken]
    if not free:
        return "no mode-0 id is free on the AIVs"
    barrier_id = free[0]
    hop_id: dict[int, int] = {}
    for cluster in sorted({c // cs for c in others}):
        ids = [i for i in range(limit) if i != barrier_id and i not in used.get(cluster, ())]
        if not ids:
            return f"no mode-2 id is free in cluster {cluster}"
        hop_id[cluster] = ids[0]

    out = list(flags)

    def add(**kw: Any) -> int:
        out.append(Flag(index=len(out), kind="cross", reason="barrier", **kw))
        return len(out) - 1

    streams = plan.streams
    # the op each party core's SETs are anchored to: after its last op of the task, or before
    # the first op of its stream
    op_at = {v: streams[s].slots[k][1] if k >= 0 else next(r for w, r in streams[s].slots if w == "op")
             for v, (s, k) in anchor.items()}
    first = {v for v, (_, k) in anchor.items() if k < 0}
    unit_of = {v: streams[s].unit for v, (s, _) in anchor.items()}
    # where each consumer waits: at its first GM WAIT of the bundle (before that op)
    consumer_at = {c: min(places) for c, places in wait_at.items()}
    consumer_op = {c: flags[streams[s].slots[k][1]].wait_op for c, (s, k) in consumer_at.items()}

    def waits_on(v: int) -> dict[str, Any]:
        if v in consumer_at:
            return {"wait_core": v, "wait_unit": streams[consumer_at[v][0]].unit,
                    "wait_op": consumer_op[v], "wait_side": "before"}
        return {"wait_core": v, "wait_unit": unit_of[v], "wait_op": op_at[v],
                "wait_side": "before" if v in first else "after"}

    # per stream, the runs of slots to insert: (old slot, "after" it or "before" it, slots).
    # A party core's SETs go after its anchor, its WAITs there too or, if it consumes, where
    # it first waited, and its mode-2 SETs to its cluster's consumers right after its WAITs
    inserts: dict[int, list[tuple[tuple[str, Any], str, list[tuple[str, int]]]]] = {}
    waits: dict[int, list[tuple[str, int]]] = {v: [] for v in party}
    for v in party:
        ends = {"set_core": v, "set_unit": unit_of[v], "set_op": op_at[v],
                "set_side": "before" if v in first else "after"}
        sets = []
        for w in party:
            if w != v:
                f = add(**ends, **waits_on(w), event=barrier_id, route="0")
                sets.append(("set", f))
                waits[w].append(("wait", f))
        s, k = anchor[v]
        inserts.setdefault(s, []).append((streams[s].slots[k], "after", sets) if k >= 0 else
                                         (("start", None), "start", sets))
    hops: dict[int, list[int]] = {c: [] for c in others}
    for v in party:
        s_w, k_w = consumer_at.get(v, anchor[v])
        run = sorted(waits[v], key=lambda slot: out[slot[1]].set_core)
        cluster = range(v - v % cs, v - v % cs + cs)
        # the AIC's AND WAIT is one instruction for its cluster's AIVs: the first AIV's flag
        # carries it, the other's is merged into it
        for c in (c for c in cluster if c in hops):
            f = add(set_core=v, set_unit=streams[s_w].unit, set_op=consumer_op.get(v, op_at[v]),
                    set_side="before" if v in consumer_at or v in first else "after", **waits_on(c),
                    event=hop_id[v // cs], route="2", merged=v != min(x for x in cluster if x != c))
            run.append(("set", f))
            hops[c].append(f)
        if v in consumer_at:
            inserts.setdefault(s_w, []).append((streams[s_w].slots[k_w], "before", run))
        else:
            inserts[s_w][-1][2].extend(run)
    for c in others:
        s, k = consumer_at[c]
        run = [("wait", f) for f in sorted(hops[c], key=lambda f: out[f].set_core)]
        inserts.setdefault(s, []).append((streams[s].slots[k], "before", run))

    # the flags without the GM words dropped, renumbered (a flag's index is its place)
    renumber = {}
    kept_flags = []
    for f in out:
        if f.index not in drop:
            renumber[f.index] = len(kept_flags)
            kept_flags.append(attrs.evolve(f, index=len(kept_flags)))

    def moved(slots: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return [slot if slot[0] == "op" else (slot[0], renumber[slot[1]]) for slot in slots]

    new_streams = []
    for s, st in enumerate(streams):
        slots = [slot for slot in st.slots if slot[0] == "op" or slot[1] not in drop]
        places = [(0 if how == "start" else _after_sets(slots, ref) if how == "after"
                   else _before_waits(slots, st.slots, ref), j, run)
                  for j, (ref, how, run) in enumerate(inserts.get(s, ()))]
        # the later place first, so that the earlier one's index still holds
        for at, _, run in sorted(places, key=lambda x: (x[0], x[1]), reverse=True):
            slots[at:at] = run
        new_streams.append(PlanStream(st.core, st.unit, moved(slots)))
    cross = sum(1 for f in kept_flags if f.kind == "cross")
    return attrs.evolve(plan, flags=tuple(kept_flags), streams=tuple(new_streams),
                        stats=attrs.evolve(plan.stats, cross_core=cross))


def _after_sets(slots: list[tuple[str, Any]], op_slot: tuple[str, Any]) -> int:
    """Where a barrier goes in ``slots``: after ``op_slot`` and the SETs that follow it."""
    k = slots.index(op_slot) + 1
    while k < len(slots) and slots[k][0] == "set":
        k += 1
    return k


def _before_waits(slots: list[tuple[str, Any]], old: Sequence[tuple[str, Any]],
                  first: tuple[str, Any]) -> int:
    """Where an AIC's wait goes in ``slots`` (the bundle's waits removed): the place of the
    bundle's first wait ``first`` in the stream's old slots ``old``, i.e. before the next slot
    of ``old`` that is still there."""
    k = old.index(first)
    kept = set(map(tuple, slots))
    for slot in old[k + 1:]:
        if tuple(slot) in kept:
            return slots.index(slot)
    return len(slots)
