"""The link family of the solver, in a problem's index space: its model (:data:`LINKS`) and
everything else the solver does with links.

A link is a cumulative resource of ``units`` (bandwidth in rate units) held by transfers during
their data phase ``[start + overhead, end)``, each at its chosen rate. The pieces here:

* :class:`LinkTracker` -- the list scheduler's view: which rate a transfer can get if it
  starts now (the bandwidth left free from its data start on), and bookkeeping;
* :func:`~staticsched.model.links.flow_edges` (shared with emission) -- a feasible timetable's
  link usage as precedence edges;
* :func:`link_bound` -- a lower bound on the makespan from each link: a one-machine
  relaxation with heads and tails, solved exactly by Jackson's preemptive schedule.

The values a :class:`~staticsched.solver.problem.Problem` holds (:class:`LinkSpec`,
:class:`Xfer`) are in :mod:`staticsched.solver.link_values`, below the problem.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from ortools.sat.python import cp_model

from staticsched.model.hardware import RATE_DENOM, Hardware
from staticsched.model.links import Transfer, flow_edges, op_transfer, peak_usage
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families.base import Edge, Passive
from staticsched.solver.jackson import jackson_bound
from staticsched.solver.link_values import LinkSpec, Xfer
from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables

#: a transfer does not start at less than this fraction of its path's rate: it waits for
#: bandwidth instead of crawling (a crawling transfer holds its pipe for ages)
MIN_RATE_FRACTION = 8


#: hold ends a transfer looks ahead to when deciding whether to start slow now or wait
LOOKAHEAD = 8


class LinkTracker:
    """Rates held on each link while a list schedule is built (start times never decrease)."""

    def __init__(
        self,
        links: Sequence[LinkSpec],
        overhead_holds: bool,
        patient: bool = True,
        overheads: Sequence[int] = (),
    ) -> None:
        self.links = links
        self.overhead_holds = overhead_holds
        #: a transfer may wait for a hold to end when a faster start then finishes sooner
        #: (:data:`LOOKAHEAD`); an eager one takes what is free now (on a chip of many cores
        #: waiting leaves bandwidth idle, which the eager variant does not)
        self.patient = patient
        #: the transfers' overheads: a transfer whose rate is held only after its overhead
        #: may be issued that much before a hold ends, so its data follows without a gap
        self.overheads = () if overhead_holds else tuple(sorted(set(overheads) - {0}))
        #: per link: (hold start, end, units) of the transfers started so far and not over
        self.active: list[list[tuple[int, int, int]]] = [[] for _ in links]
        #: free units per (link, since) while the holds do not change (the scheduler asks for
        #: every ready transfer at every event)
        self._free: dict[tuple[int, int], int] = {}
        self._rates: dict[tuple, int] = {}

    def prune(self, t: int) -> None:
        for k, lst in enumerate(self.active):
            if lst and any(iv[1] <= t for iv in lst):
                self.active[k] = [iv for iv in lst if iv[1] > t]
                self._free.clear()
                self._rates.clear()

    def free(self, k: int, since: int) -> int:
        """Units of link ``k`` free at every cycle from ``since`` on (holds only shrink later:
        every transfer started so far holds its units already or will, none is added before)."""
        got = self._free.get((k, since))
        if got is not None:
            return got
        # the peak from ``since`` on is at ``since`` or where a later hold begins
        level, events = 0, []
        for b, e, u in self.active[k]:
            if e <= since:
                continue
            if b <= since:
                level += u
            else:
                events.append((b, u))
            events.append((e, -u))
        peak = level
        # releases before acquisitions at one cycle: holds are half-open
        for _, d in sorted(events):
            level += d
            peak = max(peak, level)
        got = self._free[(k, since)] = self.links[k].units - peak
        return got

    def rate(self, x: Xfer, t: int) -> int:
        """The rate ``x`` gets if it starts at ``t``: its fixed rate if there is room for it, or
        its path rate capped by what every link has free from its hold start on; 0 when that
        is below the minimum worth starting (or, fixed, does not fit)."""
        # many ready transfers of one shape ask at every event: one answer per shape
        key = (t, x.links, x.path_units, x.bytes, x.overhead, x.full, x.rate)
        got = self._rates.get(key)
        if got is None:
            got = self._rates[key] = self._rate(x, t)
        return got

    def _rate(self, x: Xfer, t: int) -> int:
        since = x.hold_start(t, self.overhead_holds)
        room = min((self.free(k, since) for k in x.links), default=x.path_units)
        if x.rate:
            return x.rate if room >= x.rate else 0
        r = min(x.path_units, room)
        if r == x.path_units:
            return r
        if r < max(1, x.path_units // MIN_RATE_FRACTION):
            # below the minimum: wait for holds to end, unless none will (then this is all)
            return r if r > 0 and not any(self.active[k] for k in x.links) else 0
        if not self.patient:
            return r
        # a slow start now, or a faster one when a hold ends: whichever finishes first
        end = t + x.cycles(r)
        for c in sorted({e for k in x.links for _, e, _ in self.active[k] if t < e < end})[:LOOKAHEAD]:
            since = x.hold_start(c, self.overhead_holds)
            rc = min(x.path_units, *(self.free(k, since) for k in x.links))
            if rc > r and c + x.cycles(rc) < end:
                return 0
        return r

    def take(self, x: Xfer, t: int, rate: int) -> int:
        """``x`` starts at ``t`` with ``rate``; returns its end."""
        end = t + x.cycles(rate)
        for k in x.links:
            self.active[k].append((x.hold_start(t, self.overhead_holds), end, rate))
        self._free.clear()
        self._rates.clear()
        return end

    def next_change(self, after: int) -> int | None:
        """The first cycle after ``after`` at which a transfer may get more bandwidth: a hold's
        end, or (data-phase holds) an overhead before it."""
        ends = [e for lst in self.active for _, e, _ in lst]
        if not ends:
            return None
        later = [c for e in ends for c in (e, *(e - ov for ov in self.overheads)) if c > after]
        return min(later, default=None)


def link_bound(
    links: Sequence[LinkSpec],
    xfers: Sequence[Xfer],
    heads: Sequence[int],
    tails: Sequence[int],
) -> list[tuple[str, int]]:
    """Per link, a lower bound on the makespan: the link must move every byte of its
    transfers at its bandwidth, each no earlier than its op's head plus overhead, each
    followed by its op's tail (the longest path from its end). Relaxing to one preemptive
    machine of speed ``units`` gives the bound, computed exactly by Jackson's preemptive
    schedule (serve the released job with the longest tail first).

    The schedule runs in units of ``1 / spec.units`` cycle, in which a transfer moves its
    ``bytes * RATE_DENOM`` exactly: rounding each transfer up to whole cycles would add up
    to a cycle per transfer, and transfers sharing the link at fractional rates lose nothing
    to rounding (a bound that rounded was above feasible timetables)."""
    out = []
    for k, spec in enumerate(links):
        u = spec.units
        jobs = [((heads[x.op] + x.overhead) * u, x.bytes * RATE_DENOM, tails[x.op] * u)
                for x in xfers if k in x.links]
        if not jobs:
            continue
        best = jackson_bound(jobs)
        out.append((spec.name, -(-best // u)))
    return out


def fix_rates(prob: Problem, rates: Sequence[int]) -> Problem:
    """``prob`` with every transfer's rate fixed to ``rates[op]`` (0 or no rates: the most its
    path and links allow) and its duration set to match: what CP-SAT, the windows and
    normalisation then schedule."""
    if not prob.xfers:
        return prob
    dur = list(prob.dur)
    xfers = []
    for x in prob.xfers:
        # no rate chosen: the most the path and every link of it allow
        r = rates[x.op] if rates and rates[x.op] else 0
        r = r or min(x.path_units, *(prob.links[k].units for k in x.links))
        dur[x.op] = x.cycles(r)
        xfers.append(attrs.evolve(x, rate=r))
    return attrs.evolve(prob, dur=dur, xfers=xfers)


def rates_of(prob: Problem) -> tuple[int, ...]:
    """Each op's fixed transfer rate in ``prob`` (0 for an op that is no transfer), as
    :func:`fix_rates` takes them; empty without transfers."""
    if not prob.xfers:
        return ()
    rates = [0] * prob.n
    for x in prob.xfers:
        rates[x.op] = x.rate
    return tuple(rates)


def holds_of(prob: Problem, starts: Sequence[int]) -> list[tuple[int, int, int, int, tuple[int, ...]]]:
    """``(op, hold start, end, units, links)`` of every transfer of a rate-fixed problem."""
    return [(x.op, x.hold_start(starts[x.op], prob.link_overhead_holds), starts[x.op] + prob.dur[x.op],
             x.rate, x.links) for x in prob.xfers]


def link_order_edges(prob: Problem, starts: Sequence[int]) -> list[tuple[int, int, int]]:
    """The links' resource flow of a feasible timetable (:func:`~staticsched.model.links.
    flow_edges`) as problem edges ``(a, b, latency)``: ``b`` holds no units before ``a``
    ends."""
    if not prob.xfers:
        return []
    over = {x.op: x.overhead for x in prob.xfers}
    pairs = flow_edges([lk.units for lk in prob.links], holds_of(prob, starts))
    if not prob.link_overhead_holds:
        return [(a, b, -over[b]) for a, b in pairs]

    # in flags mode the order is a flag: its latency, as for any dependency
    return [(a, b, prob.latency(a, b)) for a, b in pairs]


@attrs.frozen
class LinkDemand:
    """How hard the graph can push one link: the cores whose transfers use it and, per core,
    the most units it can hold at once (each pipe runs one transfer at a time, at most at its
    path's rate)."""

    name: str
    units: int
    per_core: tuple[tuple[int, int], ...] = attrs.field(converter=tuple)

    @property
    def cores(self) -> tuple[int, ...]:
        return tuple(c for c, _ in self.per_core)

    @property
    def peak(self) -> int:
        return sum(u for _, u in self.per_core)

    @property
    def binding(self) -> bool:
        """Whether the cores could ever ask for more than the link has."""
        return self.peak > self.units


def transfers_of(graph: OpGraph, hw: Hardware) -> dict[int, Transfer]:
    """Op index -> its transfer on ``hw``'s links (ops that cross no link are left out)."""
    out = {}
    for i, op in enumerate(graph.ops):
        x = op_transfer(op, graph, hw)
        if x is not None:
            out[i] = x
    return out


def link_demands(graph: OpGraph, hw: Hardware, transfers: dict[int, Transfer]) -> list[LinkDemand]:
    """Every link of ``hw`` with the demand ``graph`` can put on it."""
    out = []
    for lk in hw.links:
        per_pipe: dict[tuple[int, str], int] = {}
        for i, x in transfers.items():
            if lk.name in x.links:
                key = (graph.ops[i].core, graph.ops[i].unit)
                per_pipe[key] = max(per_pipe.get(key, 0), x.path_units)
        per_core: dict[int, int] = {}
        for (core, _), u in per_pipe.items():
            per_core[core] = per_core.get(core, 0) + u
        out.append(LinkDemand(lk.name, lk.units, sorted(per_core.items())))
    return out


def attach_links(
    prob: Problem,
    ops: Sequence[int],
    transfers: dict[int, Transfer],
    units: dict[str, int],
    overhead_holds: bool,
) -> Problem:
    """``prob`` (whose op ``k`` is graph op ``ops[k]``) with the links of ``units`` (name ->
    the units this problem may hold: the whole link, or a core's share) and its transfers on
    them. Links it does not use are left out."""
    names = [n for n in units if any(n in transfers[g].links for g in ops if g in transfers)]
    if not names:
        return attrs.evolve(prob, link_overhead_holds=overhead_holds)
    index = {n: k for k, n in enumerate(names)}
    xfers = []
    for k, g in enumerate(ops):
        x = transfers.get(g)
        if x is None:
            continue
        on = tuple(index[n] for n in x.links if n in index)
        if on:
            xfers.append(Xfer(k, x.bytes, x.overhead, x.path_units, on, full=x.full))
    return attrs.evolve(prob, links=[LinkSpec(n, units[n]) for n in names], xfers=xfers,
                        link_overhead_holds=overhead_holds)


class Links(Passive):
    """A link is a cumulative resource of ``units``, held by its transfers at their fixed
    rates (from their start, or from the end of their overhead when
    ``Problem.link_overhead_holds`` is off)."""

    name = "links"

    def variables(self, v: Variables) -> None:
        """None: the holds are fixed-size intervals over the ops' starts, made by
        :meth:`constrain`."""

    def constrain(self, v: Variables, whole: bool) -> None:
        # at every cycle the transfers on a link hold at most its units (rates are fixed)
        model, prob = v.model, v.prob
        for k, lk in enumerate(prob.links):
            xs = [x for x in prob.xfers if k in x.links]
            if not xs:
                continue
            ivs, demands = [], []
            for x in xs:
                off = 0 if prob.link_overhead_holds else min(x.overhead, prob.dur[x.op] - 1)
                ivs.append(model.new_fixed_size_interval_var(
                    v.start[x.op] + off, prob.dur[x.op] - off, f"link{k}_{x.op}"))
                demands.append(x.rate)
            if whole:
                ivs.append(v.after_makespan(0, f"mk_link{k}"))
                demands.append(lk.units)
            model.add_cumulative(ivs, demands, lk.units)

    def hint(self, model: cp_model.CpModel, v: Variables, starts: Sequence[int],
             offsets: Sequence[int]) -> None:
        """None: the family has no variables of its own."""

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        out = []
        for k, lk in enumerate(prob.links):
            on_link = [(b, e, u) for _, b, e, u, on in holds_of(prob, starts) if k in on]
            peak, at = peak_usage(on_link)
            if peak > lk.units:
                out.append(f"link {lk.name} holds {peak} units at {at}, has {lk.units}")
        return out

    def bounds(self, prob: Problem, heads: Sequence[int], tails: Sequence[int],
               core_names: tuple[int, ...] | None) -> list[tuple[str, int]]:
        after = [tails[i] - prob.dur[i] for i in range(prob.n)]
        return [(f"link {name}", value) for name, value in link_bound(prob.links, prob.xfers, heads, after)]

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
        return link_order_edges(prob, starts)


LINKS = Links()
