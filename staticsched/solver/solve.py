"""``solve``: the solver's entry point (DESIGN §5).

Steps: split the graph into independent core groups (:mod:`.problem`); reject what no schedule
can satisfy (:mod:`.explain`); solve each *distinct* group once -- cores running the same
program share one problem -- by list scheduling and then CP-SAT (whole problem when small,
windowed LNS over the list schedule when large, see :mod:`.lns`); normalise each result to
its semi-active form (:mod:`.normalize`); and map the local solutions back onto the graph.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import time
from collections.abc import Callable

import attrs

from staticsched.errors import InputError
from staticsched.model.hardware import Hardware
from staticsched.model.links import Transfer, peak_usage
from staticsched.model.opgraph import OpGraph
from staticsched.model.schedule import OpTime, Placement, Schedule
from staticsched.options import LINK_POLICIES, METHODS
from staticsched.solver.bounds import lower_bound
from staticsched.solver.budget import (
    STOP_DETERMINISTIC,
    STOP_MODEL_OPTIMAL,
    STOP_OPTIMAL,
    STOP_WALL_MODE,
    STOP_WALL_MODE_OPTIMAL,
    STOP_WALL_NET,
    TIME_MODES,
    Clock,
    Shape,
    det_rate,
    safety_net,
)
from staticsched.solver.cpmodel import solve_cpsat
from staticsched.solver.decompose import build_problems
from staticsched.solver.explain import explain_stuck, precheck
from staticsched.solver.feasibility import model_violations
from staticsched.solver.fluid_replay import replayed_makespan
from staticsched.solver.link_values import LinkSpec, Xfer
from staticsched.solver.linkplan import LinkPlan, coupled_pairs, plan_links
from staticsched.solver.links import fix_rates, link_bound, transfers_of
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.lns import improve_lns
from staticsched.solver.normalize import semi_active
from staticsched.solver.paths import head_lengths, tail_lengths
from staticsched.solver.portfolio import FULL_LIMIT, plan, solve_whole
from staticsched.solver.problem import Problem, ProblemMap, relax_event_budgets, relax_flag_slots

_RANK = {"optimal": 0, "feasible": 1, "heuristic": 2}
#: whether a transfer holds its rate on a link from its start rather than from the end of its
#: overhead: never -- no flag reserves bandwidth (flags programs have no link-order flags; the
#: hardware shares the links) and a timed program keeps the order by exact cycles
HOLDS = False


@attrs.frozen
class SubResult:
    """The solution of one problem (local indices), or ``stuck`` when none was found.

    ``exact`` says whether the solver's model of the problem is exactly the user's problem
    (see :func:`model_is_exact`): only then is a CP-SAT proof an optimality proof. ``spent``
    is the calibrated seconds the search used (:mod:`.budget`).
    """

    starts: tuple[int, ...] = attrs.field(converter=tuple)
    offsets: tuple[int, ...] = attrs.field(converter=tuple)
    makespan: int
    lower: int
    bound_source: str
    status: str
    stop_reason: str
    list_makespan: int
    cpsat_makespan: int = -1
    cpsat_status: str = ""
    cpsat_bound: int = -1
    stuck: Stuck | None = None
    seconds: float = 0.0
    #: the event-id budgets were dropped because the list scheduler got stuck on them
    relaxed: bool = False
    exact: bool = True
    spent: float = 0.0
    det_time: float = 0.0
    search_seconds: float = 0.0
    #: per local op: the rate a transfer on a shared link runs at (empty: no link) and every
    #: op's duration at it
    rates: tuple[int, ...] = attrs.field(converter=tuple, default=())
    durs: tuple[int, ...] = attrs.field(converter=tuple, default=())


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
    _check_args(method, time_limit, seed, workers, time_mode)
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
    run = _Run(method, time_limit, seed, workers, time_mode)
    starts: list[Timetable | None] = [None] * len(lp.pairs)
    best: tuple[list[tuple[Problem, ProblemMap]], list[SubResult]] | None = None
    cands: list = []
    if lp.case == "coupled":
        lp, starts, best, pairs_to_solve, cands = _coupled_start(graph, hw, pairs, lp, run, say, progress,
                                                                 event_budgets, transfers)
        lp = attrs.evolve(lp, pairs=pairs_to_solve)
    solved_pairs, results = _solve_pairs(graph, list(lp.pairs), run, say, progress, starts)
    bound = chip_lower_bound(graph, hw, pairs, transfers)
    if best is not None and event_budgets:
        # a flags program runs with the links shared by the hardware, not at the planned
        # rates: the coupled search and the cheap candidates are compared as they run
        out = [("coupled search", _assemble(graph, hw, solved_pairs, results, run, 0.0, lp, bound))]
        out += [(name, _assemble(graph, hw, *cand, run, 0.0, lp, bound)) for name, _, cand in cands]
        played = [(replayed_makespan(sch, transfers), k, name, sch) for k, (name, sch) in enumerate(out)]
        _, _, name, chosen = min(played)
        listed = ", ".join(f"{n} {m}" for m, _, n, _ in played)
        note = f"{lp.note}; replayed with the links shared by the hardware: {listed}; kept the {name}"
        say(f"links: {note.split('; replayed ', 1)[1]}")
        stats = {**dict(chosen.stats), "links": note, "seconds": round(time.monotonic() - t0, 3),
                 "link_replays": listed}
        return attrs.evolve(chosen, stats=stats)
    if best is not None and _assembled_makespan(*best) < _assembled_makespan(solved_pairs, results):
        solved_pairs, results = best  # a search never ends worse than its start; kept honest
    return _assemble(graph, hw, solved_pairs, results, run, time.monotonic() - t0, lp, bound)


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
            h, q = (head_lengths(prob), tail_lengths(prob)) if transfers else ([], [])
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


def _solve_pairs(
    graph: OpGraph,
    pairs: list[tuple[Problem, ProblemMap]],
    run: _Run,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
    starts: list[Timetable | None] | None = None,
) -> tuple[list[tuple[Problem, ProblemMap]], list[SubResult]]:
    """Solve every pair, each distinct problem once (identical cores share one), and return
    the pairs with one result each; an infeasible one raises with the explanation."""
    starts = starts or [None] * len(pairs)
    unique: dict[tuple[Problem, int], int] = {}
    first_of: list[int] = []
    task_of = []
    for k, (prob, _) in enumerate(pairs):
        # a pair with its own start timetable is a problem of its own
        key = (prob, k if starts[k] is not None else -1)
        if key not in unique:
            unique[key] = len(first_of)
            first_of.append(k)
        task_of.append(unique[key])
    tasks = [pairs[k][0] for k in first_of]
    task_starts = [starts[k] for k in first_of]
    labels = [_label(pairs[k][1], sum(1 for t in task_of if t == j)) for j, k in enumerate(first_of)]
    say(f"{len(graph.ops)} ops in {len(pairs)} core group(s), {len(tasks)} distinct")
    if min(run.workers, len(tasks)) > 1 and not any(task_starts):
        results = _run_parallel(tasks, labels, run, say)
    else:
        results = _run_sequential(tasks, labels, run, progress, task_starts)
    errors = []
    for j, res in enumerate(results):
        if res.stuck is not None:
            prob, pmap = pairs[first_of[j]]
            errors.extend(explain_stuck(graph, prob, pmap, res.stuck).problems)
    if errors:
        from staticsched.errors import InfeasibleError

        raise InfeasibleError(errors)
    return pairs, [results[j] for j in task_of]


def _coupled_start(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    lp: LinkPlan,
    run: _Run,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
    event_budgets: bool,
    transfers: dict[int, Transfer],
):
    """List-schedule the cheap candidates of a coupled plan -- the cores as if the link were
    not there (kept when their timetable happens to fit it) and the static splits -- and
    decide what to search: when a split is as short as the cores' own timetables, the link
    costs nothing and the split's problems (identical cores solved once) get the whole time;
    otherwise the chip's problem does, from the best candidate.

    Returns the plan (its note naming the candidates and the choice), the start timetables,
    the best candidate (pairs, results), the problems to solve and every candidate (name,
    pairs, results). Timed mode (no ``event_budgets``) drops the event-id budgets."""
    quick = attrs.evolve(run, method="list")
    free = _solve_pairs(graph, list(pairs), quick, say, progress)
    own = _assembled_makespan(*free)
    fits = _fits_links(hw, transfers, *free, overhead_holds=HOLDS)
    tried = [f"own timetables {own}" + ("" if fits else " (overload the link)")]
    cands = [("own timetables", list(pairs), free)] if fits else []
    for name, split in lp.splits:
        cand = _solve_pairs(graph, list(split), quick, say, progress)
        tried.append(f"{name} {_assembled_makespan(*cand)}")
        cands.append((name, list(split), cand))
    name, problems, best = min(cands, key=lambda c: _assembled_makespan(*c[2]))
    listed = ", ".join(tried)
    say(f"links: list schedules of the candidates: {listed}")
    if name != "own timetables" and _assembled_makespan(*best) <= own:
        # as short as without the link: searching the chip as a whole cannot beat it by more
        # than searching each core alone would, and the split keeps identical cores one problem
        demand = lp.note.split(";")[0].removeprefix("coupled: ")
        note = (f"{name} ({demand}): as short as the cores' own timetables (list schedules: "
                f"{listed}), so each core is solved with its share")
        return attrs.evolve(lp, case=name, note=note), [None] * len(problems), None, problems, []
    note = f"{lp.note} (list schedules: {listed}; the chip's search starts from the {name})"
    chip = coupled_pairs(graph, hw, lp, transfers, HOLDS, flags=event_budgets)
    return attrs.evolve(lp, note=note), _seeds(chip, *best, graph), best, chip, cands


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


def _fits_links(
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


def _assembled_makespan(pairs: list[tuple[Problem, ProblemMap]], results: list[SubResult]) -> int:
    return max((r.makespan for r in results), default=0)


@attrs.frozen
class _Run:
    """The caller's options that every problem's search shares."""

    method: str
    time_limit: float
    seed: int
    workers: int
    time_mode: str


def _run_sequential(
    tasks: list[Problem],
    labels: list[str],
    run: _Run,
    progress: Callable[[str], None] | None,
    starts: list[Timetable | None] | None = None,
) -> list[SubResult]:
    """Solve the problems one after another; each gets its share (by ops) of what the earlier
    ones left. Shares and what was left are calibrated seconds in deterministic mode (so the
    hand-over is reproducible) and wall seconds in wall-clock mode."""
    say = progress or (lambda line: None)
    # deterministic mode: the wall clock is a safety net far beyond the limit (budget.safety_net)
    wall = run.time_limit if run.time_mode == "wall" else safety_net(run.time_limit)
    left, wall_left = run.time_limit, wall
    remaining = sum(p.n for p in tasks) or 1
    results = []
    for j, prob in enumerate(tasks):
        share = left * prob.n / max(remaining, 1)
        remaining -= prob.n
        clock = Clock(run.time_mode, share, wall_left, run.workers)
        res = solve_problem(prob, run.method, clock, run.seed, labels[j], progress,
                            starts[j] if starts else None)
        results.append(res)
        left = max(0.0, left - (res.spent if clock.deterministic else res.search_seconds))
        wall_left = max(0.0, wall_left - res.search_seconds)
        say(_summary(labels[j], res))
    return results


def _check_args(method: str, time_limit: float, seed: int, workers: int, time_mode: str) -> None:
    bad = []
    if time_mode not in TIME_MODES:
        bad.append(f"time_mode must be one of {', '.join(TIME_MODES)}, got {time_mode!r}")
    if method not in METHODS:
        bad.append(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(time_limit, int | float) or not time_limit > 0:
        bad.append(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        bad.append(f"seed must be an integer, got {seed!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        bad.append(f"workers must be an integer >= 1, got {workers!r}")
    if bad:
        raise InputError(bad)


def _label(pmap: ProblemMap, copies: int) -> str:
    cores = ",".join(str(c) for c in pmap.cores)
    return f"core {cores}" + (f" (x{copies} identical)" if copies > 1 else "") + ": "


def _summary(label: str, res: SubResult) -> str:
    if res.stuck is not None:
        return f"{label}no schedule found"
    return (
        f"{label}makespan {res.makespan} ({res.status}), lower bound {res.lower}, "
        f"list {res.list_makespan}, {res.seconds:.1f} s"
    )


def model_is_exact(prob: Problem) -> bool:
    """Is the solver's model of ``prob`` exactly the user's problem, so that a CP-SAT proof is
    an optimality proof?

    Four parts of the model are stricter than the execution model and make it a restriction:
    binding event-id pools, whose flag tokens over-count the flags the sync planner keeps
    (counting every possible flag, and without the reachability refinement above
    :data:`.tokens.REACH_LIMIT` ops); transfers on shared links, whose rates are fixed; flag
    slots (a space cut to ``event_ids`` slots, :func:`~.decompose.build_problems`); and, with a
    non-zero flag latency, the gap of ``reuse_gap`` cycles between items sharing bytes, which
    a reuse on the same pipe does not need. Capacity and addresses are otherwise exact (uniform
    spaces: slots at multiples of the footprint lose nothing; mixed spaces: every aligned offset
    is a choice).
    """
    if any(b.binding for b in prob.budgets):
        return False
    if prob.xfers:
        return False  # the transfers' rates are fixed (by the list schedule): a restriction
    if any(sp.capped for sp in prob.spaces):
        return False  # fewer slots than the space holds: a restriction of the user's problem
    return not (prob.reuse_gap > 0 and any(sp.binding for sp in prob.spaces))


def solve_problem(
    prob: Problem,
    method: str,
    clock: Clock,
    seed: int,
    label: str = "",
    progress: Callable[[str], None] | None = None,
    start: Timetable | None = None,
) -> SubResult:
    """List-schedule one problem, improve it by the phases of its plan, and normalise the best.

    ``clock`` grants the search its seconds, mode, wall-clock deadline and CP-SAT workers.
    ``start``, a feasible timetable (with its transfers' rates), replaces the list schedule
    when it is shorter. Transfers on shared links get their rates from the list schedule (or
    ``start``); the search then keeps them fixed.
    """
    t0 = time.monotonic()
    shape = Shape.of(prob)
    exact = model_is_exact(prob)
    bound = lower_bound(prob)
    found = list_schedule(prob)
    if isinstance(found, Stuck) and any(sp.capped for sp in prob.spaces):
        # the flag slots left some op no room: the spaces' full capacity (the sync planner
        # then fits the ids, with credits or the baton)
        prob = relax_flag_slots(prob)
        exact = model_is_exact(prob)
        found = list_schedule(prob)
    if start is not None and (isinstance(found, Stuck) or start.makespan < found.makespan):
        found = start
    relaxed = False
    # the search starts here: the time limit bounds what follows, up to normalisation
    t_search = time.monotonic()
    clock = clock.start()
    if isinstance(found, Stuck):
        rate = det_rate(shape.family, "interleave", prob.n)
        rescued = _rescue(prob, found, bound.value, clock.det_limit(rate), clock.remaining(), seed)
        if isinstance(rescued, Stuck) and rescued.kind == "event":
            # The flag-lifetime model is stricter than the program: the sync planner can still
            # delay SETs (trading time for ids), so a schedule stuck on event ids is solved
            # without them and the planner makes the ids fit
            prob = relax_event_budgets(prob)
            relaxed = True
            rescued = list_schedule(prob)
        if isinstance(rescued, Stuck):
            return SubResult((), (), 0, bound.value, bound.source, "heuristic", "list", 0, stuck=rescued)
        found = rescued
    prob = fix_rates(prob, found.rates)
    listed = semi_active(prob, found.starts, found.offsets)
    list_ms = _makespan(prob, listed)
    best, offsets, best_ms = listed, found.offsets, list_ms
    status = "optimal" if list_ms <= bound.value else "heuristic"
    stop = STOP_OPTIMAL if status == "optimal" else "list"
    cp_ms, cp_status, cp_bound, det_used = -1, "", -1, 0.0
    if progress is not None:
        progress(f"{label}list makespan {list_ms}, lower bound {bound.value}")
    spent = 0.0
    if method == "cpsat" and status != "optimal":
        phases = plan(shape)
        left = clock.seconds
        start, stops, proven, objective = found, [], None, -1
        for k, phase in enumerate(phases):
            # a phase gets its share of what the earlier phases left
            grant = left * phase.share / sum(p.share for p in phases[k:])
            t_phase = time.monotonic()
            if phase.kind == "whole":
                cp, used = solve_whole(
                    prob, start, bound.value, clock, grant, phase.hinted, seed, progress, label
                )
                det_used += cp.det_time
                stops.append(cp.stop_reason)
                cp_status, cp_bound, objective = cp.status, cp.bound, cp.objective
                if cp.timetable is not None:
                    proven = cp.timetable if cp.status == "optimal" else None
                    if cp.timetable.makespan <= start.makespan:
                        start = cp.timetable
            else:
                lns = improve_lns(
                    prob, _left_justified(prob, start), seconds=grant, clock=clock, seed=seed,
                    progress=progress, label=label,
                )
                used = lns.spent
                stops.append(lns.stop_reason)
                start, cp_status = lns.timetable, cp_status or "feasible"
            used = used if clock.deterministic else time.monotonic() - t_phase
            spent += used
            left = max(0.0, left - used)
            if proven is not None or clock.expired():
                break
        broken = model_violations(prob, start.starts, start.offsets) if start is not found else []
        if broken:
            # a search bug: its timetable cannot be normalised; the list schedule stands
            if progress is not None:
                progress(f"{label}the search's timetable breaks the model ({broken[0]}); "
                         "kept the list schedule")
        elif start is not found:
            norm = semi_active(prob, start.starts, start.offsets)
            cp_ms = _makespan(prob, norm)
            if cp_ms <= best_ms:
                best, offsets, best_ms = norm, start.offsets, cp_ms
        # "feasible": the result went through CP-SAT (a solution or LNS windows), unproven
        status = "feasible" if start is not found or any(p.kind == "lns" for p in phases) else status
        model_optimal = proven is start and cp_ms == objective
        if best_ms <= bound.value or (model_optimal and exact):
            status, stop = "optimal", STOP_OPTIMAL
        elif model_optimal:
            status, stop = "feasible", STOP_MODEL_OPTIMAL
        else:
            stop = _worst(stops) if stops else stop
    return SubResult(
        best,
        offsets,
        best_ms,
        bound.value,
        bound.source,
        status,
        stop,
        list_ms,
        cp_ms,
        cp_status,
        cp_bound,
        seconds=time.monotonic() - t0,
        relaxed=relaxed,
        exact=exact,
        spent=spent,
        det_time=det_used,
        search_seconds=time.monotonic() - t_search,
        rates=_rates(prob),
        durs=prob.dur,
    )


def _left_justified(prob: Problem, tt: Timetable) -> Timetable:
    """``tt`` normalised (:func:`.normalize.semi_active`) when that keeps the model (flag
    lifetimes may grow), else ``tt``. LNS windows end by their old end and keep the hinted
    starts of ops that do not decide it, so windows over a timetable with needless idling
    (the list scheduler's, CP-SAT's) gain less: on examples/attention.json (one core, 5,712
    ops, 60 s) 344,756 cycles from the list timetable, 344,429 from its normalisation, list
    schedule 345,230."""
    starts = semi_active(prob, tt.starts, tt.offsets)
    if model_violations(prob, starts, tt.offsets):
        return tt
    return attrs.evolve(tt, starts=starts, makespan=_makespan(prob, starts))


def _rates(prob: Problem) -> tuple[int, ...]:
    if not prob.xfers:
        return ()
    rates = [0] * prob.n
    for x in prob.xfers:
        rates[x.op] = x.rate
    return tuple(rates)


def _worst(stops: list[str]) -> str:
    """The stop reason to report for several searches: a wall-clock stop taints the result
    (not reproducible); otherwise the last search's reason."""
    for reason in (STOP_WALL_MODE, STOP_WALL_NET):
        if reason in stops:
            return reason
    return stops[-1]


def _rescue(
    prob: Problem, stuck: Stuck, lower: int, det_limit: float, wall_limit: float, seed: int
) -> Timetable | Stuck:
    """When the list scheduler is stuck on a small problem, let CP-SAT search from scratch: it
    finds a schedule or proves that none satisfies the constraints (recorded in ``stuck``)."""
    if prob.n > FULL_LIMIT:
        return stuck
    fixed = fix_rates(prob, ())  # CP-SAT schedules transfers at fixed rates: the most allowed
    cp = solve_cpsat(fixed, None, lower, det_limit=det_limit, wall_limit=wall_limit, seed=seed)
    if cp.timetable is not None:
        return attrs.evolve(cp.timetable, rule="cpsat-rescue", rates=_rates(fixed))
    return attrs.evolve(stuck, proof="infeasible" if cp.status == "infeasible" else "unknown")


def _makespan(prob: Problem, starts: list[int] | tuple[int, ...]) -> int:
    return max((s + d for s, d in zip(starts, prob.dur, strict=True)), default=0)


def _run_parallel(
    tasks: list[Problem], labels: list[str], run: _Run, say: Callable[[str], None]
) -> list[SubResult]:
    """Solve the distinct problems in ``min(workers, problems)`` processes ("lanes"), each
    problem with ``workers // lanes`` CP-SAT workers; results land by task index.

    The lanes run side by side, so together they have ``lanes * time_limit`` seconds: each
    problem gets that in proportion to its ops, at most ``time_limit``. Grants and worker
    counts depend only on the problems and ``workers``, so the result is reproducible."""
    lanes = min(run.workers, len(tasks))
    cp_workers = max(1, run.workers // lanes)
    total = sum(p.n for p in tasks) or 1
    results: list[SubResult | None] = [None] * len(tasks)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=lanes, mp_context=ctx) as pool:
        futures = {}
        for j, prob in enumerate(tasks):
            grant = min(run.time_limit, run.time_limit * lanes * prob.n / total)
            wall = grant if run.time_mode == "wall" else safety_net(grant)
            clock = Clock(run.time_mode, grant, wall, cp_workers)
            futures[pool.submit(solve_problem, prob, run.method, clock, run.seed, labels[j])] = j
        for fut in concurrent.futures.as_completed(futures):
            j = futures[fut]
            results[j] = fut.result()
            say(_summary(labels[j], fut.result()))
    return [r for r in results if r is not None]


def _assemble(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    results: list[SubResult],
    run: _Run,
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
        status = max((r.status for r in deciding), key=_RANK.__getitem__, default="heuristic")
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
