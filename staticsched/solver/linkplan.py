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
  solved as a whole within the time limit. When the cores are identical, the equal split
  (cheap) is solved first and seeds the chip's search, so the coupled result is never worse
  than the split.

``policy`` ``"split"`` forces the equal split (a baseline to compare against); ``"auto"``
chooses as above.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.links import rate_text
from staticsched.model.opgraph import OpGraph
from staticsched.solver.links import LinkDemand, attach_links, link_demands, transfers_of
from staticsched.solver.problem import Problem, ProblemMap, build_problems

Pair = tuple[Problem, ProblemMap]


@attrs.frozen
class LinkPlan:
    """The case that applies (``"none"``, ``"not binding"``, ``"equal split"`` or
    ``"coupled"``), a sentence for the summary, the problems to solve, and -- coupled with
    identical cores -- the split problems whose solution seeds the chip's search."""

    case: str
    note: str
    pairs: tuple[Pair, ...] = attrs.field(converter=tuple)
    seed: tuple[Pair, ...] = attrs.field(converter=tuple, default=())


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
    relax: object = None,
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
    relax
        A function applied to every newly built problem (timed mode drops the event-id
        budgets); None for none.
    """
    if not hw.links:
        return LinkPlan("none", "", pairs)
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
    split: list[Pair] = list(pairs)
    provable = True
    for k in touched:
        prob, pmap = pairs[k]
        units = {}
        for d in binding:
            mine = [c for c in pmap.cores if c in d.cores]
            if not mine:
                continue
            share = d.units // len(d.cores) * len(mine)
            units[d.name] = share
            peak = sum(u for c, u in d.per_core if c in mine)
            provable = provable and peak <= share
        split[k] = (attach_links(prob, pmap.ops, transfers, units, overhead_holds), pmap)
    shares = "; ".join(f"{d.name} {rate_text(d.units // len(d.cores)):g} B/cycle per core"
                       for d in binding)
    if provable:
        # no core can ask for more than its share: the shares constrain nothing, the cores
        # stay as independent as without the link
        return LinkPlan("equal split", f"equal static split ({shares}) is provably as good: no core "
                        "can use more than its share", pairs)
    if policy == "split":
        return LinkPlan("equal split", f"equal static split ({shares}), forced", split)
    # coupled: the cores of each group of binding links that share cores become one problem
    merge = _components(binding)
    merged = build_problems(graph, hw, merge)
    if relax is not None:
        merged = [(relax(p), m) for p, m in merged]
    full = {d.name: d.units for d in binding}
    out = []
    for prob, pmap in merged:
        if linked.intersection(pmap.cores):
            prob = attach_links(prob, pmap.ops, transfers, full, overhead_holds)
        out.append((prob, pmap))
    identical = len({pairs[k][0] for k in touched}) == 1
    coupled = ", ".join(f"{len(c)} cores" for c in merge)
    note = ("coupled: " + "; ".join(_demand_text(d) for d in binding) + f"; solved as one problem "
            f"({coupled})" + (f", seeded by an equal static split ({shares})" if identical else ""))
    return LinkPlan("coupled", note, out, split if identical else ())


def _components(binding: Sequence[LinkDemand]) -> list[tuple[int, ...]]:
    """Sets of cores joined by sharing a binding link."""
    parent: dict[int, int] = {}

    def find(c: int) -> int:
        parent.setdefault(c, c)
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for d in binding:
        cores = d.cores
        for c in cores:
            find(c)
        for a in cores[1:]:
            ra, rb = find(cores[0]), find(a)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for c in sorted(parent):
        groups.setdefault(find(c), []).append(c)
    return [tuple(g) for _, g in sorted(groups.items())]
