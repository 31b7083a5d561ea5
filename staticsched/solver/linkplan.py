"""How the solver treats the chip's shared links: which case applies, and the problems it
implies.

* **Not binding.** Every core's transfers on a link, all at their full rates at once (one per
  pipe), fit its bandwidth: the link constrains nothing and the cores stay independent
  problems (identical cores solved once), as without links.
* **Equal split.** Each core using a binding link gets ``bandwidth // cores`` of it as a
  private link. When no core can ask for more than its share (its pipes at full rate fit it),
  the split constrains no core: each core's schedule is as good as its schedule without the
  link, which no sharing could beat -- the split is provably as good, and as cheap as today.
* **Coupled.** Otherwise the cores sharing the link are one problem with the whole bandwidth,
  solved as a whole within the time limit. Cheap candidates are solved first -- the cores as
  if the link were not there (kept when their timetable happens to fit it), the equal split,
  and the split weighted by each core's bytes on the link -- and the best seeds the chip's
  search, so the coupled result is never worse than any of them.

``policy`` ``"split"`` forces the equal split (a baseline to compare against); ``"auto"``
chooses as above.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from staticsched.model.graphs import DisjointSets
from staticsched.model.hardware import Hardware
from staticsched.model.links import Transfer, rate_text
from staticsched.model.opgraph import OpGraph
from staticsched.solver.decompose import build_problems
from staticsched.solver.families.links import LinkDemand, attach_links, link_demands, transfers_of
from staticsched.solver.problem import Problem, ProblemMap, relax_event_budgets, shared_problems

Pair = tuple[Problem, ProblemMap]


@attrs.frozen
class LinkPlan:
    """The case that applies (``"none"``, ``"not binding"``, ``"equal split"`` or
    ``"coupled"``), a sentence for the summary, the problems to solve, and -- coupled -- the
    static splits whose solutions are candidates and seed the chip's search: ``(name,
    problems)``, the equal split and (unequal demand) the split weighted by each core's bytes."""

    case: str
    note: str
    pairs: tuple[Pair, ...] = attrs.field(converter=tuple)
    splits: tuple[tuple[str, tuple[Pair, ...]], ...] = attrs.field(converter=tuple, default=())
    #: coupled: the binding links, whose cores :func:`coupled_pairs` joins into one problem
    #: (built only when the chip's search is chosen: on 16 cores that takes seconds)
    binding: tuple[LinkDemand, ...] = attrs.field(converter=tuple, default=())
    #: coupled: what the search solves, as the replays name it: the chip's problem, or the
    #: cores' own problems when their own timetables fit the link (:mod:`.coupled`)
    searched: str = "coupled search"


def _demand_text(d: LinkDemand) -> str:
    return (f"{d.name}: up to {rate_text(d.peak):g} B/cycle from {len(d.cores)} cores on "
            f"{rate_text(d.units):g}")


def plan_links(
    graph: OpGraph,
    hw: Hardware,
    pairs: Sequence[Pair],
    *,
    policy: str = "auto",
    overhead_holds: bool = True,
    transfers: dict[int, Transfer] | None = None,
) -> LinkPlan:
    """Decide the case and build its problems.

    Parameters
    ----------
    pairs
        The problems without links (core groups joined by cross-core edges).
    policy
        ``"auto"`` or ``"split"`` (see the module docstring).
    overhead_holds
        Whether transfers hold their rate from their start (flags mode) or from the end of
        their overhead (timed mode): ``Problem.link_overhead_holds``.
    transfers
        :func:`.links.transfers_of` of ``graph`` on ``hw`` when the caller has it already.

    A coupled plan's ``pairs`` are the problems as given: :func:`coupled_pairs` builds the
    chip's problems when they are needed.
    """
    if not hw.links:
        return LinkPlan("none", "", pairs)
    if transfers is None:
        transfers = transfers_of(graph, hw)
    demands = link_demands(graph, hw, transfers)
    binding = [d for d in demands if d.binding]
    if not binding:
        used = [d for d in demands if d.per_core]
        note = "not binding (" + "; ".join(_demand_text(d) for d in used) + ")" if used else \
            "not used by any transfer"
        return LinkPlan("not binding", note, pairs)
    linked = {c for d in binding for c in d.cores}
    touched = [k for k, (_, pmap) in enumerate(pairs) if linked.intersection(pmap.cores)]
    equal = _split(graph, pairs, touched, binding, transfers, overhead_holds, weighted=False)
    shares = "; ".join(f"{d.name} {rate_text(d.units // len(d.cores)):g} B/cycle per core"
                       for d in binding)
    provable = all(u <= d.units // len(d.cores) for d in binding for _, u in d.per_core)
    if provable:
        # no core can ask for more than its share: the shares constrain nothing, the cores
        # stay as independent as without the link
        return LinkPlan("equal split", f"equal static split ({shares}) is provably as good: no core "
                        "can use more than its share", pairs)
    if policy == "split":
        return LinkPlan("equal split", f"equal static split ({shares}), forced", equal)
    splits = [("equal split", tuple(equal))]
    weighted = _split(graph, pairs, touched, binding, transfers, overhead_holds, weighted=True)
    if weighted != equal:
        splits.append(("weighted split", tuple(weighted)))
    coupled = ", ".join(f"{len(c)} cores" for c in _components(binding))
    note = ("coupled: " + "; ".join(_demand_text(d) for d in binding) + f"; solved as one problem "
            f"({coupled}) from the best of the cores' own timetables and static splits")
    return LinkPlan("coupled", note, pairs, splits, binding)


def coupled_pairs(
    graph: OpGraph,
    hw: Hardware,
    lp: LinkPlan,
    transfers: dict[int, Transfer],
    overhead_holds: bool,
    flags: bool = True,
) -> list[Pair]:
    """The chip's problems of a coupled plan: the cores of each group of binding links that
    share cores become one problem holding the whole bandwidth. Without ``flags`` (a timed
    program) the problems have no event-id budgets and no flag slots
    (:func:`~.decompose.build_problems`)."""
    linked = {c for d in lp.binding for c in d.cores}
    merged = build_problems(graph, hw, _components(lp.binding), flag_slots=flags)
    if not flags:
        merged = [(relax_event_budgets(p), m) for p, m in merged]
    full = {d.name: d.units for d in lp.binding}
    out = []
    for prob, pmap in merged:
        if linked.intersection(pmap.cores):
            prob = attach_links(prob, pmap.ops, transfers, full, overhead_holds)
        out.append((prob, pmap))
    return out


def _split(
    graph: OpGraph,
    pairs: Sequence[Pair],
    touched: Sequence[int],
    binding: Sequence[LinkDemand],
    transfers: dict[int, Transfer],
    overhead_holds: bool,
    weighted: bool,
) -> list[Pair]:
    """``pairs`` with each core of the touched groups given a private share of every binding
    link (a link of its own, named ``LINK@core``): equal, or in proportion to the bytes its
    transfers move on the link (floored, so the shares add up to at most the link; equal when
    a core's share would floor to nothing). Cores of one group (joined by cross-core edges)
    get shares of their own too, so the split holds inside a group as well."""
    core_of = {g: graph.ops[g].core for g in transfers}
    shares: dict[str, dict[int, int]] = {}
    for d in binding:
        moved: dict[int, int] = {}
        for g, x in transfers.items():
            if d.name in x.links:
                moved[core_of[g]] = moved.get(core_of[g], 0) + x.bytes
        total = sum(moved.values())
        prop = {c: d.units * b // total for c, b in moved.items()} if total else {}
        use_prop = weighted and total and all(prop.values())
        shares[d.name] = prop if use_prop else {c: d.units // len(d.cores) for c in moved}
    names = {d.name for d in binding}
    out = list(pairs)
    for k in touched:
        prob, pmap = pairs[k]

        def share(n: str, c: int, cores: tuple[int, ...] = tuple(pmap.cores)) -> str:
            # named by the core's place in its group, not its number: identical groups (a
            # split chip's clusters) stay one problem, as identical cores do
            return f"{n} share" if len(cores) == 1 else f"{n} share of the group's core {cores.index(c)}"

        # a chip's transfers are a few shared objects (one per op shape): each is renamed once
        # per core of the group
        renamed: dict[tuple[int, int], Transfer] = {}
        mine = {}
        for g in pmap.ops:
            x = transfers.get(g)
            if x is None:
                continue
            key = (id(x), core_of[g])
            y = renamed.get(key)
            if y is None:
                y = renamed[key] = attrs.evolve(x, links=tuple(
                    share(n, core_of[g]) if n in names else n for n in x.links))
            mine[g] = y
        units = {share(n, c): u for n, per in shares.items() for c, u in per.items() if c in pmap.cores}
        out[k] = (attach_links(prob, pmap.ops, mine, units, overhead_holds), pmap)
    return shared_problems(out)


def _components(binding: Sequence[LinkDemand]) -> list[tuple[int, ...]]:
    """Sets of cores joined by sharing a binding link."""
    sets = DisjointSets(sorted({c for d in binding for c in d.cores}))
    for d in binding:
        for a in d.cores[1:]:
            sets.union(d.cores[0], a)
    return sets.groups()
