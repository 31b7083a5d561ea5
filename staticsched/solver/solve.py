"""``solve``: the solver's entry point (DESIGN §5).

Steps: split the graph into independent core groups (:mod:`.problem`); reject what no schedule
can satisfy (:mod:`.explain`); solve each *distinct* group once -- cores running the same
program share one problem -- by list scheduling and then CP-SAT (whole problem when small,
windowed LNS over the list schedule when large, see :mod:`.lns`); normalise each result to
its semi-active form (:mod:`.normalize`); and map the local solutions back onto the graph.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import attrs

from staticsched._workers import Mapped
from staticsched.errors import InputError
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.schedule import OpTime, Placement, Schedule
from staticsched.options import LINK_POLICIES, option_problems
from staticsched.solver.bounds import chip_lower_bound
from staticsched.solver.budget import (
    STOP_DETERMINISTIC,
    STOP_OPTIMAL,
    STOP_WALL_MODE,
    STOP_WALL_MODE_OPTIMAL,
    STOP_WALL_NET,
    safety_net,
)
from staticsched.solver.coupled import OWN_SEARCH, coupled_start, fits_links
from staticsched.solver.decompose import build_problems
from staticsched.solver.explain import precheck
from staticsched.solver.families.links import transfers_of
from staticsched.solver.fluid_replay import replayed_makespan
from staticsched.solver.linkplan import LinkPlan, plan_links
from staticsched.solver.list_sched import Timetable, side_by_side
from staticsched.solver.problem import Problem, ProblemMap, relax_event_budgets
from staticsched.solver.runners import Run, assembled_makespan, solve_pairs
from staticsched.solver.subproblem import HOLDS, RANK, SubResult

#: how far above its plan a flags program's replay may run before the coupled-link start prefers
#: a candidate that keeps its plan (issue 21: a program is never slower than its timetable)
PLAN_SLACK = 0.005


def solve(
    graph: OpGraph,
    hw: Hardware,
    *,
    method: str = "cpsat",
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    time_mode: str = "deterministic",
    progress: Callable[[str], None] | None = None,
    event_budgets: bool = True,
    link_policy: str = "auto",
    gap: float = 0.0,
    on_candidates: Callable[[tuple[tuple[str, Schedule], ...]], None] | None = None,
) -> Schedule:
    """Schedule a checked OpGraph on ``hw``.

    Parameters
    ----------
    graph, hw
        The caller has already run ``graph.check(hw)``.
    method : {"cpsat", "list"}
        ``"list"``: the list scheduler alone. ``"cpsat"``: the list schedule improved by CP-SAT
        (whole model, windowed LNS or both, chosen by size and shape: :mod:`.portfolio`).
    time_limit : float
        Seconds granted to the *search* (CP-SAT and LNS, model building included; splitting
        the graph, list schedules and assembly come on top). A run that does not prove
        optimality searches for most of it (:data:`.budget.TARGET` of it on the calibration
        machine) and never longer.
    seed : int
        CP-SAT's random seed.
    workers : int
        Worker threads for CP-SAT on each problem (its deterministic interleaved portfolio)
        and, when the graph splits into several distinct problems, processes solving them side
        by side (``workers`` split between them).
    time_mode : {"deterministic", "wall"}
        ``"deterministic"``: the search is bounded by deterministic work calibrated to the
        time limit (:mod:`.budget`), so the same input, seed and workers give the same
        schedule; the wall clock only stops a search that overruns ``time_limit`` (a loaded
        machine), and then ``stop_reason`` says ``not reproducible``. ``"wall"``: search until
        the wall clock says stop, with CP-SAT's non-deterministic parallel search when
        ``workers > 1``; ``stop_reason`` always says ``not reproducible``.
    progress : callable, optional
        Called with one line per improvement (best makespan, bound, elapsed).
    event_budgets : bool
        Keep flag lifetimes within the event-id budgets. False for a program without flags
        (timed mode), where the budgets constrain nothing; then also a shared link's order is
        kept by exact cycles, so a transfer holds its rate only from the end of its overhead
        (with flags, from its start: flags release it when another transfer ends).
    link_policy : {"auto", "split"}
        How shared links that can bind are solved (:mod:`.linkplan`): ``"auto"`` splits them
        equally when that is provably as good and solves the coupled cores as one problem
        otherwise; ``"split"`` forces the equal static split (a baseline).
    gap : float
        Stop a problem's search as soon as its incumbent is proven within this relative gap
        of its lower bound, ``(makespan - bound) / makespan <= gap`` (``stop_reason``
        ``"gap_limit"``; the list schedule alone may already be). Deterministic: the gap is
        checked against the bound before the search, at every CP-SAT solution, after each
        LNS window and between phases. 0
        (this function's default; the API's is :data:`~staticsched.options.DEFAULT_GAP`):
        search until the budget or a proof.
    on_candidates : callable, optional
        Called with the timetable returned, first, and the other candidates a coupled link
        plan compared it with (each distinct timetable once, by their replays with the links
        shared, fastest first), as ``(name, timetable)`` pairs named as the link plan's note
        names them (``""`` for the one timetable of a problem without a coupled link plan).
        A caller that builds programs can compare them as programs: the sync planner may run
        short of event ids on one and not another (the solver's flag lifetimes are a
        relaxation of the planner's order), and a baton program runs above its plan.

    Returns
    -------
    Schedule
        Semi-active timetable with ``events=()``; the sync planner adds the flags. ``status``
        is ``"optimal"`` only when the makespan is proven minimal for the graph on ``hw``; a
        proof that holds only for the solver's stricter model gives ``"feasible"`` with
        ``stop_reason`` :data:`.budget.STOP_MODEL_OPTIMAL`.

    Raises
    ------
    InfeasibleError
        With one sentence per reason no schedule exists (names and numbers).
    InputError
        For a bad ``method``, ``time_limit``, ``workers`` or ``time_mode``.
    """
    ranked = _candidates(graph, hw, method, time_limit, seed, workers, time_mode, progress, event_budgets,
                         link_policy, gap)
    if on_candidates is not None:
        on_candidates(ranked)
    return ranked[0][1]


def _candidates(graph: OpGraph, hw: Hardware, method: str, time_limit: float, seed: int, workers: int,
                time_mode: str, progress: Callable[[str], None] | None, event_budgets: bool,
                link_policy: str, gap: float) -> tuple[tuple[str, Schedule], ...]:
    """:func:`solve`'s candidates, ranked (its ``on_candidates``)."""
    _check_args(method, time_limit, seed, workers, time_mode, gap)
    if link_policy not in LINK_POLICIES:
        raise InputError(f"link_policy must be one of {', '.join(LINK_POLICIES)}, got {link_policy!r}")
    t0 = time.monotonic()
    pairs = build_problems(graph, hw, flag_slots=event_budgets)
    if not event_budgets:
        pairs = [(relax_event_budgets(prob), pmap) for prob, pmap in pairs]
    precheck(graph, hw, pairs)
    say = progress or (lambda line: None)
    transfers = transfers_of(graph, hw) if hw.links else {}
    lp = plan_links(graph, hw, pairs, policy=link_policy, overhead_holds=HOLDS,
                    transfers=transfers)
    if lp.note:
        say(f"links: {lp.note}")
    run = Run(method, time_limit, seed, workers, time_mode, gap)
    starts: list[Timetable | None] = [None] * len(lp.pairs)
    best: tuple[list[tuple[Problem, ProblemMap]], list[SubResult]] | None = None
    cands: list = []
    bound = chip_lower_bound(graph, hw, pairs, transfers)
    if lp.case == "coupled":
        lp, starts, best, pairs_to_solve, cands = coupled_start(graph, hw, pairs, lp, run, say, progress,
                                                                 event_budgets, transfers, bound[0])
        lp = attrs.evolve(lp, pairs=pairs_to_solve)
    solved_pairs, results = solve_pairs(graph, list(lp.pairs), run, say, progress, starts)
    if best is not None and event_budgets:
        # a flags program runs with the links shared by the hardware, not at the planned
        # rates: the coupled search and the cheap candidates are compared as they run
        out = [(lp.searched, _assemble(graph, hw, solved_pairs, results, run, 0.0, lp, bound))]
        out += [(name, _assemble(graph, hw, *cand, run, 0.0, lp, bound)) for name, _, cand in cands]
        # independent replays of a few seconds each on a chip: side by side in forked workers,
        # each distinct timetable once (a list-method search of the cores' own problems gives
        # back their list timetables, a candidate too)
        same = _first_alike([sch for _, sch in out])
        reps = [k for k in range(len(out)) if same[k] == k]
        replay = functools.partial(replayed_makespan, transfers=transfers)
        replayed = Mapped(replay, [out[k][1] for k in reps], side_by_side(len(graph.ops), len(reps))).get()
        got = dict(zip(reps, replayed, strict=True))
        spans = [got[k] for k in same]
        played = [(span, k, name, sch) for k, ((name, sch), span) in enumerate(zip(out, spans, strict=True))]
        kept, why = _keep(played)
        listed = ", ".join(f"{n} {m} (plan {sch.makespan})" for m, _, n, sch in played)
        head = f"{lp.note}; replayed with the links shared by the hardware: {listed}"
        say(f"links: replayed with the links shared by the hardware: {listed}; kept the {kept[2]}{why}")
        # the others, each distinct timetable once, fastest replay first: the caller may
        # compare them as programs (the sync planner can run short of ids on one only)
        others = sorted((p for p in played if same[p[1]] == p[1] and p[1] != same[kept[1]]),
                        key=lambda p: (p[0], p[1]))
        seconds = round(time.monotonic() - t0, 3)
        ranked = []
        for p in (kept, *others):
            _, _, name, sch = p
            note = f"{head}; kept the {name}{why if p is kept else ''}"
            stats = {**dict(sch.stats), "links": note, "seconds": seconds, "link_replays": listed}
            ranked.append((name, attrs.evolve(sch, stats=stats)))
        return tuple(ranked)
    if best is not None and assembled_makespan(*best) < assembled_makespan(solved_pairs, results):
        solved_pairs, results = best  # a search never ends worse than its start; kept honest
    elif best is not None and lp.searched == OWN_SEARCH and \
            not fits_links(hw, transfers, solved_pairs, results, HOLDS):
        # a timed program runs its transfers at their cycles: the cores' own searched
        # timetables must still fit the link together, or their start (which did) is kept
        solved_pairs, results = best
        say("links: the cores' own searched timetables overload the link together; kept their "
            "list schedules")
    return (("", _assemble(graph, hw, solved_pairs, results, run, time.monotonic() - t0, lp, bound)),)


def _first_alike(schedules: list[Schedule]) -> list[int]:
    """Per schedule, the index of the first one with the same op times and placements (what
    a replay reads): itself when none before it has them."""
    out: list[int] = []
    for k, sch in enumerate(schedules):
        out.append(next((j for j in range(k) if out[j] == j and schedules[j].ops == sch.ops
                         and schedules[j].items == sch.items), k))
    return out


def _keep(played: list[tuple[int, int, str, Schedule]]) -> tuple[tuple[int, int, str, Schedule], str]:
    """The candidate to keep of ``played`` (replayed makespan, index, name, schedule), and why.

    A program should run as fast as the timetable it is emitted with: the fastest candidate
    whose replay keeps within PLAN_SLACK of its own plan. A faster candidate that runs over
    its plan by ``x`` is kept instead only when it beats that one's replay by more than the
    fraction ``x`` (on a split chip the equal split's plan starves the AICs, and the coupled
    plan, 2% over, runs 24% faster); with none keeping its plan, the fastest."""
    fastest = min(played)
    keeping = [p for p in played if p[0] <= p[3].makespan * (1 + PLAN_SLACK)]
    if not keeping:
        return fastest, ""
    best = min(keeping)
    over = fastest[0] / max(1, fastest[3].makespan) - 1
    if best is fastest or fastest[0] >= best[0] * (1 - over):
        why = "" if len(keeping) == len(played) else \
            f" (the fastest whose program keeps within {PLAN_SLACK:.1%} of its plan)"
        return best, why
    return fastest, (f" (its program runs {over:.1%} over its plan, but {1 - fastest[0] / best[0]:.1%} "
                     f"faster than the fastest that keeps within {PLAN_SLACK:.1%} of its plan)")


def _check_args(method: str, time_limit: float, seed: int, workers: int, time_mode: str,
                gap: float) -> None:
    bad = option_problems(method=method, time_limit=time_limit, seed=seed, workers=workers,
                          time_mode=time_mode, gap=gap)
    if bad:
        raise InputError(bad)


def _assemble(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    results: list[SubResult],
    run: Run,
    seconds: float,
    lp: LinkPlan,
    chip_bound: tuple[int, str, list[tuple[str, int]]],
) -> Schedule:
    method = run.method
    n = len(graph.ops)
    start = [0] * n
    dur = [op.duration for op in graph.ops]
    rate = [0] * n
    offset: dict[int, int] = {}
    for (_, pmap), res in zip(pairs, results, strict=True):
        for li, gi in enumerate(pmap.ops):
            start[gi] = res.starts[li]
            if res.durs:
                dur[gi] = res.durs[li]
            if res.rates:
                rate[gi] = res.rates[li]
        for lk, gk in enumerate(pmap.items):
            offset[gk] = res.offsets[lk]
    ops = [
        OpTime(op.id, op.core, op.unit, start[i], start[i] + dur[i], rate[i])
        for i, op in enumerate(graph.ops)
    ]
    acc = graph.accesses
    items = []
    for k, it in enumerate(graph.items):
        uses = acc.get(it.name, ())
        if uses:
            core = graph.ops[uses[0][0]].core
            live = (min(start[i] for i, _ in uses), max(start[i] + dur[i] for i, _ in uses))
        else:
            core, live = 0, (0, 0)
        items.append(Placement(it.name, core, it.space, offset.get(k, 0), it.bytes, *live))
    distinct = list({id(r): r for r in results}.values())
    makespan = max((o.end for o in ops), default=0)
    lower, source, link_bounds = chip_bound
    deciding = [r for r in distinct if r.makespan == makespan]
    if makespan <= lower:
        status = "optimal"
    else:
        status = max((r.status for r in deciding), key=RANK.__getitem__, default="heuristic")
    reasons = {r.stop_reason for r in distinct}
    if STOP_WALL_MODE in reasons:
        # wall-clock mode: even a proven makespan may come with another timetable next time
        stop = STOP_WALL_MODE_OPTIMAL if status == "optimal" else STOP_WALL_MODE
    elif status == "optimal":
        stop = STOP_OPTIMAL
    elif STOP_WALL_NET in reasons:
        stop = STOP_WALL_NET
    elif method == "list":
        stop = "list"
    else:
        # what ended the search of the problems that decide the makespan
        deciding_reasons = sorted({r.stop_reason for r in deciding} - {STOP_OPTIMAL})
        stop = deciding_reasons[0] if deciding_reasons else STOP_DETERMINISTIC
    cp = [r.cpsat_makespan for r in distinct if r.cpsat_makespan >= 0]
    stats = {
        "ops": n,
        "items": len(graph.items),
        "core_groups": len(pairs),
        "distinct_problems": len(distinct),
        "list_makespan": max((r.list_makespan for r in distinct), default=0),
        "cpsat_makespan": max(cp) if len(cp) == len(distinct) and cp else -1,
        "lower_bound_source": source,
        "link_bounds": "; ".join(f"{name} {v}" for name, v in link_bounds),
        "links": lp.note,
        "event_budgets_relaxed": sum(1 for r in distinct if r.relaxed),
        # the bound is for this OpGraph, i.e. for the tiling its lowering chose
        "lower_bound_scope": "this op graph (the tiling chosen when lowering)",
        "model_exact": all(r.exact for r in distinct),
        "search_seconds": round(sum(r.search_seconds for r in distinct), 3),
        # how far the deterministic budget got (calibrated seconds of the time limit)
        "budget_spent": round(sum(r.spent for r in distinct), 3),
        "time_limit": run.time_limit,
        "safety_net": run.time_limit if run.time_mode == "wall" else safety_net(run.time_limit),
        "safety_net_fired": stop == STOP_WALL_NET,
        "det_time": round(sum(r.det_time for r in distinct), 3),
        "seconds": round(seconds, 3),
    }
    return Schedule(
        graph=graph,
        hw=hw,
        ops=ops,
        items=items,
        events=(),
        makespan=makespan,
        lower_bound=lower,
        status=status,
        method=method,
        stop_reason=stop,
        stats=stats,
    )
