"""What the per-op value objects cost (a benchmark, not a test): how long making every object
of each of the pipeline's per-op value types takes, next to the phases that make them.

The scale issue asked for columns instead of per-op Python objects in the hot paths. The
solver, the sync planner and the verifier already work on per-field lists of indices; the
objects left are the value types the phases hand each other and the API returns: the
OpGraph's ops, items and edges, the timetable's rows, placements and events, the sync plan's
flags, the program's instructions and items. This script schedules a graph, then makes every
one of those objects again from its own fields (the cyclic collector paused, as the phases
pause it) and prints, per type, how many there are and the seconds that took: the most that
replacing them by columns could save, before any other work.

Run from the repository root::

    python benchmarks/object_budget.py examples/matmul_gelu.json --hw seed-davinci

``--method cpsat`` schedules as the CLI's default does (the objects are the same kinds and
about as many); ``--repeat`` keeps each type's fastest of that many rounds.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import attrs  # noqa: E402

from staticsched.api import compile_graph  # noqa: E402
from staticsched.progress import Progress  # noqa: E402


def remake_seconds(objects: Iterable[object], repeat: int) -> tuple[int, float]:
    """How many distinct objects there are, and the fastest of ``repeat`` rounds of making
    each again from its init fields (objects shared by several places count once)."""
    distinct = list({id(o): o for o in objects}.values())
    if not distinct:
        return 0, 0.0
    cls = type(distinct[0])
    names = [f.name for f in attrs.fields(cls) if f.init]  # pyright: ignore[reportArgumentType]
    args = [tuple(getattr(o, n) for n in names) for o in distinct]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for a in args:
            cls(*a)
        best = min(best, time.perf_counter() - t0)
    return len(distinct), best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--hw", default="seed-davinci")
    ap.add_argument("--method", default="list", choices=("list", "cpsat"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    progress = Progress(enabled=False)
    t0 = time.perf_counter()
    c = compile_graph(args.graph, args.hw, method=args.method, progress=progress)
    total = time.perf_counter() - t0
    g, s, p, plan = c.graph, c.schedule, c.program, c.plan
    instrs = [i for st in p.streams for i in st.instrs]
    kinds = [
        ("Op", "lower", g.ops),
        ("Item", "lower", g.items),
        ("Edge", "lower", g.edges),
        ("ScheduledOp", "solve", s.ops),
        ("Placement", "solve", s.items),
        ("Flag", "plan sync", plan.flags),
        ("SyncEvent", "build program", s.events),
        ("Instr", "build program", instrs),
        ("ProgItem", "build program", p.items),
    ]
    enabled = gc.isenabled()
    gc.disable()
    try:
        rows = [(name, phase, *remake_seconds(objs, args.repeat)) for name, phase, objs in kinds]
    finally:
        if enabled:
            gc.enable()
    print(f"## `{args.graph}` on `{args.hw}`, method {args.method}: {len(g.ops):,} micro-ops, "
          f"{len(instrs):,} instructions\n")
    print("| type | made in | objects | seconds to make them all |")
    print("|---|---|---|---|")
    for name, phase, count, seconds in rows:
        print(f"| {name} | {phase} | {count:,} | {seconds:.3f} |")
    made = sum(r[3] for r in rows)
    print(f"| **all** | | {sum(r[2] for r in rows):,} | **{made:.2f}** |")
    print()
    print("| phase | wall s |")
    print("|---|---|")
    for name, seconds in progress.timings:
        print(f"| {name} | {seconds:.2f} |")
    print(f"| **compile_graph** | **{total:.2f}** |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
