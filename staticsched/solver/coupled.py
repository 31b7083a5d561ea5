"""The coupled-link start: when cores share a binding link, the candidates (the coupled
search, an equal and a weighted static split) are solved and compared by how their programs
run (:mod:`.fluid_replay`)."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.links import Transfer, peak_usage
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families.links import fix_rates
from staticsched.solver.linkplan import LinkPlan, coupled_pairs
from staticsched.solver.list_sched import Timetable
from staticsched.solver.problem import Problem, ProblemMap
from staticsched.solver.runners import Run, assembled_makespan, solve_pairs
from staticsched.solver.subproblem import HOLDS, SubResult


def coupled_start(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    lp: LinkPlan,
    run: Run,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
    event_budgets: bool,
    transfers: dict[int, Transfer],
    bound: int = 0,
):
    """List-schedule the cheap candidates of a coupled plan -- the cores as if the link were
    not there (kept when their timetable happens to fit it) and the static splits -- and
    decide what to search: when a split is as short as the cores' own timetables, the link
    costs nothing and the split's problems (identical cores solved once) get the whole time;
    when the cores' own timetables fit the link and no split is shorter, the cores' own
    problems do (identical cores once; the caller checks the result against the link, on a
    chip of at least :data:`SMALL_CHIP_OPS` ops); otherwise the chip's problem does, from the
    best candidate.

    Returns the plan (its note naming the candidates and the choice), the start timetables,
    the best candidate (pairs, results), the problems to solve and every candidate (name,
    pairs, results). Timed mode (no ``event_budgets``) drops the event-id budgets. A split
    within ``run.gap`` of ``bound`` (the chip's lower bound) is kept without the chip's search,
    as the gap limit stops any search."""
    quick = attrs.evolve(run, method="list")
    free = solve_pairs(graph, list(pairs), quick, say, progress)
    own = assembled_makespan(*free)
    fits = fits_links(hw, transfers, *free, overhead_holds=HOLDS)
    tried = [f"own timetables {own}" + ("" if fits else " (overload the link)")]
    cands: list[Candidate] = [("own timetables", list(pairs), free)] if fits else []
    for name, split in lp.splits:
        cand = solve_pairs(graph, list(split), quick, say, progress)
        tried.append(f"{name} {assembled_makespan(*cand)}")
        cands.append((name, list(split), cand))
    name, problems, best = _shortest(cands)
    listed = ", ".join(tried)
    say(f"links: list schedules of the candidates: {listed}")
    why = ""
    splits = [c for c in cands if c[0] != "own timetables"]
    if name != "own timetables" and assembled_makespan(*best) <= own:
        # as short as without the link: searching the chip as a whole cannot beat it by more
        # than searching each core alone would, and the split keeps identical cores one problem
        why = "as short as the cores' own timetables"
    elif run.gap > 0 and splits:
        # the best static split already within the gap limit of the chip's bound: the chip's
        # search (one problem of every core, minutes on 72 cores) could gain less than the
        # gap. A split, not the cores' own timetables: its shares keep any later search of
        # its problems within the link
        split = _shortest(splits)
        span = assembled_makespan(*split[2])
        if span - bound <= run.gap * span:
            name, problems = split[0], split[1]
            why = f"within the gap limit {run.gap:g} of the chip's lower bound {bound}"
    # the plan's first clause: "coupled: " and the binding links' demand
    demand = lp.note.split(";")[0]
    if why:
        note = (f"{name} ({demand.removeprefix('coupled: ')}): {why} (list schedules: {listed}), "
                "so each core is solved with its share")
        return attrs.evolve(lp, case=name, note=note), [None] * len(problems), None, problems, []
    if name == "own timetables" and len(graph.ops) >= SMALL_CHIP_OPS:
        # the cores' own timetables fit the link and no split is shorter: the chip's problem
        # would add the link to what the cores' own problems know, so the cores' own problems
        # are searched (identical cores once) and whether the result still fits the link is
        # checked afterwards (solve: the replays with the links shared, or in timed mode the
        # link's bandwidth, against the candidates)
        note = (f"{demand}; the cores' own timetables fit the link and no split is "
                f"shorter (list schedules: {listed}), so the cores' own problems are searched and "
                "checked against the link afterwards")
        return attrs.evolve(lp, note=note, searched=OWN_SEARCH), [None] * len(pairs), best, list(pairs), cands
    note = f"{lp.note} (list schedules: {listed}; the chip's search starts from the {name})"
    chip = coupled_pairs(graph, hw, lp, transfers, HOLDS, flags=event_budgets)
    return attrs.evolve(lp, note=note), _seeds(chip, *best, graph), best, chip, cands


#: what a coupled plan searches when the cores' own timetables fit the link (LinkPlan.searched)
OWN_SEARCH = "own search"

#: a chip of fewer ops keeps the chip's search even when the cores' own timetables fit the
#: link: its problem is built and list-scheduled in well under a second, and its search knows
#: the link (chain.json, 302 ops: 702 cycles, against 704 from the cores' own searches, whose
#: transfers meet on the link when the program runs)
SMALL_CHIP_OPS = 5_000


#: a candidate of the coupled start: its name, problems and their solutions
Candidate = tuple[str, list[tuple[Problem, ProblemMap]],
                  tuple[list[tuple[Problem, ProblemMap]], list[SubResult]]]


def _shortest(cands: list[Candidate]) -> Candidate:
    """The candidate ``(name, pairs, results)`` with the shortest assembled makespan (the
    first of equals)."""
    return min(cands, key=lambda c: assembled_makespan(*c[2]))


def _seeds(
    chip: list[tuple[Problem, ProblemMap]],
    seed_pairs: list[tuple[Problem, ProblemMap]],
    seeded: list[SubResult],
    graph: OpGraph,
) -> list[Timetable | None]:
    """Start timetables for the coupled problems from a candidate's solution (a static split,
    or the cores' own timetables when they fit the link): the same starts, addresses and
    rates, which fit the whole link (a split's shares add up to at most the link)."""
    n_ops, n_items = len(graph.ops), len(graph.items)
    start, rate, offset = [0] * n_ops, [0] * n_ops, [0] * n_items
    for (_, pmap), res in zip(seed_pairs, seeded, strict=True):
        for li, gi in enumerate(pmap.ops):
            start[gi] = res.starts[li]
            rate[gi] = res.rates[li] if res.rates else 0
        for lk, gk in enumerate(pmap.items):
            offset[gk] = res.offsets[lk]
    out: list[Timetable | None] = []
    for prob, pmap in chip:
        starts = [start[g] for g in pmap.ops]
        rates = [rate[g] for g in pmap.ops] if prob.xfers else []
        fixed = fix_rates(prob, rates)
        ends = [s + d for s, d in zip(starts, fixed.dur, strict=True)]
        out.append(Timetable(starts, [offset[g] for g in pmap.items], max(ends, default=0), "split",
                             rates))
    return out


def fits_links(
    hw: Hardware,
    transfers: dict[int, Transfer],
    pairs: list[tuple[Problem, ProblemMap]],
    results: list[SubResult],
    overhead_holds: bool,
) -> bool:
    """Whether the chip timetable of ``results`` (every transfer at its path's rate) stays
    within every link's bandwidth, transfers holding from their start (flags) or from the end
    of their overhead (timed)."""
    holds: dict[str, list[tuple[int, int, int]]] = {lk.name: [] for lk in hw.links}
    for (_, pmap), res in zip(pairs, results, strict=True):
        for li, gi in enumerate(pmap.ops):
            x = transfers.get(gi)
            if x is None:
                continue
            start = res.starts[li]
            begin = start if overhead_holds else start + x.overhead
            for name in x.links:
                holds[name].append((begin, start + x.cycles(0), x.path_units))
    return all(peak_usage(holds[lk.name])[0] <= lk.units for lk in hw.links)
