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

import bisect
import heapq
from collections.abc import Sequence

import attrs

from staticsched.model.hardware import round_up
from staticsched.solver.link_values import Xfer
from staticsched.solver.links import LinkTracker
from staticsched.solver.paths import tail_lengths, topo_order
from staticsched.solver.problem import Problem, Token

_ABSENT, _OPEN, _CLOSED = 1, 2, 3


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
class Stuck:
    """Why a run could not continue: the first unstarted op in allocation order and what it
    waits for. ``kind`` is ``"memory"`` (``space``, ``item``, ``holders``: items in the way) or
    ``"event"`` (``budget``, ``holders``: producers whose flag lifetime is open)."""

    kind: str
    op: int
    time: int
    space: int = -1
    item: int = -1
    budget: int = -1
    holders: tuple[int, ...] = attrs.field(converter=tuple, default=())
    rule: str = ""
    #: what CP-SAT said when asked to find any schedule: "infeasible" (proven), "unknown"
    #: (nothing within its limits) or "" (not asked: problem too large)
    proof: str = ""


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
#: tried as well when no event-id pool binds (:func:`release_order`). With binding pools it
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
#: candidates a free pipe examines per event time before it gives up until the next event
#: (keeps free allocation linear when hundreds of ready ops wait for memory)
#: ops looked at past a transfer its links cannot serve now
STARVED_SCAN = 4
SCAN_LIMIT = 64


class Prep:
    """Per-problem tables shared by all variants."""

    def __init__(self, prob: Problem) -> None:
        n = prob.n
        self.succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.npred = [0] * n
        for a, b, lat in prob.edges:
            self.succ[a].append((b, lat))
            self.npred[b] += 1
        self.new_items: list[dict[int, list[int]]] = [{} for _ in range(n)]
        self.tail_of: list[list[int]] = [[] for _ in range(n)]
        for k, it in enumerate(prob.items):
            self.new_items[it.first].setdefault(it.space, []).append(k)
            for a in it.tails:
                self.tail_of[a].append(k)
        self.produces: list[list[int]] = [[] for _ in range(n)]
        self.consumes: list[list[int]] = [[] for _ in range(n)]
        for k, tok in enumerate(prob.tokens):
            self.produces[tok.producer].append(k)
            for v in tok.consumers:
                self.consumes[v].append(k)
        self.tail = tail_lengths(prob)
        busy = [0] * len(prob.pipes)
        for i in range(n):
            busy[prob.pipe_of[i]] += prob.dur[i]
        bottleneck = max(range(len(busy)), key=lambda p: (busy[p], -p)) if busy else -1
        self.off_bottleneck = [0 if prob.pipe_of[i] == bottleneck else 1 for i in range(n)]
        self.orders: dict[str, list[int]] = {}

    def order(self, prob: Problem, name: str) -> list[int]:
        if name not in self.orders:
            if name == "graph":
                order = topo_order(prob)
            elif name == "release":
                order = release_order(prob, self.order(prob, "graph"))
            else:
                order = topo_order(prob, [(-self.tail[i], self.off_bottleneck[i], i) for i in range(prob.n)])
            self.orders[name] = order
        return self.orders[name]


def release_order(prob: Problem, graph_order: Sequence[int]) -> list[int]:
    """A topological order in which every op follows its latest predecessor in
    ``graph_order``, not its own place there: an op without predecessors keeps its place, the
    others are released where the last op they wait for stands.

    A graph lists tasks one after another, so a later task's tiles stand behind every tile of
    the earlier one even when they need only its first blocks; allocating memory in graph
    order then keeps them out until the end (the unfused 4096^3 matmul -> gelu: its gelu tiles
    ran after the whole matmul, 1,117,984 cycles; released after the blocks they read,
    1,055,349 against a bound of 1,055,180)."""
    pos = [0] * prob.n
    for k, i in enumerate(graph_order):
        pos[i] = k
    preds: list[list[int]] = [[] for _ in range(prob.n)]
    for a, b, _ in prob.edges:
        preds[b].append(a)
    rel = [0] * prob.n
    for i in graph_order:
        rel[i] = max((rel[p] for p in preds[i]), default=pos[i])
    return topo_order(prob, [(rel[i], pos[i]) for i in range(prob.n)])


def list_schedule(
    prob: Problem, variants: Sequence[Variant] = VARIANTS, fallbacks: Sequence[Variant] = FALLBACKS
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

    Returns
    -------
    Timetable or Stuck
        The shortest timetable (ties keep the earlier variant; it satisfies every constraint
        of the CP-SAT model, so it is a complete hint), or the first variant's description of
        where it got stuck.
    """
    prep = Prep(prob)
    best: Timetable | None = None
    first_stuck: Stuck | None = None
    if variants is VARIANTS:
        extra = (*RELEASE_VARIANTS, *(LINK_VARIANTS if prob.xfers else ()))
        if any(b.binding for b in prob.budgets):
            extra = tuple(v for v in extra if v.alloc != "release")
        variants = (*variants, *extra)
    for group in (variants, fallbacks):
        for var in group:
            res = run_variant(prob, prep, var)
            if isinstance(res, Stuck):
                first_stuck = first_stuck or res
            elif best is None or res.makespan < best.makespan:
                best = res
        if best is not None:
            return best
    assert first_stuck is not None
    return first_stuck


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


class _Memory:
    """Addresses of the items in binding spaces while the schedule is built.

    An item takes its bytes when its first access starts and gives them back ``hold`` cycles
    after its last tail access ends. With in-order allocation each space hands out bytes in
    the order of ``pos`` only; ``blocked[i]`` counts the spaces where op ``i`` must still wait
    for its turn.
    """

    def __init__(self, prob: Problem, prep: Prep, pos: list[int], in_order: bool) -> None:
        self.prob, self.prep, self.in_order = prob, prep, in_order
        spaces, items = prob.spaces, prob.items
        self.queue: list[list[int]] = [[] for _ in spaces]
        for k, it in enumerate(items):
            if spaces[it.space].binding:
                self.queue[it.space].append(k)
        for q in self.queue:
            q.sort(key=lambda k: (pos[items[k].first], k))
        self.head = [0] * len(spaces)
        self.blocked = [0] * prob.n
        for i in range(prob.n if in_order else 0):
            for s in prep.new_items[i]:
                if spaces[s].binding and items[self.queue[s][0]].first != i:
                    self.blocked[i] += 1
        self.occupied: list[list[tuple[int, int, int]]] = [[] for _ in spaces]  # (lo, hi, item)
        self.offsets = [it.static_offset for it in items]
        self.tails_left = [len(it.tails) for it in items]
        self.tail_end = [0] * len(items)
        self.frees: list[tuple[int, int]] = []  # (time the bytes are free again, item)

    def place(self, i: int) -> dict[int, list[tuple[int, int]]] | tuple[int, int]:
        """Offsets for op ``i``'s new items now, or the (space, item) that does not fit."""
        out: dict[int, list[tuple[int, int]]] = {}
        for s, ks in self.prep.new_items[i].items():
            sp = self.prob.spaces[s]
            if not sp.binding:
                continue
            blocks = list(self.occupied[s])
            got = []
            for k in ks:
                it = self.prob.items[k]
                o = _place(blocks, it.footprint, it.bytes, sp.alignment, sp.limit, sp.capacity, sp.slot)
                if o < 0:
                    return (s, k)
                _insert(blocks, (o, o + it.footprint, k))
                got.append((k, o))
            out[s] = got
        return out

    def take(self, i: int, placed: dict[int, list[tuple[int, int]]], end: int) -> list[int]:
        """Op ``i`` starts with ``placed`` and ends at ``end``; return the ops whose turn came."""
        items = self.prob.items
        for s, got in placed.items():
            for k, o in got:
                self.offsets[k] = o
                _insert(self.occupied[s], (o, o + items[k].footprint, k))
        turned = []
        for s, ks in self.prep.new_items[i].items():
            if not self.prob.spaces[s].binding or not self.in_order:
                continue
            self.head[s] += len(ks)
            if self.head[s] < len(self.queue[s]):
                j = items[self.queue[s][self.head[s]]].first
                self.blocked[j] -= 1
                if self.blocked[j] == 0:
                    turned.append(j)
        for k in self.prep.tail_of[i]:
            self.tails_left[k] -= 1
            self.tail_end[k] = max(self.tail_end[k], end)
            if self.tails_left[k] == 0 and self.prob.spaces[items[k].space].binding:
                heapq.heappush(self.frees, (self.tail_end[k] + self.prob.reuse_gap, k))
        return turned

    def release(self, t: int) -> None:
        """Give back the bytes of items whose hold ended by ``t``."""
        while self.frees and self.frees[0][0] <= t:
            _, k = heapq.heappop(self.frees)
            s = self.prob.items[k].space
            self.occupied[s] = [b for b in self.occupied[s] if b[2] != k]

    def next_change(self) -> int | None:
        return self.frees[0][0] if self.frees else None


class _Flags:
    """Flag lifetimes (tokens) of binding event-id pools while the schedule is built.

    A token opens when its producer starts (its lifetime begins at the producer's end) if the
    producer runs after all rivals of some trigger, and closes when the first consumer starts.
    """

    def __init__(self, prob: Problem, prep: Prep) -> None:
        self.prob, self.prep = prob, prep
        self.state = [0] * len(prob.tokens)
        self.open_count = [0] * len(prob.budgets)
        self.closed_ends: list[list[int]] = [[] for _ in prob.budgets]
        # only binding pools constrain anything; their closed lifetimes' ends, soonest first
        self.binding = [b.binding for b in prob.budgets]
        self.ends: list[tuple[int, int]] = []  # (end, budget) heap

    def full(self, i: int, end: int, start: list[int]) -> int:
        """-1 if op ``i`` may open its lifetimes, which begin at ``end``; else the full pool."""
        need: dict[int, int] = {}
        for k in self.prep.produces[i]:
            tok = self.prob.tokens[k]
            if self.prob.budgets[tok.budget].binding and _present(tok, start):
                need[tok.budget] = need.get(tok.budget, 0) + 1
        for b, c in need.items():
            live = self.open_count[b] + sum(1 for e in self.closed_ends[b] if e > end)
            if live + c > self.prob.budgets[b].capacity:
                return b
        return -1

    def begin(self, i: int, t: int, start: list[int]) -> None:
        """Op ``i`` starts at ``t`` (``start[i]`` already set): open and close lifetimes."""
        for k in self.prep.produces[i]:
            tok = self.prob.tokens[k]
            if _present(tok, start):
                self.state[k] = _OPEN
                self.open_count[tok.budget] += 1
            else:
                self.state[k] = _ABSENT
        for k in self.prep.consumes[i]:
            if self.state[k] == _OPEN:
                tok = self.prob.tokens[k]
                self.state[k] = _CLOSED
                self.open_count[tok.budget] -= 1
                if self.binding[tok.budget]:
                    e = tok.end(t)
                    self.closed_ends[tok.budget].append(e)
                    heapq.heappush(self.ends, (e, tok.budget))

    def prune(self, t: int) -> None:
        dirty = set()
        while self.ends and self.ends[0][0] <= t:
            dirty.add(heapq.heappop(self.ends)[1])
        for b in dirty:
            self.closed_ends[b] = [e for e in self.closed_ends[b] if e > t]

    def next_change(self) -> int | None:
        return self.ends[0][0] if self.ends else None

    def holders(self, b: int) -> tuple[int, ...]:
        """Producers whose lifetimes in pool ``b`` are open."""
        return tuple(
            tok.producer
            for k, tok in enumerate(self.prob.tokens)
            if tok.budget == b and self.state[k] == _OPEN
        )


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
        self.memory = _Memory(prob, prep, pos, var.in_order)
        self.flags = _Flags(prob, prep)
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
            self.flags.prune(t)
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
        free = sorted((h[0], p) for p, h in enumerate(self.avail)
                      if h and self.pipe_free[p] <= t and p not in self.dead)
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
                    placed = self.memory.place(i)
                    if isinstance(placed, tuple):
                        skipped.append(r)
                        continue
                    dur = x.cycles(rate) if x is not None else self.prob.dur[i]
                    if self.flags.full(i, t + dur, self.start) >= 0:
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
        self.pipe_free[self.prob.pipe_of[i]] = end
        self.done += 1
        for j in self.memory.take(i, placed, end):
            if self.npred[j] == 0 and self.start[j] < 0:
                heapq.heappush(self.waiting, (self.est[j], self.rank[j]))
        self.flags.begin(i, t, self.start)
        for j, lat in self.prep.succ[i]:
            self.est[j] = max(self.est[j], end + lat)
            self.npred[j] -= 1
            if self.npred[j] == 0 and not self.memory.blocked[j]:
                heapq.heappush(self.waiting, (self.est[j], self.rank[j]))

    def _events(self, t: int) -> list[int]:
        changes = (self.memory.next_change(), self.flags.next_change(), self.links.next_change(t))
        out = [x for x in changes if x is not None]
        if self.waiting:
            out.append(self.waiting[0][0])
        out.extend(self.pipe_free[p] for p, h in enumerate(self.avail) if h)
        return out

    def _stuck(self, t: int) -> Stuck:
        """Describe what blocks the first unstarted op in allocation order (it is available:
        everything before it in that order has started)."""
        m = next(i for i in self.order if self.start[i] < 0)
        name = self.var.name
        placed = self.memory.place(m)
        if isinstance(placed, tuple):
            s, k = placed
            holders = tuple(b[2] for b in self.memory.occupied[s])
            return Stuck("memory", m, t, space=s, item=k, holders=holders, rule=name)
        b = self.flags.full(m, t + self.prob.dur[m], self.start)
        return Stuck("event", m, t, budget=b, holders=self.flags.holders(b) if b >= 0 else (), rule=name)


def _present(tok: Token, start: list[int]) -> bool:
    """The producer (starting now) runs after all rivals of at least one trigger."""
    return any(all(start[r] >= 0 for r in rv) for rv in tok.triggers)


def _place(
    blocks: list[tuple[int, int, int]],
    foot: int,
    nbytes: int,
    align: int,
    limit: int,
    capacity: int,
    slot: int,
) -> int:
    """Where ``foot`` bytes go among the occupied ``blocks`` (sorted); -1 if nowhere.

    Uniform spaces (``slot > 0``): the lowest free slot below ``limit``. Mixed ones: best fit,
    the smallest aligned gap that holds the item (``offset + nbytes <= capacity`` at the top),
    lowest offset on ties -- it keeps large gaps whole for large items.
    """
    o = 0
    if slot:
        for b0, b1, _ in blocks:
            if o + foot <= b0:
                break
            o = max(o, b1)
        return o if o + foot <= limit else -1
    best, best_gap = -1, None
    for b0, b1, _ in [*blocks, (capacity, capacity, -1)]:
        top = b0 if b0 < capacity else capacity
        fits = o + (foot if b0 < capacity else nbytes) <= top
        if fits and (best_gap is None or top - o < best_gap):
            best, best_gap = o, top - o
        o = max(o, round_up(b1, align))
    return best


def _insert(blocks: list[tuple[int, int, int]], blk: tuple[int, int, int]) -> None:
    """Insert into a list kept sorted (bisect.insort on tuples)."""
    bisect.insort(blocks, blk)
