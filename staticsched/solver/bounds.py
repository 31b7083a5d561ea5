"""Lower bounds on the makespan of a problem.

* **Critical path**: the longest chain of durations and edge latencies.

and each resource family's (:mod:`staticsched.solver.families`):

* **Pipe bound**, per (core, unit): no op of the pipe can start before the shortest head
  (longest path from the sources to it) among them, the pipe then runs its ops one at a time,
  and after the last one at least the shortest tail (longest path from its end) remains:
  ``min head + sum of durations + min tail``.

* **Link bound**, per shared link: the link must move every byte of its transfers at its
  bandwidth, each after its head plus overhead and before its tail (Jackson's preemptive
  schedule, :func:`~.links.link_bound`).

The bound is the maximum of these; they ignore memory and event ids, and transfers move no
faster than at their paths' full rates, so they hold for every feasible schedule.
"""

from __future__ import annotations

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.links import Transfer
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.links import link_bound, transfers_of
from staticsched.solver.link_values import LinkSpec, Xfer
from staticsched.solver.paths import head_lengths, tail_lengths
from staticsched.solver.problem import Problem, ProblemMap


@attrs.frozen
class Bound:
    """A lower bound and where it comes from (``"critical_path"``, or a family's source such as
    ``"pipe core:unit"`` or ``"link NAME"``), with the critical path and every family's bound."""

    value: int
    source: str
    critical_path: int
    #: ``(source, value)`` of every family's bounds, in family order
    family_bounds: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)


def lower_bound(prob: Problem, core_names: tuple[int, ...] | None = None) -> Bound:
    """The best of the critical-path bound and every resource family's bounds of ``prob``.

    Parameters
    ----------
    prob
        The problem.
    core_names
        Absolute core numbers of the problem's relative cores, for the source label.

    Returns
    -------
    Bound
        The value, which bound gave it, the critical path and every family's bound.
    """
    if prob.n == 0:
        return Bound(0, "empty", 0, ())
    # an edge the program may carry faster than the schedule prices it (a barrier for a GM
    # word) counts at its least latency: the bound holds whichever the planner keeps
    prob = prob.for_bounds()
    h = head_lengths(prob)
    q = tail_lengths(prob)
    cp = max(h[i] + q[i] for i in range(prob.n))
    found = [b for family in FAMILIES for b in family.bounds(prob, h, q, core_names)]
    best_value, best_source = cp, "critical_path"
    for source, v in found:
        if v > best_value:
            best_value, best_source = v, source
    return Bound(best_value, best_source, cp, found)


def chip_lower_bound(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    transfers: dict[int, Transfer] | None = None,
) -> tuple[int, str, list[tuple[str, int]]]:
    """A lower bound of the user's problem (never of a restricted one): the best of every
    core group's own bound (pipes, critical path) and, per shared link, the bytes all cores
    move on it at its whole bandwidth between their heads and tails (:func:`.links.
    link_bound`). Returns the value, what gives it, and every link's bound. ``transfers`` is
    :func:`.links.transfers_of` when the caller has it."""
    best, source = 0, ""
    if transfers is None:
        transfers = transfers_of(graph, hw) if hw.links else {}
    head: dict[int, int] = {}
    after: dict[int, int] = {}
    # identical cores (equal problems) have one bound and one set of path lengths
    seen: dict[Problem, tuple[int, str, list[int], list[int]]] = {}
    for prob, pmap in pairs:
        known = seen.get(prob)
        if known is None:
            b = lower_bound(prob, pmap.cores)
            bp = prob.for_bounds()
            h, q = (head_lengths(bp), tail_lengths(bp)) if transfers else ([], [])
            known = seen[prob] = (b.value, b.source, h, q)
        value, src, h, q = known
        if value > best:
            best, source = value, src
        if transfers:
            for li, gi in enumerate(pmap.ops):
                head[gi], after[gi] = h[li], q[li] - prob.dur[li]
    links = []
    if transfers:
        specs = [LinkSpec(lk.name, lk.units) for lk in hw.links]
        index = {lk.name: k for k, lk in enumerate(hw.links)}
        order = sorted(transfers)
        local = {g: k for k, g in enumerate(order)}
        xs = [Xfer(local[g], x.bytes, x.overhead, x.path_units, [index[n] for n in x.links], full=x.full)
              for g, x in ((g, transfers[g]) for g in order)]
        links = link_bound(specs, xs, [head[g] for g in order], [after[g] for g in order])
        for name, v in links:
            if v > best:
                best, source = v, f"link {name}"
    return best, source, links
