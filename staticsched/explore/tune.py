"""Tuning: search the tilings of a TaskGraph's tasks for the shortest schedule.

The search, per tunable task (:mod:`staticsched.tasks.space`), in dependency order, the
other tasks keeping the best tiling found so far (coordinate-wise: one pass, not a product
of every task's tilings):

1. Enumerate the task's legal tilings and give each a cheap lower bound from its block grid
   (:mod:`staticsched.explore.workbound`), without lowering it.
2. Visit them in the order of their lower bound. A candidate's first visit lowers it and
   computes the solver's own bound of the lowered graph (at least the cheap one), and puts it
   back in the queue under that bound; its second visit schedules it with the list scheduler.
   So candidates are scheduled in the order of the solver's bound, and only those that reach
   the front are ever lowered. Before any, the tiling the task has (its own, or the derived
   one) is scheduled, as the baseline.
3. Stop when the front's bound reaches the best makespan found (every candidate left is
   *pruned*: it cannot beat it) or after ``max_candidates`` schedules (the rest are *capped*).
4. With ``method="cpsat"``, the ``polish`` best candidates are scheduled again with CP-SAT
   (``time_limit`` each), warm-started from their list schedules; the best of all wins.

Candidates are scheduled in rounds of :data:`ROUND`, on any backend (:mod:`.backends`); which
candidates run depends only on the results of earlier rounds, so the outcome is the same for
``jobs=1``, ``jobs=4`` or Ray (given deterministic schedules: the list scheduler, or CP-SAT
within its deterministic budget).
"""

from __future__ import annotations

import hashlib
import heapq
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from staticsched.errors import InputError, StaticschedError
from staticsched.explore.bounds import fixed_work, solver_bound
from staticsched.frontend.taskgraph import TaskGraph, load_graph
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import OpGraph
from staticsched.options import DEFAULT_GAP, DEFAULT_OP_BUDGET, option_problems
from staticsched.pipeline import compile_graph, naming
from staticsched.progress import Progress, as_progress
from staticsched.tasks.bounds import bound_of
from staticsched.tasks.matmul.workbound import MatmulBounds
from staticsched.tasks.space import candidates, tiling_label, tunable, used_tiling

#: a cheap lower bound of each tunable kind's tilings: ``BOUNDS[kind](task, hw).work(tiling)``
#: is a :class:`~staticsched.explore.bounds.Work`
BOUNDS: dict[str, Callable[[Any, Hardware], Any]] = {"matmul": MatmulBounds}

#: candidates scheduled per round (whatever the number of workers, so results do not depend on it)
ROUND = 4


@attrs.frozen
class TuneOptions:
    """How each candidate is scheduled and how far the search goes (see :func:`staticsched.tune`)."""

    method: str = "cpsat"
    mode: str = "flags"
    time_limit: float = 10.0
    seed: int = 0
    workers: int = 1
    wall_clock: bool = False
    link_policy: str = "auto"
    gap: float = DEFAULT_GAP
    op_budget: int | None = None
    max_candidates: int = 32
    polish: int = 3
    #: also search the matmul's L1 reuse steps (step_m, step_n in 1, 2, 4)
    steps: bool = False
    #: also search split-K (``split_k``) where a tiling's blocks leave Cube cores idle
    split_k: bool = True


@attrs.define
class Row:
    """One candidate: a tiling of one task (the other tasks as in ``assignment``), its bounds,
    what scheduling it gave and its status (``best``, ``scheduled``, ``pruned``, ``capped``,
    ``failed``, ``duplicate``). ``baseline`` marks the tilings ``staticsched schedule`` uses
    (given or derived); ``same_as`` is the candidate that lowers to the same ops and items (a
    duplicate is not scheduled again: ``double_buffer`` only changes which tilings are legal)."""

    index: int
    task: str
    tiling: Any
    assignment: tuple[tuple[str, Any], ...]
    baseline: bool
    work_bound: int
    bound: int | None = None
    bound_source: str = ""
    list_makespan: int | None = None
    makespan: int | None = None
    method: str = ""
    solver_status: str = ""
    status: str = ""
    error: str = ""
    same_as: int | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.task}: {tiling_label(self.tiling)}"


@attrs.frozen
class Job:
    """One schedule to compute, picklable for worker processes and Ray: ``compile`` is the
    pipeline's entry point (:func:`staticsched.api.compile_graph`)."""

    index: int
    graph: TaskGraph
    hw: Hardware
    method: str
    opts: TuneOptions
    compile: Callable[..., Any]


def compile_job(job: Job) -> Any:
    """The job's graph through the pipeline (a ``Compiled``)."""
    o = job.opts
    return job.compile(job.graph, job.hw, method=job.method, mode=o.mode, time_limit=o.time_limit,
                       seed=o.seed, workers=o.workers, wall_clock=o.wall_clock, link_policy=o.link_policy,
                       op_budget=o.op_budget, gap=o.gap)


def run_job(job: Job) -> dict[str, Any]:
    """Schedule one candidate: ``{"index", "compiled", "error", "seconds"}``; a bad candidate
    records its error, never raises (Ctrl-C aside)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": job.index, "compiled": None, "error": ""}
    try:
        out["compiled"] = compile_job(job)
    except StaticschedError as exc:
        out["error"] = " | ".join(exc.problems)
    except Exception as exc:  # a bug in one candidate must not stop the search; say what it was
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        out["error"] = f"internal error {type(exc).__name__}: {exc} ({Path(tb.filename).name}:{tb.lineno})"
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


class Search:
    """The state of one tuning run: rows, the best result, and how to run schedules."""

    def __init__(self, tg: TaskGraph, hw: Hardware, opts: TuneOptions, compile_fn: Callable[..., Any],
                 run: Callable, progress: Progress) -> None:
        self.tg, self.hw, self.opts = tg, hw, opts
        self.compile, self.run, self.rep = compile_fn, run, progress
        self.tasks = [t for t in tg.ordered_tasks if tunable(t)]
        self.current = {t.id: used_tiling(t, hw) for t in self.tasks}
        self.baseline = tuple(sorted(self.current.items()))
        self.bounds = {t.id: BOUNDS[t.type](t, hw) for t in self.tasks}
        self.rows: list[Row] = []
        #: (makespan, row index, 0 for CP-SAT else 1, Compiled): CP-SAT's wins a tie
        self.best: tuple[int, int, int, Any] | None = None
        self.legal: list[tuple[str, int]] = []
        self.screened = 0
        self.lowered: dict[str, int] = {}  # digest of a lowered graph's ops and items -> row

    # ------------------------------------------------------------------ graphs
    def graph_of(self, assignment: tuple[tuple[str, Any], ...]) -> TaskGraph:
        tilings = dict(assignment)
        return attrs.evolve(self.tg, tasks=[attrs.evolve(t, tiling=tilings[t.id]) if t.id in tilings else t
                                            for t in self.tg.tasks])

    def _assignment(self, task_id: str, tiling: Any) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted({**self.current, task_id: tiling}.items()))

    @property
    def best_makespan(self) -> float:
        return float("inf") if self.best is None else self.best[0]

    # ------------------------------------------------------------------ scheduling
    def schedule(self, rows: list[Row], method: str) -> None:
        """Schedule ``rows`` (one round) with ``method`` and record the results."""
        jobs = [Job(r.index, self.graph_of(r.assignment), self.hw, method, self.opts, self.compile)
                for r in rows]

        def done(res: dict[str, Any]) -> None:
            row = self.rows[res["index"]]
            row.seconds = round(row.seconds + res["seconds"], 3)
            comp = res["compiled"]
            if comp is None:
                row.error = res["error"]
                if row.makespan is None:
                    row.status = "failed"
                return
            ms = comp.schedule.makespan
            if method == "list":
                row.list_makespan = ms
            if row.makespan is None or ms <= row.makespan:
                row.makespan, row.method, row.solver_status = ms, method, comp.schedule.status
            key = (ms, row.index, 0 if method == "cpsat" else 1)
            if self.best is None or key < self.best[:3]:
                if self.best is None or ms < self.best[0]:
                    self.rep.line(f"  {row.label} ({method}): {ms} cycles (bound {row.bound})")
                self.best = (*key, comp)

        self.run(run_job, jobs, done)

    def tune_task(self, task: Any) -> None:
        """One coordinate: every legal tiling of ``task``, the other tasks as they are."""
        hw, opts = self.hw, self.opts
        tilings = candidates(task, hw, steps=opts.steps, split_k=opts.split_k)
        self.legal.append((task.id, len(tilings)))
        now = tiling_label(self.current[task.id])
        self.rep.line(f"[tune] {task.id}: {len(tilings)} legal tilings (now {now}), scheduled in bound order")
        incumbent = self._assignment(task.id, self.current[task.id])
        first = len(self.rows)
        for tiling in tilings:
            assignment = self._assignment(task.id, tiling)
            self.rows.append(Row(len(self.rows), task.id, tiling, assignment, assignment == self.baseline, 0))
        # the graph as it is, once: the incumbent's bound and what the other tasks cost
        inc = next((r for r in self.rows[first:] if r.assignment == incumbent), None)
        og = self._exact(inc) if inc is not None else None
        fixed = [self.bounds[t.id].work(self.current[t.id]) for t in self.tasks if t.id != task.id]
        if og is not None:
            fixed.append(fixed_work(og, hw, {t.id for t in self.tg.tasks} - {t.id for t in self.tasks}))
        queue = []
        for r in self.rows[first:]:
            r.work_bound = bound_of([self.bounds[task.id].work(r.tiling), *fixed], hw.cores)
            if r is not inc:
                queue.append((r.work_bound, 0, r.index))
        if inc is not None and og is not None and inc.same_as is None:
            self._round([inc])  # the baseline (a later coordinate's is an earlier one's best)
        heapq.heapify(queue)
        batch: list[Row] = []
        while queue and self.screened + len(batch) < opts.max_candidates:
            key, exact, index = queue[0]
            if key >= self.best_makespan:
                break
            heapq.heappop(queue)
            row = self.rows[index]
            if not exact:
                if self._exact(row) is not None and row.same_as is None:
                    heapq.heappush(queue, (row.bound, 1, index))
                continue
            batch.append(row)
            if len(batch) == ROUND:
                self._round(batch)
                batch = []
        self._round(batch)
        if self.best is not None:
            self.current = dict(self.rows[self.best[1]].assignment)

    def _round(self, batch: list[Row]) -> None:
        if batch:
            self.schedule(batch, "list")
            self.screened += len(batch)

    def _exact(self, row: Row) -> OpGraph | None:
        """Lower ``row``'s graph and compute the solver's bound; the lowered graph, or None
        when lowering fails (the row records the error)."""
        from staticsched.frontend.lowering import lower

        try:
            og = lower(self.graph_of(row.assignment), self.hw, op_budget=self.opts.op_budget)
        except StaticschedError as exc:
            row.error, row.status = " | ".join(exc.problems), "failed"
            return None
        row.bound, row.bound_source = solver_bound(og, self.hw)
        digest = hashlib.sha256(repr((og.ops, og.items)).encode()).hexdigest()
        first = self.lowered.setdefault(digest, row.index)
        if first != row.index:
            row.same_as = first
        return og

    def polish(self) -> None:
        """CP-SAT on the ``polish`` best list schedules."""
        ranked = sorted((r for r in self.rows if r.list_makespan is not None and r.method == "list"),
                        key=lambda r: (r.list_makespan, r.index))
        picked = ranked[: self.opts.polish]
        if picked:
            self.rep.line(f"[tune] CP-SAT on the {len(picked)} best, {self.opts.time_limit:g} s each")
            self.schedule(picked, "cpsat")

    def finish(self) -> None:
        """Statuses: best, scheduled, failed, and for the rest pruned (bound at least the best
        makespan) or capped."""
        best_ms = self.best_makespan
        for r in self.rows:
            if r.same_as is not None:
                first = self.rows[r.same_as]
                for key in ("list_makespan", "makespan", "method", "solver_status"):
                    setattr(r, key, getattr(first, key))
                r.status = "duplicate"
                continue
            if r.status == "failed" and r.makespan is None:
                continue
            if self.best is not None and r.index == self.best[1]:
                r.status = "best"
            elif r.makespan is not None:
                r.status = "scheduled"
            else:
                bound = r.bound if r.bound is not None else r.work_bound
                r.status = "pruned" if bound >= best_ms else "capped"


def run_tune(graph: TaskGraph, hw: Hardware, opts: TuneOptions, compile_fn: Callable[..., Any], *,
             jobs: int = 1, ray_address: str | None = None, progress: Progress | None = None,
             source: str = "") -> Any:
    """Run the search (module docstring) and return a
    :class:`~staticsched.explore.tune_report.Tuned`. ``compile_fn`` schedules one graph
    (:func:`staticsched.api.compile_graph`); ``source`` names the graph in titles."""
    from staticsched.explore.backends import executor
    from staticsched.explore.tune_report import Tuned
    from staticsched.progress import silent

    rep = progress or silent()
    if not any(tunable(t) for t in graph.tasks):
        rep.line("[tune] no task of a tunable kind (matmul): scheduling the graph as it is")
        return Tuned(compile_job(Job(0, graph, hw, opts.method, opts, compile_fn)), graph, (), (), source)
    with executor(jobs, ray_address) as run:
        search = Search(graph, hw, opts, compile_fn, run, rep)
        for task in search.tasks:
            search.tune_task(task)
        if opts.method == "cpsat" and opts.polish > 0:
            search.polish()
    search.finish()
    if search.best is None:
        errors = sorted({r.error for r in search.rows if r.error})
        raise StaticschedError(["no candidate tiling could be scheduled", *errors[:5]])
    best_row = search.rows[search.best[1]]
    return Tuned(search.best[3], search.graph_of(best_row.assignment), tuple(search.rows),
                 tuple(search.legal), source)


def tune(
    graph: Any,
    hw: Hardware | str | Path,
    *,
    method: str = "cpsat",
    time_limit: float = 10.0,
    max_candidates: int = 32,
    polish: int = 3,
    seed: int = 0,
    workers: int = 1,
    mode: str = "flags",
    op_budget: int | None = DEFAULT_OP_BUDGET,
    wall_clock: bool = False,
    link_policy: str = "auto",
    gap: float = DEFAULT_GAP,
    jobs: int = 1,
    ray: str | None = None,
    progress: Progress | Callable[[str], None] | None = None,
    steps: bool = False,
    split_k: bool = True,
) -> Any:
    """Search the tilings of a task graph's tasks for the shortest schedule.

    Each tunable task (``matmul``; the other kinds keep their derived tiling) is tuned in turn,
    the others fixed at their best so far. Its legal tilings (base m/n/k in multiples of the
    Cube's fractal, double buffering, L1 reuse steps where the tiling has them) are visited in
    the order of their lower bound; the tiling the task already has is scheduled first. Each
    is scheduled with the list scheduler, and the search stops when the next bound reaches the
    best makespan (the rest are pruned: they cannot beat it) or after ``max_candidates``
    schedules. With ``method="cpsat"`` the ``polish`` best are then improved by CP-SAT. The
    details are in :mod:`staticsched.explore.tune`.

    Parameters
    ----------
    graph : TaskGraph, str or Path
        A TaskGraph or its path (an OpGraph has no tiling to choose).
    hw : Hardware, str or Path
        A hardware model, a preset name or a TOML path.
    method : {"cpsat", "list"}
        ``"list"``: the list schedules alone; ``"cpsat"``: then CP-SAT on the ``polish`` best.
    time_limit : float
        Seconds of CP-SAT search per polished candidate (as for :func:`staticsched.api.schedule`).
    max_candidates : int
        At most this many candidates are list scheduled (the baseline included).
    polish : int
        How many of the best list schedules CP-SAT improves (``method="cpsat"``).
    seed, workers, mode, op_budget, wall_clock, link_policy, gap
        As for :func:`staticsched.api.schedule`, for every candidate.
    jobs : int
        Local worker processes scheduling candidates side by side (rounds of 4 candidates, so
        the result does not depend on ``jobs``).
    ray : str, optional
        Schedule candidates as Ray tasks: ``"auto"`` or a cluster address (needs the
        ``staticsched[ray]`` extra).
    progress : Progress or callable, optional
        Receives progress lines.
    steps : bool
        Also search the matmul's L1 reuse steps (``step_m``/``step_n`` in 1, 2, 4): up to 9
        times the tilings, and the cheap bound does not yet credit what reuse saves, so the
        search lowers many more candidates (minutes on a 1000x777 GEMM).
    split_k : bool
        Also search ``split_k`` (K chunks on several cores, a reduction after) for tilings
        whose blocks leave Cube cores idle; ``False`` keeps every block's K loop on one core.

    Returns
    -------
    staticsched.explore.tune_report.Tuned
        ``best`` (a :class:`~staticsched.pipeline.Compiled`), ``graph`` (the TaskGraph with the best tilings),
        ``rows`` (every candidate), ``csv_text()``, ``picture()``, ``write(outdir)``.

    Raises
    ------
    StaticschedError
        For bad input or options (``InputError``, one line per problem), or when no candidate
        can be scheduled.
    """
    bad = option_problems(method=method, mode=mode, time_limit=time_limit, workers=workers, gap=gap)
    counts = (("max_candidates", max_candidates, 1), ("polish", polish, 0), ("jobs", jobs, 1))
    for name, value, least in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            bad.append(f"{name} must be an integer >= {least}, got {value!r}")
    if bad:
        raise InputError(bad)
    rep = as_progress(progress)
    source = str(graph) if isinstance(graph, str | Path) else ""
    hw = load_hardware(hw)
    if isinstance(graph, str | Path):
        graph = load_graph(graph)
    if not isinstance(graph, TaskGraph):
        what = "an OpGraph" if isinstance(graph, OpGraph) else type(graph).__name__
        raise InputError(f"{source or 'graph'}: tune needs a TaskGraph, got {what} (no tiling to choose)")
    opts = TuneOptions(method=method, mode=mode, time_limit=time_limit, seed=seed, workers=workers,
                       wall_clock=wall_clock, link_policy=link_policy, gap=gap, op_budget=op_budget,
                       max_candidates=max_candidates, polish=polish, steps=steps,
                       split_k=split_k)
    try:
        return run_tune(graph, hw, opts, compile_graph, jobs=jobs, ray_address=ray, progress=rep,
                        source=source)
    except StaticschedError as exc:
        if not source:
            raise
        raise naming(exc, source) from None
