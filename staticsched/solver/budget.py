"""Time: what ``time_limit`` bounds, and how a reproducible run fills it (DESIGN §11 "Time").

``time_limit`` is what the user grants the *search*: CP-SAT on whole models and the windowed
LNS, including building their models. Preparation (splitting the graph into problems, the
list schedules, lower bounds) and assembly (normalisation, mapping back) always run and come
on top.

Two clocks can bound the search:

* ``"deterministic"`` (the default): every CP-SAT call gets a deterministic-time budget
  (``max_deterministic_time``), so the same input, seed and workers give the same result. A
  deterministic unit is worth different wall time on different models, so the budget is
  ``TARGET * seconds * det_rate(shape, search, workers)``, with rates calibrated per model
  family and size (:data:`CALIBRATION`, measured by ``benchmarks/solver.py --calibrate``). The
  wall clock is only a safety net, far beyond the limit (:func:`safety_net`: ``NET_FACTOR *
  time_limit + NET_OFFSET``), so that a machine that is merely busy still ends on the
  deterministic budget; when the net does fire the result says ``stop_reason =
  "wall_clock_limit (not reproducible)"`` and the summary reports it as an error.
* ``"wall"``: CP-SAT and the LNS run until the wall clock says stop, using all of the time
  and, with several workers, CP-SAT's non-deterministic parallel search. Every result says
  ``not reproducible`` in its ``stop_reason``.

Budgets are tracked in *calibrated seconds*: the deterministic time a search used divided by
its rate (plus a per-window charge for the LNS's own Python work). That quantity is itself
deterministic, so what one problem or phase leaves unused can be handed on reproducibly.
"""

from __future__ import annotations

import math
import time

import attrs

from staticsched.solver.problem import Problem

#: fraction of the granted seconds a deterministic budget is calibrated to fill: the rest is
#: the margin for a machine slower or busier than the calibration run (the rates below vary
#: by about +-30% between models of one family)
TARGET = 0.8

#: deterministic mode: the wall clock stops a search only at ``NET_FACTOR * time_limit +
#: NET_OFFSET`` seconds (:func:`safety_net`). A machine three times slower than the
#: calibration one, or sharing its cores with two other jobs, still ends on the budget.
NET_FACTOR = 3.0
NET_OFFSET = 30.0

#: stop reasons (``Schedule.stop_reason``)
STOP_OPTIMAL = "optimal"
STOP_MODEL_OPTIMAL = "optimal in the solver's stricter model"
STOP_DETERMINISTIC = "deterministic_limit"
STOP_WALL_NET = "wall_clock_limit (not reproducible)"
STOP_WALL_MODE = "wall_clock_limit (wall-clock mode, not reproducible)"
STOP_WALL_MODE_OPTIMAL = "optimal (wall-clock mode, not reproducible)"
STOP_CONVERGED = "lns_converged"
STOP_GAP = "gap_limit"
#: an LNS not started: its budget cannot pay for one pass of windows over the problem
#: (:func:`staticsched.solver.lns.covers_one_pass`)
STOP_LNS_SHORT = "lns_budget_short_of_one_pass"


def gap_target(lower: int, gap: float) -> int:
    """The largest makespan proven within relative gap ``gap`` of the lower bound ``lower``:
    ``(makespan - lower) / makespan <= gap`` (CP-SAT's ``relative_gap_limit`` and MIP solvers
    measure the gap against the incumbent the same way). ``gap`` 0: ``lower`` itself."""
    if gap <= 0:
        return lower
    if gap >= 1:
        return 2**62
    return int(lower / (1.0 - gap) + 1e-9)


@attrs.frozen
class Shape:
    """What the portfolio and the calibration look at: size and the kind of constraints.

    ``family`` is ``"disjunctive"`` when only pipes and precedences constrain the schedule (no
    binding memory space or event-id pool: job shops, chains of small tasks), ``"flags"`` when
    an event-id pool binds (its flag lifetimes are optional intervals, so much of the search is
    clause learning, which CP-SAT's deterministic clock counts fully) and ``"memory"`` when
    only memory spaces bind (variable-size holds in cumulatives: much LP and propagation work,
    which the clock counts less). CP-SAT's deterministic clock runs at different speeds on the
    three (:data:`CALIBRATION`).
    """

    n: int
    pipes: int
    edges: int
    binding_items: int
    binding_tokens: int

    @property
    def family(self) -> str:
        if self.binding_tokens:
            return "flags"
        return "memory" if self.binding_items else "disjunctive"

    @classmethod
    def of(cls, prob: Problem) -> Shape:
        return cls(
            prob.n,
            len(prob.pipes),
            len(prob.edges),
            sum(1 for it in prob.items if prob.spaces[it.space].binding),
            sum(1 for tok in prob.tokens if prob.budgets[tok.budget].binding) + len(prob.xfers),
        )


#: deterministic units per CPU second of one CP-SAT worker, per (family, search): points
#: ``(ops, rate)`` interpolated log-log in the problem size, constant beyond the ends.
#: ``"lp"`` is one worker with CP-SAT's default search (LP relaxation on, strong no-overlap
#: propagation); ``"interleave"`` the deterministic portfolio, per worker (with ``w`` workers
#: it advances ``w ** WORKER_EXPONENT`` times as fast per wall second); ``"window"`` an LNS
#: window model; ``"scratch"`` CP-SAT's rescue from scratch (families that can get stuck only:
#: a disjunctive problem has no memory or ids to be stuck on). Measured on a 2-core machine
#: with OR-Tools 9.15 by ``python benchmarks/solver.py --calibrate`` (table in docs/design.md,
#: refinement 12).
CALIBRATION: dict[tuple[str, str], tuple[tuple[int, float], ...]] = {
    ("disjunctive", "lp"): ((100, 0.22), (300, 0.20), (1000, 0.13)),
    ("memory", "lp"): ((300, 0.14),),
    ("flags", "lp"): ((330, 0.36),),
    ("disjunctive", "interleave"): ((100, 0.25), (225, 0.23), (600, 0.19)),
    ("memory", "interleave"): ((300, 0.157),),
    ("flags", "interleave"): ((330, 0.344),),
    ("window", "lp"): ((90, 0.075),),
    # the rescue from scratch (no hint, first schedule wanted: rescue._rescue) on problems the
    # list scheduler got stuck on memory with no relaxed schedule behind (benchmarks/synthetic.py
    # fragmented_pipeline): the lowest rate seen per size, since it varied 10x between models of
    # one size (flags at 400 ops: 0.014 to 0.19); with the interleave rate it overran its
    # seconds up to 2.6x (0.127 measured against 0.344 on a 1,500-op flags problem)
    ("memory", "scratch"): ((120, 0.25), (400, 0.205)),
    ("flags", "scratch"): ((120, 0.14), (400, 0.014)),
}
#: CPU seconds of one LNS window beyond CP-SAT's deterministic time: ``WINDOW_BASE +
#: WINDOW_PER_OP * problem ops`` of the LNS's own Python work (finding the window's
#: neighbourhood, merging) plus ``WINDOW_PER_SUB_OP * window-model ops`` inside CP-SAT (model
#: loading, presolve). Least-squares fit over 300 windows of 300- to 15,000-op problems.
WINDOW_BASE = 1.9e-3
WINDOW_PER_OP = 2.36e-6
WINDOW_PER_SUB_OP = 175e-6
#: interleaved search with ``w`` workers: deterministic time per wall second grows as
#: ``w ** WORKER_EXPONENT`` (2 workers vs 1, per CPU second the same: ft10 1.9x, ta01 2.0x,
#: ta41 1.45x, gemv_m1 1.96x)
WORKER_EXPONENT = 0.9


def safety_net(seconds: float) -> float:
    """Wall seconds after which a deterministic search of ``seconds`` is stopped anyway."""
    return NET_FACTOR * seconds + NET_OFFSET


def det_rate(family: str, search: str, n: int, workers: int = 1) -> float:
    """Deterministic units CP-SAT advances per second on a model of this family and size."""
    points = CALIBRATION[(family, search)]
    if n <= points[0][0]:
        rate = points[0][1]
    elif n >= points[-1][0]:
        rate = points[-1][1]
    else:
        k = next(k for k in range(1, len(points)) if n <= points[k][0])
        (n0, r0), (n1, r1) = points[k - 1], points[k]
        t = math.log(n / n0) / math.log(n1 / n0)
        rate = math.exp((1 - t) * math.log(r0) + t * math.log(r1))
    if search == "interleave":
        rate *= max(1, workers) ** WORKER_EXPONENT
    return rate


def window_overhead(n: int, sub_n: int) -> float:
    """Calibrated seconds the LNS spends outside CP-SAT on one window."""
    return WINDOW_BASE + WINDOW_PER_OP * n + WINDOW_PER_SUB_OP * sub_n


@attrs.frozen
class Clock:
    """The search's two limits for one problem.

    Attributes
    ----------
    mode : str
        ``"deterministic"`` or ``"wall"``.
    seconds : float
        Seconds of the user's limit granted to this problem's search.
    wall : float
        Wall-clock seconds the search may take at most, from :meth:`start` on.
    workers : int
        CP-SAT workers for this problem.
    deadline : float
        ``time.monotonic()`` value at which the search must stop whatever the mode (set by
        :meth:`start`).
    """

    mode: str
    seconds: float
    wall: float
    workers: int = 1
    deadline: float = math.inf

    def start(self) -> Clock:
        """This clock with its deadline ``wall`` seconds from now."""
        return attrs.evolve(self, deadline=time.monotonic() + self.wall)

    @property
    def deterministic(self) -> bool:
        return self.mode == "deterministic"

    def remaining(self) -> float:
        """Wall seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def part(self, seconds: float) -> Clock:
        """The same limits with ``seconds`` granted (a phase of the portfolio)."""
        return attrs.evolve(self, seconds=max(0.0, seconds))

    def det_limit(self, rate: float, seconds: float | None = None) -> float:
        """CP-SAT's ``max_deterministic_time`` for ``seconds`` (default: all granted) at
        ``rate``; unbounded in wall-clock mode."""
        if not self.deterministic:
            return math.inf
        return max(1e-3, TARGET * rate * (self.seconds if seconds is None else seconds))


def spent_seconds(det_time: float, rate: float) -> float:
    """Calibrated seconds a search of ``det_time`` units took (what its budget is charged)."""
    return det_time / (TARGET * rate)
