"""What the tests no longer assert: how many wall seconds a time limit, the safety net and the
wall-clock mode take on this machine.

The tests check what stops a search (the deterministic budget, the net, the wall-clock mode)
and what it is charged, in calibrated seconds; the wall seconds depend on the machine and on
what runs beside it, so they are measured here, alone, as a table::

    python benchmarks/wall_clock.py [--repeat 3]

Rows (medians over ``--repeat`` runs):

- ``limit 1 s``: a 60-tile pipeline under ``time_limit=1`` (deterministic mode): the search's
  wall seconds and the whole solve's, against the limit;
- ``net 1.5 s``: la29 with a budget calibrated 100x too generous (a machine far slower than the
  calibration one) and the net set to 1.5 x 1 s + 0 s: when the net fired;
- ``wall mode 1 s``: a 100-tile pipeline in ``time_mode="wall"``;
- ``cpsat net 0.2 s``: ``solve_cpsat`` with a huge deterministic budget and 0.2 wall seconds;
- ``rescue scratch 10 s``: CP-SAT's rescue from scratch of ``fragmented_pipeline(30, seed,
  event_ids=1, flag_latency=1)`` (stuck on memory, flags family, no relaxed schedule) for the
  first six seeds that get stuck, with 10 calibrated seconds each: the slowest one's wall
  seconds (``search s``) and the mean (``total s``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import synthetic  # noqa: E402


def _limit() -> tuple[float, float, str]:
    from staticsched.solver import solve

    s = solve(*synthetic.tile_pipeline(60), time_limit=1.0)
    stats = dict(s.stats)
    return float(stats["search_seconds"]), float(stats["seconds"]), s.stop_reason


def _net() -> tuple[float, float, str]:
    from staticsched.solver import budget, solve

    lines = (ROOT / "benchmarks" / "jobshop" / "la29.txt").read_text().strip().splitlines()[1:]
    rows = [[int(x) for x in line.split()] for line in lines]
    graph, hw = synthetic.job_shop([list(zip(r[::2], r[1::2], strict=True)) for r in rows])
    saved = budget.TARGET, budget.NET_FACTOR, budget.NET_OFFSET
    budget.TARGET, budget.NET_FACTOR, budget.NET_OFFSET = 100.0, 1.5, 0.0
    try:
        s = solve(graph, hw, time_limit=1.0)
    finally:
        budget.TARGET, budget.NET_FACTOR, budget.NET_OFFSET = saved
    stats = dict(s.stats)
    return float(stats["search_seconds"]), float(stats["seconds"]), s.stop_reason


def _wall_mode() -> tuple[float, float, str]:
    from staticsched.solver import solve

    s = solve(*synthetic.tile_pipeline(100, flag_latency=1), time_limit=1.0, time_mode="wall")
    stats = dict(s.stats)
    return float(stats["search_seconds"]), float(stats["seconds"]), s.stop_reason


def _cpsat_net() -> tuple[float, float, str]:
    from staticsched.solver import build_problems, list_schedule, lower_bound
    from staticsched.solver.cpmodel import solve_cpsat

    ((prob, _),) = build_problems(*synthetic.tile_pipeline(60))
    hint = list_schedule(prob)
    t0 = time.monotonic()
    res = solve_cpsat(prob, hint, lower_bound(prob).value, det_limit=1e6, wall_limit=0.2)
    return res.wall, time.monotonic() - t0, res.stop_reason


def _rescue_scratch() -> tuple[float, float, str]:
    from staticsched.solver import build_problems, list_schedule, lower_bound
    from staticsched.solver.budget import Clock
    from staticsched.solver.list_sched import Stuck
    from staticsched.solver.rescue import unstick

    walls, stops = [], []
    seed = 0
    while len(walls) < 6:
        ((prob, _),) = build_problems(*synthetic.fragmented_pipeline(30, seed, event_ids=1, flag_latency=1))
        seed += 1
        stuck = list_schedule(prob)
        if not (isinstance(stuck, Stuck) and stuck.kind == "memory"):
            continue
        t0 = time.monotonic()
        out = unstick(prob, stuck, lower_bound(prob).value, Clock("deterministic", 10.0, 1e9).start(), 0, 0)
        walls.append(time.monotonic() - t0)
        stops.append(out.stop_reason or "first schedule")
    return max(walls), sum(walls) / len(walls), ", ".join(sorted(set(stops)))


ROWS: dict[str, tuple[float, Callable[[], tuple[float, float, str]]]] = {
    "limit 1 s": (1.0, _limit),
    "net 1.5 s": (1.5, _net),
    "wall mode 1 s": (1.0, _wall_mode),
    "cpsat net 0.2 s": (0.2, _cpsat_net),
    "rescue scratch 10 s": (10.0, _rescue_scratch),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=sorted(ROWS), help="these rows only")
    args = ap.parse_args(argv)
    print(f"{'row':<16} {'target s':>8} {'search s':>9} {'total s':>8}  stop reason")
    for name, (target, run) in ROWS.items():
        if args.only and name not in args.only:
            continue
        runs = [run() for _ in range(args.repeat)]
        search = statistics.median(r[0] for r in runs)
        total = statistics.median(r[1] for r in runs)
        print(f"{name:<16} {target:>8.1f} {search:>9.2f} {total:>8.2f}  {runs[0][2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
