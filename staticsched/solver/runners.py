"""Running the distinct problems: one after another on a shared deterministic budget, or
side by side in worker processes."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable

import attrs

from staticsched.model.opgraph import OpGraph
from staticsched.solver.budget import (
    Clock,
    safety_net,
)
from staticsched.solver.explain import explain_stuck
from staticsched.solver.list_sched import Timetable
from staticsched.solver.problem import Problem, ProblemMap
from staticsched.solver.subproblem import SubResult, solve_problem


@attrs.frozen
class Run:
    """The caller's options that every problem's search shares."""

    method: str
    time_limit: float
    seed: int
    workers: int
    time_mode: str
    #: stop a problem's search once its incumbent is within this relative gap of its bound
    gap: float = 0.0


def run_sequential(
    tasks: list[Problem],
    labels: list[str],
    run: Run,
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
                            starts[j] if starts else None, gap=run.gap)
        results.append(res)
        left = max(0.0, left - (res.spent if clock.deterministic else res.search_seconds))
        wall_left = max(0.0, wall_left - res.search_seconds)
        say(run_summary(labels[j], res))
    return results


def run_parallel(
    tasks: list[Problem], labels: list[str], run: Run, say: Callable[[str], None]
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
            futures[pool.submit(solve_problem, prob, run.method, clock, run.seed, labels[j],
                                 gap=run.gap)] = j
        for fut in concurrent.futures.as_completed(futures):
            j = futures[fut]
            results[j] = fut.result()
            say(run_summary(labels[j], fut.result()))
    return [r for r in results if r is not None]


def solve_pairs(
    graph: OpGraph,
    pairs: list[tuple[Problem, ProblemMap]],
    run: Run,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
    starts: list[Timetable | None] | None = None,
) -> tuple[list[tuple[Problem, ProblemMap]], list[SubResult]]:
    """Solve every pair, each distinct problem once (identical cores share one), and return
    the pairs with one result each; an infeasible one raises with the explanation."""
    given: list[Timetable | None] = list(starts) if starts else [None] * len(pairs)
    unique: dict[tuple[Problem, int], int] = {}
    first_of: list[int] = []
    task_of = []
    for k, (prob, _) in enumerate(pairs):
        # a pair with its own start timetable is a problem of its own
        key = (prob, k if given[k] is not None else -1)
        if key not in unique:
            unique[key] = len(first_of)
            first_of.append(k)
        task_of.append(unique[key])
    tasks = [pairs[k][0] for k in first_of]
    task_starts = [given[k] for k in first_of]
    labels = [run_label(pairs[k][1], sum(1 for t in task_of if t == j)) for j, k in enumerate(first_of)]
    say(f"{len(graph.ops)} ops in {len(pairs)} core group(s), {len(tasks)} distinct")
    if min(run.workers, len(tasks)) > 1 and not any(task_starts):
        results = run_parallel(tasks, labels, run, say)
    else:
        results = run_sequential(tasks, labels, run, progress, task_starts)
    errors = []
    for j, res in enumerate(results):
        if res.stuck is not None:
            prob, pmap = pairs[first_of[j]]
            errors.extend(explain_stuck(graph, prob, pmap, res.stuck).problems)
    if errors:
        from staticsched.errors import InfeasibleError

        raise InfeasibleError(errors)
    return pairs, [results[j] for j in task_of]


def assembled_makespan(pairs: list[tuple[Problem, ProblemMap]], results: list[SubResult]) -> int:
    return max((r.makespan for r in results), default=0)


def run_label(pmap: ProblemMap, copies: int) -> str:
    cores = ",".join(str(c) for c in pmap.cores)
    return f"core {cores}" + (f" (x{copies} identical)" if copies > 1 else "") + ": "


def run_summary(label: str, res: SubResult) -> str:
    if res.stuck is not None:
        return f"{label}no schedule found"
    return (
        f"{label}makespan {res.makespan} ({res.status}), lower bound {res.lower}, "
        f"list {res.list_makespan}, {res.seconds:.1f} s"
    )
