"""Which search a problem gets, by its size and shape (DESIGN §5 "Scale", docs/design.md 11).

A plan is a sequence of phases, each a share of the problem's seconds; what one phase leaves
unused (it proved its model optimal early, or the LNS converged) goes to the next:

* ``whole``: one CP-SAT model of the whole problem. Small and medium models, where CP-SAT's
  default search with its LP relaxation finds and proves good schedules (job shops, chains
  of small tasks). Disjunctive problems search *without* hints (the list schedule only caps
  the horizon): on job shops the hint anchored the search (ft20 proven in 22.6 s with it,
  6.7 s without; ta01 43.9 s vs 27.4 s). Resource-bound problems keep the complete hint: at
  thousands of ops CP-SAT finds no first solution without it.
* ``lns``: windowed LNS from the best schedule so far (:mod:`.lns`). Long tile pipelines,
  where one model stops improving (300-1,500-op pipelines: the whole model gained nothing in
  8-120 s while windows gained 1.8%, 0.34% and 0.23%), and everything too big for one model.

Thresholds (measured; docs/design.md refinement 11 has the tables):

* disjunctive problems up to :data:`DISJUNCTIVE_LIMIT` ops: ``whole`` alone. Job shops of
  36-300 ops are solved best this way; windowed LNS on them stalled far above (ta01: 1353
  after 30 s of windows vs 1231 proven by the whole model).
* resource problems up to :data:`WHOLE_ONLY_LIMIT` ops: ``whole``; up to :data:`FULL_LIMIT`:
  ``whole`` for half, then ``lns``; above: ``lns``.

Workers (:func:`solve_whole`). One worker runs CP-SAT's default search with its LP
relaxation and strong no-overlap propagation. With ``w >= 2`` workers the whole model runs
two *lanes* side by side: lane 0 is exactly the one-worker search (so more workers never give
a worse schedule), lane 1 is CP-SAT's deterministic interleaved portfolio (LNS
neighbourhoods, other heuristics) on the other ``w - 1`` workers, hinted with the incumbent.
A proof on lane 0 stops lane 1; the result is the lowest-index lane that proved optimality,
else the best makespan (ties: lower lane). Both rules depend only on what each lane does
within its own deterministic budget, so the result is reproducible. In wall-clock mode the
whole model instead gets CP-SAT's ordinary parallel search on all workers. LNS windows with
several workers run side by side (:mod:`.lns`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import attrs

from staticsched.solver.budget import STOP_WALL_NET, Clock, Shape, det_rate, spent_seconds
from staticsched.solver.cpmodel import CpResult, solve_cpsat
from staticsched.solver.list_sched import Timetable
from staticsched.solver.problem import Problem

WHOLE_ONLY_LIMIT = 250
FULL_LIMIT = 1500
DISJUNCTIVE_LIMIT = 3000


@attrs.frozen
class Phase:
    """One step of a plan: ``kind`` (``"whole"`` or ``"lns"``), its ``share`` of the seconds
    and, for ``whole``, whether the incumbent is hinted."""

    kind: str
    share: float
    hinted: bool = True


def plan(shape: Shape) -> tuple[Phase, ...]:
    """The phases for a problem of this shape (``"memory"`` and ``"flags"`` problems are both
    resource-bound)."""
    if shape.family == "disjunctive":
        if shape.n <= DISJUNCTIVE_LIMIT:
            return (Phase("whole", 1.0, hinted=False),)
        return (Phase("lns", 1.0),)
    if shape.n <= WHOLE_ONLY_LIMIT:
        return (Phase("whole", 1.0),)
    if shape.n <= FULL_LIMIT:
        return (Phase("whole", 0.5), Phase("lns", 0.5))
    return (Phase("lns", 1.0),)


@attrs.frozen
class Lane:
    """One search of a whole model: CP-SAT ``search`` on ``workers`` workers, hinted or not."""

    search: str
    workers: int
    hinted: bool


def lanes(clock: Clock, hinted: bool) -> tuple[Lane, ...]:
    """The whole-model searches for ``clock``'s mode and workers (see the module docstring)."""
    if not clock.deterministic:
        return (Lane("lp" if clock.workers <= 1 else "parallel", clock.workers, hinted),)
    first = Lane("lp", 1, hinted)
    if clock.workers <= 1:
        return (first,)
    return (first, Lane("interleave", clock.workers - 1, True))


def solve_whole(
    prob: Problem,
    start: Timetable,
    lower: int,
    clock: Clock,
    grant: float,
    hinted: bool,
    seed: int,
    progress: Callable[[str], None] | None = None,
    label: str = "",
    *,
    target: int = 0,
) -> tuple[CpResult, float]:
    """CP-SAT on the whole model of ``prob`` for ``grant`` seconds: the chosen lane's result
    and the seconds charged (calibrated in deterministic mode, wall in wall-clock mode)."""
    family = Shape.of(prob).family
    todo = lanes(clock, hinted)
    results: list[CpResult | None] = [None] * len(todo)
    stops: list[Callable[[], None] | None] = [None] * len(todo)
    proven = threading.Event()
    guard = threading.Lock()

    def run(j: int) -> None:
        lane = todo[j]
        rate = det_rate(family, lane.search, prob.n, lane.workers)

        def started(stop: Callable[[], None]) -> None:
            with guard:
                stops[j] = stop
                if j > 0 and proven.is_set():
                    stop()

        if j > 0 and proven.is_set():
            return
        res = solve_cpsat(
            prob,
            start,
            lower,
            det_limit=clock.det_limit(rate, grant),
            # wall-clock mode: the grant is the limit; else the deadline is only a safety net
            wall_limit=clock.remaining() if clock.deterministic else min(grant, clock.remaining()),
            seed=seed,
            progress=progress if j == 0 else None,
            label=label,
            workers=lane.workers,
            search=lane.search,
            use_hint=lane.hinted,
            strong=True,
            on_start=started,
            target=target,
        )
        results[j] = res
        if j == 0 and res.status == "optimal":
            with guard:
                proven.set()
                for stop in stops[1:]:
                    if stop is not None:
                        stop()

    if len(todo) == 1:
        run(0)
    else:
        threads = [threading.Thread(target=run, args=(j,), daemon=True) for j in range(len(todo))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rates = [det_rate(family, lane.search, prob.n, lane.workers) for lane in todo]
    return _choose(results, rates)


def _choose(results: Sequence[CpResult | None], rates: Sequence[float]) -> tuple[CpResult, float]:
    """The lowest lane that proved optimality, else the best solution (ties: lower lane), and
    the calibrated seconds of the lanes that decided it (lanes above a proof may have been
    stopped at any moment, so their time is not charged)."""
    done = [(j, r) for j, r in enumerate(results) if r is not None]
    spent = [spent_seconds(r.det_time, rates[j]) for j, r in done]
    for k, (_, r) in enumerate(done):
        if r.status == "optimal":
            return r, max(spent[: k + 1])
    found = [(r.objective, j, r) for j, r in done if r.timetable is not None]
    chosen = min(found, key=lambda x: x[:2])[2] if found else done[0][1]
    if any(r.stop_reason == STOP_WALL_NET for _, r in done):
        # a lane the wall clock cut short may have changed which lane wins
        chosen = attrs.evolve(chosen, stop_reason=STOP_WALL_NET)
    return chosen, max(spent)
