"""A capacity-, address- and event-aware list scheduler.

Time-driven schedule generation: at each event time every free pipe starts the best available
op (priority rule below) whose resources are there *now*:

* **memory** -- the op's new items (those it accesses first) get aligned addresses by
  first fit among the bytes not held by a live item; an item is held from its first access
  start to its last access end plus ``reuse_gap`` (the flag latency the reuse edge may need);
* **event ids** -- if the op opens a flag lifetime (a :class:`~.problem.Token`), fewer than
  ``event_ids`` lifetimes of that pipe pair may be live from its end on.

Memory is allocated per space **in a fixed topological order** ("in-order allocation"): an op
may take new bytes in a space only after every op before it in that order has. Ops that
allocate nothing move freely. That costs little (the ops that fill a space usually sit on
one pipe in program order anyway) and makes the scheduler deadlock-free on memory: the first
unstarted op in the order only ever waits for items whose last accesses come earlier, which
all can run, so what it finally sees is the sequential program's live set. Event ids can
still block; then the next variant is tried, and if all fail the caller explains why.

Priorities (``rule``): ``"critical"`` ranks by the longest path to the end (ties: ops on the
bottleneck pipe, then order); ``"order"`` by the topological order itself.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence

import attrs

from staticsched._workers import Mapped, cpus
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.base import Stuck, Tracker
from staticsched.solver.families.links import LinkTracker
from staticsched.solver.families.memory_tracker import MemoryTracker
from staticsched.solver.link_values import Xfer
from staticsched.solver.list_prep import Prep
from staticsched.solver.problem import Problem


@attrs.frozen
class Timetable:
    """Starts and item offsets for a problem (local indices), and the rate each transfer on a
    shared link runs at (``rates``, per op; 0 or empty: its path's full rate)."""

    starts: tuple[int, ...] = attrs.field(converter=tuple)
    offsets: tuple[int, ...] = attrs.field(converter=tuple)
    makespan: int
    rule: str = ""
    rates: tuple[int, ...] = attrs.field(converter=tuple, default=())


@attrs.frozen
class Variant:
    """One way to run the scheduler: a priority rule, the topological order that breaks its
    ties (``"graph"`` or ``"critical"``) and whether memory is allocated in that order."""

    rule: str
    alloc: str
    in_order: bool = True
    patient: bool = True

    @property
    def name(self) -> str:
        return (f"{self.rule}/{self.alloc}" + ("" if self.in_order else "/free")
                + ("" if self.patient else "/eager"))


#: tried in this order; the best makespan wins (ties: the earlier variant). The free variant
#: may reorder items (3% shorter on a heterogeneous tile pipeline) but can run out of memory.
VARIANTS = (
    Variant("critical", "graph"),
    Variant("order", "graph"),
    Variant("critical", "graph", in_order=False),
)
#: tried as well when no event-id pool binds (:func:`.list_prep.release_order`). With binding pools it
#: opens later tasks' flag lifetimes early and, where the variants above get stuck on ids,
#: finds a feasible but id-starved timetable that pre-empts solving without the pools (the
#: sync planner makes ids fit far better): ``elementwise_chain_hbm.json`` 55,384 -> 389,196
RELEASE_VARIANTS = (Variant("critical", "release"),)
#: tried only when every variant above got stuck: without in-order allocation an op that
#: would close a flag lifetime is not held back behind an op that needs a new event id
FALLBACKS = (Variant("order", "graph", in_order=False),)
#: tried as well on problems with transfers on shared links: transfers take the bandwidth
#: free now instead of waiting for a faster start (a chip of cores sharing a link keeps it
#: full), ranked in a critical-path topological order (the cores' remaining work first) or
#: in graph order. ``unequal_mm1000_hbm.json`` in timed mode: 53,851 (weighted split, the
#: best of the variants above) -> 51,872 against a link bound of 51,601.
LINK_VARIANTS = (
    Variant("order", "critical", patient=False),
    Variant("order", "graph", patient=False),
    Variant("critical", "release", patient=False),
)
#: the variants run before the list scheduler first asks whether its best is short enough
#: (``enough``): the critical-path and the graph-order rule, side by side on a 2-CPU machine.
#: Where both end stuck on an event-id pool, the default variants stop there for a caller that
#: stops early: it solves the problem without the pools next, and the sync planner fits the
#: ids (:func:`.subproblem.solve_problem`). Measured on the shipped examples (2026-12-04,
#: docs/design.md refinement 42): wherever the first batch got stuck on ids
#: (``elementwise_chain_hbm.json``, ``matmul_gelu_unfused.json``), every later variant and the
#: fallback got stuck too, the fallback after 12-15 s on the unfused GEMM's 166,656-op chip
#: problem, once per link-plan candidate
FIRST_BATCH = 2
#: problems of at least this many ops run their variants in forked workers: below it a fork
#: costs more than a variant's run
PARALLEL_OPS = 5_000
#: candidates a free pipe examines per event time before it gives up until the next event
#: (keeps free allocation linear when hundreds of ready ops wait for memory)
#: ops looked at past a transfer its links cannot serve now
STARVED_SCAN = 4
SCAN_LIMIT = 64


def list_schedule(
    prob: Problem, variants: Sequence[Variant] = VARIANTS, fallbacks: Sequence[Variant] = FALLBACKS,
    *, enough: int = -1,
) -> Timetable | Stuck:
    """List-schedule ``prob``: the best timetable over the variants.

    Parameters
    ----------
    prob
        The problem.
    variants, fallbacks
        Ways to run the scheduler; the fallbacks run only if no variant finished. The
        default variants grow by :data:`RELEASE_VARIANTS` (no binding event-id pool) and
        :data:`LINK_VARIANTS` (transfers on shared links); a caller's own tuple is run as given.
    enough
        A makespan short enough to stop at: once a timetable this short is found, the variants
        not yet run are not run (the caller's gap limit: :func:`.budget.gap_target`). The
        variants run in fixed batches (:func:`_batches`), so where they stop depends neither
        on timing nor on the machine. Where the first batch ends stuck on event ids, the
        default variants stop there too (:data:`FIRST_BATCH`). -1 (the default): every
        variant runs.

    Returns
    -------
    Timetable or Stuck
        The shortest timetable (ties keep the earlier variant; it satisfies every constraint
        of the CP-SAT model, so it is a complete hint), or the first variant's description of
        where it got stuck.
    """
    if variants is VARIANTS and fallbacks is FALLBACKS:
        return _default_schedule(prob, enough)
    return _list_schedule(prob, variants, fallbacks, enough)


@functools.lru_cache(maxsize=4)
def _default_schedule(prob: Problem, enough: int) -> Timetable | Stuck:
    """The default variants' schedule, once per problem: the coupled-link start list-schedules
    a split's problems as a candidate, and then again when it chooses that split (a pure
    function of the frozen problem, so the result is the same)."""
    return _list_schedule(prob, VARIANTS, FALLBACKS, enough)


def _list_schedule(
    prob: Problem, variants: Sequence[Variant], fallbacks: Sequence[Variant], enough: int = -1,
) -> Timetable | Stuck:
    prep = Prep(prob)
    best: Timetable | None = None
    first_stuck: Stuck | None = None
    # the default variants stop early where the first batch ran out of event ids (FIRST_BATCH)
    id_stuck = variants is VARIANTS and enough >= 0
    if variants is VARIANTS:
        extra = (*RELEASE_VARIANTS, *(LINK_VARIANTS if prob.xfers else ()))
        if any(b.binding for b in prob.budgets):
            extra = tuple(v for v in extra if v.alloc != "release")
        variants = (*variants, *extra)
    run = functools.partial(run_variant, prob, prep)
    for group in (variants, fallbacks):
        for batch in _batches(group):
            # the variants are independent runs (the results, in variant order, do not depend
            # on where they run)
            for res in Mapped(run, batch, side_by_side(prob.n, len(batch))).get():
                if isinstance(res, Stuck):
                    first_stuck = first_stuck or res
                    id_stuck = id_stuck and res.kind == "events"
                elif best is None or res.makespan < best.makespan:
                    best = res
            if best is not None and best.makespan <= enough:
                return best
            if best is None and id_stuck and first_stuck is not None:
                return first_stuck
        if best is not None:
            return best
    assert first_stuck is not None
    return first_stuck


def side_by_side(ops: int, runs: int) -> int:
    """Forked workers for ``runs`` independent runs over a problem (or graph) of ``ops`` ops,
    asked for at once: from :data:`PARALLEL_OPS` ops on, one per CPU but the one this process
    runs on (it takes runs too, :class:`~staticsched._workers.Mapped`); none below it (a fork
    costs more than a run)."""
    return max(0, min(cpus(), runs) - 1) if ops >= PARALLEL_OPS else 0


def _batches(group: Sequence[Variant]) -> list[Sequence[Variant]]:
    """The variants in the batches after which the list scheduler may stop: the first
    :data:`FIRST_BATCH`, then the rest together (side by side, a pool balances their unequal
    lengths). Fixed by the group alone, not by the CPUs: the same variants run, and the same
    timetable comes out, on every machine."""
    return [b for b in (group[:FIRST_BATCH], group[FIRST_BATCH:]) if b]


def run_variant(
    prob: Problem, prep: Prep, var: Variant, given: Sequence[int] | None = None
) -> Timetable | Stuck:
    """One pass of the time-driven list scheduler.

    With ``given`` (the starts of a feasible timetable) and ``var.rule == "given"``, ops are
    ranked and memory allocated in the order of those starts: a replay that keeps the order
    and moves ops as early as the resources allow.
    """
    if prob.n == 0:
        return Timetable((), [it.static_offset for it in prob.items], 0, var.name)
    if var.rule == "given":
        assert given is not None
        # a feasible timetable's start order is topological (every edge has a duration)
        order = sorted(range(prob.n), key=lambda i: (given[i], i))
    else:
        order = prep.order(prob, var.alloc)
    return _Run(prob, prep, var, order).run()


class _Run:
    """One time-driven pass: at each event time every free pipe starts its best-ranked
    available op whose memory and event ids are there."""

    def __init__(self, prob: Problem, prep: Prep, var: Variant, order: list[int]) -> None:
        n = prob.n
        self.prob, self.prep, self.var, self.order = prob, prep, var, order
        pos = [0] * n
        for k, i in enumerate(order):
            pos[i] = k
        if var.rule in ("order", "given"):
            keys: Sequence = pos
        else:
            keys = [(-prep.tail[i], prep.off_bottleneck[i], pos[i]) for i in range(n)]
        self.by_rank = sorted(range(n), key=keys.__getitem__)
        self.rank = [0] * n
        for r, i in enumerate(self.by_rank):
            self.rank[i] = r
        self.memory = MemoryTracker(prob, prep, pos, var.in_order)
        self.trackers: list[Tracker] = [t for f in FAMILIES if (t := f.tracker(prob, prep)) is not None]
        self.links = LinkTracker(prob.links, prob.link_overhead_holds, var.patient,
                                 [x.overhead for x in prob.xfers])
        self.xfer: list[Xfer | None] = [None] * n
        for x in prob.xfers:
            self.xfer[x.op] = x
        self.rates = [0] * n
        self.start = [-1] * n
        self.npred = prep.npred[:]
        self.est = [0] * n
        self.pipe_free = [0] * len(prob.pipes)
        # the pipes free at the current cycle, and the busy ones by when they free up: a chip
        # of ~100 pipes has a few free at a time, so a start looks at those only
        self.idle: set[int] = set(range(len(prob.pipes)))
        self.busy: list[tuple[int, int]] = []
        self.avail: list[list[int]] = [[] for _ in prob.pipes]  # heaps of ranks
        self.waiting = [
            (0, self.rank[i]) for i in range(n) if self.npred[i] == 0 and not self.memory.blocked[i]
        ]
        heapq.heapify(self.waiting)
        self.done = 0
        self.makespan = 0
        #: pipes that found nothing to start at cycle ``dead_at``
        self.dead_at = -1
        self.dead: set[int] = set()

    def run(self) -> Timetable | Stuck:
        t = 0
        while self.done < self.prob.n:
            self.memory.release(t)
            for tr in self.trackers:
                tr.prune(t)
            self.links.prune(t)
            while self._start_one(t):
                pass
            if self.done == self.prob.n:
                break
            later = [x for x in self._events(t) if x > t]
            if not later:
                return self._stuck(t)
            t = min(later)
        return Timetable(self.start, self.memory.offsets, self.makespan, self.var.name,
                         self.rates if self.prob.xfers else ())

    def _start_one(self, t: int) -> bool:
        """Start the best startable op on some free pipe at ``t``; False if there is none."""
        if self.dead_at != t:
            self.dead_at, self.dead = t, set()
        while self.waiting and self.waiting[0][0] <= t:
            _, r = heapq.heappop(self.waiting)
            p = self.prob.pipe_of[self.by_rank[r]]
            heapq.heappush(self.avail[p], r)
            self.dead.discard(p)
        while self.busy and self.busy[0][0] <= t:
            self.idle.add(heapq.heappop(self.busy)[1])
        avail = self.avail
        free = sorted((avail[p][0], p) for p in self.idle if avail[p] and p not in self.dead)
        for _, p in free:
            heap, skipped = self.avail[p], []
            limit = SCAN_LIMIT
            try:
                while heap and len(skipped) < limit:
                    r = heapq.heappop(heap)
                    i = self.by_rank[r]
                    x = self.xfer[i]
                    rate = self.links.rate(x, t) if x is not None else 0
                    if x is not None and not rate:
                        skipped.append(r)  # its links lack bandwidth now
                        # the pipe's other transfers mostly share its links: look a little
                        # further only (a chip of ready transfers would be rescanned per event)
                        limit = min(limit, len(skipped) + STARVED_SCAN)
                        continue
                    dur = x.cycles(rate) if x is not None else self.prob.dur[i]
                    # the trackers before memory: both are pure checks, and an op a full pool
                    # refuses is retried at every event, where placing it first cost the most
                    if any(tr.refuses(i, t + dur, self.start) for tr in self.trackers):
                        skipped.append(r)
                        continue
                    placed = self.memory.place(i)
                    if isinstance(placed, tuple):
                        skipped.append(r)
                        continue
                    self._begin(i, t, placed, dur, rate)
                    return True
            finally:
                for r in skipped:
                    heapq.heappush(heap, r)
            # starting other ops at ``t`` only takes memory, ids and bandwidth: this pipe stays
            # stuck at ``t`` unless new ops arrive on it
            self.dead.add(p)
        return False

    def _begin(self, i: int, t: int, placed: dict[int, list[tuple[int, int]]], dur: int, rate: int) -> None:
        end = t + dur
        x = self.xfer[i]
        if x is not None:
            self.links.take(x, t, rate)
            self.rates[i] = rate
        self.start[i] = t
        self.makespan = max(self.makespan, end)
        p = self.prob.pipe_of[i]
        self.pipe_free[p] = end
        self.idle.discard(p)
        heapq.heappush(self.busy, (end, p))
        self.done += 1
        for j in self.memory.take(i, placed, end):
            if self.npred[j] == 0 and self.start[j] < 0:
                heapq.heappush(self.waiting, (self.est[j], self.rank[j]))
        for tr in self.trackers:
            tr.begin(i, t, self.start)
        for j, lat in self.prep.succ[i]:
            self.est[j] = max(self.est[j], end + lat)
            self.npred[j] -= 1
            if self.npred[j] == 0 and not self.memory.blocked[j]:
                heapq.heappush(self.waiting, (self.est[j], self.rank[j]))

    def _events(self, t: int) -> list[int]:
        changes = (self.memory.next_change(), self.links.next_change(t),
                   *(tr.next_change() for tr in self.trackers))
        out = [x for x in changes if x is not None]
        if self.waiting:
            out.append(self.waiting[0][0])
        out.extend(self.pipe_free[p] for p, h in enumerate(self.avail) if h)
        return out

    def _stuck(self, t: int) -> Stuck:
        """Describe what blocks the first unstarted op in allocation order (it is available:
        everything before it in that order has started)."""
        m = next(i for i in self.order if self.start[i] < 0)
        name, end = self.var.name, t + self.prob.dur[m]
        found = self.memory.stuck(m, t, name)
        for tr in self.trackers:
            found = found or tr.stuck(m, end, self.start, name)
        return found or Stuck("none", m, t, rule=name)
