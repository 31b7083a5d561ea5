"""Sync planning as data: which dependencies need a flag, where the flag goes, which id it uses.

A :class:`SyncPlan` is computed from a :class:`~staticsched.model.schedule.Schedule` before any
text is written (TVM's coproc-sync habit): per (core, pipe) the program order with SET/WAIT
slots, every flag with its anchors and event id, and the counts. Planning runs in passes:

1. **Elimination** (:mod:`.eliminate`): the dependencies happens-before does not already
   imply, found exactly with vector clocks.
2. **Event ids** (:mod:`.ids`): an id for every kept flag under the budget and the reuse
   rule, with credits where needed, without moving any op.
3. When ids run short there: the **baton plan** (:mod:`.baton`), which trades time for ids
   and never fails given one id per pool.
4. On chips without point-to-point cross-core flags (A2/A3), each cross-core flag's **route**
   (:mod:`.routes`): a mode-2 flag between a cluster's AIC and its AIVs, or a GM word.

Modules: :mod:`.plan` (the plan's types), :mod:`.layout` (the timetable as indices and the
dependencies to cover), then the passes.
"""

from __future__ import annotations

from staticsched.emit.sync.baton import plan_baton
from staticsched.emit.sync.eliminate import eliminate
from staticsched.emit.sync.groups import plan_by_groups
from staticsched.emit.sync.ids import IdAssigner
from staticsched.emit.sync.layout import Layout, dependencies
from staticsched.emit.sync.plan import Flag, PlanStream, SyncPlan, SyncStats, ids_used
from staticsched.emit.sync.routes import assign_routes
from staticsched.errors import EventBudgetError, InfeasibleError
from staticsched.model.schedule import Schedule
from staticsched.progress import Progress, silent

__all__ = ["Flag", "PlanStream", "SyncPlan", "SyncStats", "plan_sync", "plan_timed"]


def plan_sync(schedule: Schedule, progress: Progress | None = None) -> SyncPlan:
    """Plan the flags of ``schedule``: program order, kept flags with ids, credits, counts.

    Parameters
    ----------
    schedule : Schedule
        A timetable whose every dependency (``graph.edges`` plus the address-reuse edges of its
        placements) goes forward in time: ``end(producer) <= start(consumer)``.
    progress : Progress, optional
        Shows how many ops have their flags placed.

    No flag orders transfers on a shared link: the hardware shares the link among them
    (:mod:`staticsched.model.fluid`), so contention only moves time.

    Returns
    -------
    SyncPlan
        Per (core, unit) the ops in (start, graph index) order with SET/WAIT slots, the flags
        with their ids, and the counts. Every WAIT has its SET, every SET its WAIT, so no flag
        is left set at the end.

    When an id pool runs out and no credit can free an id without moving ops, the baton plan
    of :mod:`staticsched.emit.sync.baton` is used instead: it needs one id per pool and delays
    consumers (the program's nominal replay re-times them); ``stats.fallback`` says why.

    Raises
    ------
    InfeasibleError
        When the timetable violates a dependency, or a pool the plan needs has no id at all
        (a budget of 0; the solver's precheck reports dependencies that need one first).
    """
    return assign_routes(schedule.hw.sync, _plan(schedule, progress))


def _plan(schedule: Schedule, progress: Progress | None) -> SyncPlan:
    lay = Layout.of(schedule)
    deps = dependencies(schedule, lay)
    with (progress or silent()).counter("placing flags", len(lay.ids)) as count:
        grouped = plan_by_groups(schedule.hw.sync, lay, deps, count.update)
        if grouped is not None:
            drafts, slots = grouped
            nkept = len(drafts)
        else:
            kept = eliminate(lay, deps)
            nkept = len(kept)
            assigner = IdAssigner(schedule.hw.sync, lay, kept)
            try:
                drafts = assigner.run(count.update)
            except EventBudgetError as exc:
                plan = plan_baton(lay, deps, kept, exc.problems[0])
                _check_budgets(schedule, plan)
                return plan
            slots = [s for _, _, s in assigner.streams()]
    flags = tuple(
        Flag(
            index=f,
            kind=d.kind,
            reason=d.reason,
            set_core=lay.pipes[lay.pipe_of[d.set_op]][0],
            set_unit=lay.pipes[lay.pipe_of[d.set_op]][1],
            set_op=lay.ids[d.set_op],
            set_side=d.set_side,
            wait_core=lay.pipes[lay.pipe_of[d.wait_op]][0],
            wait_unit=lay.pipes[lay.pipe_of[d.wait_op]][1],
            wait_op=lay.ids[d.wait_op],
            wait_side=d.wait_side,
            event=d.event,
            item=d.item,
        )
        for f, d in enumerate(drafts)
    )
    credits = sum(1 for f in flags if f.reason == "credit")
    stats = SyncStats(
        dependencies=len(deps),
        flags_naive=len(deps),
        flags_kept=nkept,
        flags_eliminated=len(deps) - nkept,
        credits=credits,
        cross_core=sum(1 for f in flags if f.kind == "cross"),
        ids_used=ids_used(lay.pipes, flags),
    )
    streams = [PlanStream(core, unit, s) for (core, unit), s in zip(lay.pipes, slots, strict=True)]
    return SyncPlan("flags", streams, flags, [e for _, _, e in deps], stats)


def _check_budgets(schedule: Schedule, plan: SyncPlan) -> None:
    """Every pool ``plan`` uses has at least one id (the chained plan uses id 0 everywhere)."""
    sync = schedule.hw.sync
    empty = sorted({
        (f.kind, f.set_core, f.set_unit, f.wait_core, f.wait_unit)
        for f in plan.flags
        if (sync.no_cross_flag if f.kind == "cross" else sync.event_ids == 0)
    })
    lines = []
    for kind, sc, su, wc, wu in empty:
        if kind == "cross":
            lines.append(f"ordering the flags of cores {sc} and {wc} needs a cross-core flag "
                         f"core {sc} -> core {wc}, but {sync.no_cross_flag}")
        else:
            lines.append(f"ordering the flags of core {sc} needs a flag {su} -> {wu}, but "
                         "sync.event_ids = 0")
    if lines:
        raise InfeasibleError(lines)


def plan_timed(schedule: Schedule) -> SyncPlan:
    """The plan of a timed program: program order only, no flags (exact cycles order everything).

    The dependency count is still reported; every dependency counts as eliminated.
    """
    lay = Layout.of(schedule)
    deps = dependencies(schedule, lay)
    streams = [
        PlanStream(core, unit, [("op", lay.ids[x]) for x in lay.seq[q]])
        for q, (core, unit) in enumerate(lay.pipes)
    ]
    stats = SyncStats(len(deps), len(deps), 0, len(deps), 0, 0, ())
    return SyncPlan("timed", streams, (), [e for _, _, e in deps], stats)
