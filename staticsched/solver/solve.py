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
from staticsched.model.opgraph import OpGraph
from staticsched.model.schedule import OpTime, Placement, Schedule
from staticsched.solver.bounds import lower_bound
from staticsched.solver.cpmodel import solve_cpsat
from staticsched.solver.explain import explain_stuck, precheck
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.lns import improve_lns, plan_rounds
from staticsched.solver.normalize import semi_active
from staticsched.solver.problem import Problem, ProblemMap, build_problems, relax_event_budgets

METHODS = ("cpsat", "list")
#: Problems up to ``WHOLE_ONLY_LIMIT`` ops are solved by CP-SAT as one model; up to
#: ``FULL_LIMIT`` by the whole model with half the budget and then windowed LNS from its best;
#: larger ones by windowed LNS alone. Measured (benchmarks/solver.py): on heterogeneous tile
#: pipelines of 300, 900 and 1,500 ops the whole model did not improve the list schedule in
#: 8-120 s while the rolling LNS gained 1.8%, 0.34% and 0.23%; on examples/chain.json (302
#: ops, tasks chained across cores) the whole model proves the optimum (702) in 0.1 s where
#: the LNS stops at 705; job shops up to 100 ops are proven optimal as a whole.
WHOLE_ONLY_LIMIT = 250
FULL_LIMIT = 1500
#: deterministic-time units granted per second of ``time_limit``: CP-SAT advanced 0.02-0.08
#: units per wall second on these models (2-core machine), so the budget normally ends the
#: search well before the wall-clock safety net
DET_RATE = 0.03

_RANK = {"optimal": 0, "feasible": 1, "heuristic": 2}


@attrs.frozen
class SubResult:
    """The solution of one problem (local indices), or ``stuck`` when none was found."""

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


def solve(
    graph: OpGraph,
    hw: Hardware,
    *,
    method: str = "cpsat",
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    event_budgets: bool = True,
) -> Schedule:
    """Schedule a checked OpGraph on ``hw``.

    Parameters
    ----------
    graph, hw
        The caller has already run ``graph.check(hw)``.
    method : {"cpsat", "list"}
        ``"list"``: the list scheduler alone. ``"cpsat"``: the list schedule improved by CP-SAT.
    time_limit : float
        Seconds of wall clock the whole call may take. The search is bounded by a deterministic
        budget derived from it; the wall clock only stops it as a safety net, and then
        ``stop_reason`` is ``"wall_clock_limit"`` (and the result may not be reproducible).
    seed : int
        CP-SAT's random seed.
    workers : int
        Processes for independent core groups (CP-SAT itself always uses one worker, which is
        what makes it deterministic).
    progress : callable, optional
        Called with one line per improvement (best makespan, bound, elapsed).
    event_budgets : bool
        Keep flag lifetimes within the event-id budgets. False for a program without flags
        (timed mode), where the budgets constrain nothing.

    Returns
    -------
    Schedule
        Semi-active timetable with ``events=()``; the sync planner adds the flags.

    Raises
    ------
    InfeasibleError
        With one sentence per reason no schedule exists (names and numbers).
    InputError
        For a bad ``method``, ``time_limit`` or ``workers``.
    """
    _check_args(method, time_limit, seed, workers)
    t0 = time.monotonic()
    pairs = build_problems(graph, hw)
    if not event_budgets:
        pairs = [(relax_event_budgets(prob), pmap) for prob, pmap in pairs]
    precheck(graph, hw, pairs)
    unique: dict[Problem, int] = {}
    first_of: list[int] = []
    task_of = []
    for k, (prob, _) in enumerate(pairs):
        if prob not in unique:
            unique[prob] = len(first_of)
            first_of.append(k)
        task_of.append(unique[prob])
    tasks = [pairs[k][0] for k in first_of]
    labels = [_label(pairs[k][1], sum(1 for t in task_of if t == j)) for j, k in enumerate(first_of)]
    total_ops = sum(p.n for p in tasks) or 1
    deadline = t0 + time_limit - min(0.25 * time_limit, 0.5 + 2e-5 * len(graph.ops))
    say = progress or (lambda line: None)
    say(f"{len(graph.ops)} ops in {len(pairs)} core group(s), {len(tasks)} distinct")

    results: list[SubResult | None] = [None] * len(tasks)
    shares = [p.n / total_ops for p in tasks]
    if workers > 1 and len(tasks) > 1:
        _run_parallel(tasks, labels, shares, results, method, time_limit, seed, workers, deadline, say)
    else:
        remaining = total_ops
        for j, prob in enumerate(tasks):
            wall = max(0.0, deadline - time.monotonic()) * prob.n / max(remaining, 1)
            remaining -= prob.n
            results[j] = solve_problem(prob, method, time_limit * shares[j], wall, seed, labels[j], progress)
            say(_summary(labels[j], results[j]))
    errors = []
    for j, res in enumerate(results):
        assert res is not None
        if res.stuck is not None:
            prob, pmap = pairs[first_of[j]]
            errors.extend(explain_stuck(graph, prob, pmap, res.stuck).problems)
    if errors:
        from staticsched.errors import InfeasibleError

        raise InfeasibleError(errors)
    return _assemble(graph, hw, pairs, task_of, results, method, time.monotonic() - t0)


def _check_args(method: str, time_limit: float, seed: int, workers: int) -> None:
    bad = []
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


def solve_problem(
    prob: Problem,
    method: str,
    time_share: float,
    wall_limit: float,
    seed: int,
    label: str = "",
    progress: Callable[[str], None] | None = None,
) -> SubResult:
    """List-schedule one problem, improve it with CP-SAT, and normalise the best result.

    ``time_share`` (seconds of the user's limit given to this problem) fixes the deterministic
    budget and the LNS rounds; ``wall_limit`` is the wall-clock safety net.
    """
    t0 = time.monotonic()
    det_limit = DET_RATE * time_share
    bound = lower_bound(prob)
    found = list_schedule(prob)
    relaxed = False
    if isinstance(found, Stuck):
        rescued = _rescue(prob, found, bound.value, det_limit, wall_limit, seed)
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
    listed = semi_active(prob, found.starts, found.offsets)
    list_ms = _makespan(prob, listed)
    best, offsets, best_ms = listed, found.offsets, list_ms
    status = "optimal" if list_ms <= bound.value else "heuristic"
    stop = "optimal" if status == "optimal" else "list"
    cp_ms, cp_status, cp_bound = -1, "", -1
    if progress is not None:
        progress(f"{label}list makespan {list_ms}, lower bound {bound.value}")
    if method == "cpsat" and status != "optimal":
        whole, windows = prob.n <= FULL_LIMIT, prob.n > WHOLE_ONLY_LIMIT
        # mid-size problems split the budget: the whole model first, then windows from its best
        part = 0.5 if whole and windows else 1.0
        t_cp = time.monotonic()
        start, stops, proven, objective = found, [], None, -1
        if whole:
            cp = solve_cpsat(
                prob,
                found,
                bound.value,
                det_limit=det_limit * part,
                wall_limit=wall_limit * part,
                seed=seed,
                progress=progress,
                label=label,
                search="fixed",
            )
            stops.append(cp.stop_reason)
            cp_status, cp_bound, objective = cp.status, cp.bound, cp.objective
            if cp.timetable is not None:
                proven = cp.timetable if cp.status == "optimal" else None
                if cp.timetable.makespan <= start.makespan:
                    start = cp.timetable
        if windows and proven is None:
            lns = improve_lns(
                prob,
                start,
                rounds=plan_rounds(prob.n, time_share * part),
                det_limit=det_limit * part,
                wall_limit=max(0.0, wall_limit - (time.monotonic() - t_cp)),
                seed=seed,
                progress=progress,
                label=label,
            )
            stops.append(lns.stop_reason)
            start, cp_status = lns.timetable, cp_status or "feasible"
        if start is not found:
            norm = semi_active(prob, start.starts, start.offsets)
            cp_ms = _makespan(prob, norm)
            if cp_ms <= best_ms:
                best, offsets, best_ms = norm, start.offsets, cp_ms
        # "feasible": the result went through CP-SAT (a solution or LNS windows), unproven
        status = "feasible" if start is not found or windows else status
        if best_ms <= bound.value or (proven is start and best is not listed and cp_ms == objective):
            status = "optimal"
        if status == "optimal":
            stop = "optimal"
        elif "wall_clock_limit" in stops:
            stop = "wall_clock_limit"
        else:
            stop = stops[-1] if stops else stop
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
    )


def _rescue(
    prob: Problem, stuck: Stuck, lower: int, det_limit: float, wall_limit: float, seed: int
) -> Timetable | Stuck:
    """When the list scheduler is stuck on a small problem, let CP-SAT search from scratch: it
    finds a schedule or proves that none satisfies the constraints (recorded in ``stuck``)."""
    if prob.n > FULL_LIMIT:
        return stuck
    cp = solve_cpsat(prob, None, lower, det_limit=det_limit, wall_limit=wall_limit, seed=seed)
    if cp.timetable is not None:
        return attrs.evolve(cp.timetable, rule="cpsat-rescue")
    return attrs.evolve(stuck, proof="infeasible" if cp.status == "infeasible" else "unknown")


def _makespan(prob: Problem, starts: list[int] | tuple[int, ...]) -> int:
    return max((s + d for s, d in zip(starts, prob.dur, strict=True)), default=0)


def _run_parallel(
    tasks: list[Problem],
    labels: list[str],
    shares: list[float],
    results: list[SubResult | None],
    method: str,
    time_limit: float,
    seed: int,
    workers: int,
    deadline: float,
    say: Callable[[str], None],
) -> None:
    """Solve the distinct problems in worker processes; results land by task index."""
    wall = max(0.0, deadline - time.monotonic())
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as pool:
        futures = {
            pool.submit(
                solve_problem,
                prob,
                method,
                time_limit * shares[j],
                min(wall, wall * shares[j] * min(workers, len(tasks))),
                seed,
                labels[j],
            ): j
            for j, prob in enumerate(tasks)
        }
        for fut in concurrent.futures.as_completed(futures):
            j = futures[fut]
            results[j] = fut.result()
            say(_summary(labels[j], results[j]))


def _assemble(
    graph: OpGraph,
    hw: Hardware,
    pairs: list[tuple[Problem, ProblemMap]],
    task_of: list[int],
    results: list[SubResult],
    method: str,
    seconds: float,
) -> Schedule:
    n = len(graph.ops)
    start = [0] * n
    offset: dict[int, int] = {}
    for (_, pmap), j in zip(pairs, task_of, strict=True):
        res = results[j]
        for li, gi in enumerate(pmap.ops):
            start[gi] = res.starts[li]
        for lk, gk in enumerate(pmap.items):
            offset[gk] = res.offsets[lk]
    ops = [
        OpTime(op.id, op.core, op.unit, start[i], start[i] + op.duration) for i, op in enumerate(graph.ops)
    ]
    acc = graph.accesses
    items = []
    for k, it in enumerate(graph.items):
        uses = acc.get(it.name, ())
        if uses:
            core = graph.ops[uses[0][0]].core
            live = (min(start[i] for i, _ in uses), max(start[i] + graph.ops[i].duration for i, _ in uses))
        else:
            core, live = 0, (0, 0)
        items.append(Placement(it.name, core, it.space, offset.get(k, 0), it.bytes, *live))
    makespan = max((o.end for o in ops), default=0)
    lower = max((r.lower for r in results), default=0)
    deciding = [j for j in sorted(set(task_of)) if results[j].makespan == makespan]
    if makespan <= lower:
        status = "optimal"
    else:
        status = max((results[j].status for j in deciding), key=_RANK.__getitem__, default="heuristic")
    reasons = {r.stop_reason for r in results}
    if status == "optimal":
        stop = "optimal"
    elif "wall_clock_limit" in reasons:
        stop = "wall_clock_limit"
    elif method == "list":
        stop = "list"
    elif "deterministic_limit" in reasons:
        stop = "deterministic_limit"
    else:
        stop = sorted(reasons - {"optimal"})[0] if reasons - {"optimal"} else "optimal"
    source = max(results, key=lambda r: r.lower).bound_source if results else ""
    cp = [r.cpsat_makespan for r in results if r.cpsat_makespan >= 0]
    stats = {
        "ops": n,
        "items": len(graph.items),
        "core_groups": len(pairs),
        "distinct_problems": len(results),
        "list_makespan": max((r.list_makespan for r in results), default=0),
        "cpsat_makespan": max(cp) if len(cp) == len(results) and cp else -1,
        "lower_bound_source": source,
        "event_budgets_relaxed": sum(1 for r in results if r.relaxed),
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
