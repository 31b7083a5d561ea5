"""What one static program saves over launching kernel after kernel (a benchmark, not a test).

Seed article §1.2: a kernel launch costs a fixed 3–10 µs, so a subgraph of 200 nodes pays
0.6–2 ms of launches for maybe 0.3 ms of work; graphs-and-split-cores.md §3 gives ≈ 20 µs of
device head cost per full-core launch on Atlas A2. Each graph is scheduled three ways by
:func:`staticsched.explore.dispatch.compare_dispatch` (every number below comes from the
scheduler and the presets' ``launch_overhead_us``, none is written here):

(a) the whole graph as one static program: its makespan plus one launch;
(b) each task as a kernel of its own, back to back: their makespans plus one launch each;
(c) the graph unfused (every matmul epilogue step a task), one kernel per node, back to back.

Graphs: the shipped ``matmul_bias_gelu`` and ``ffn_layernorm``; ``attention`` as a smaller
copy (the shipped [2, 8, 2048, 128] takes about 300 s per schedule on ascend-a2, most of it
building the 320,000-op program; ``--full`` schedules it as shipped); and the seed's
arithmetic case, a chain of 200 small elementwise tasks whose separate makespans add up to
about 300 µs on seed-davinci (the row count is chosen by scheduling one kernel of each op,
and the actual compute is printed).

Run from the repository root, with nothing else running (about 7 minutes on one core)::

    python benchmarks/dispatch.py
    python benchmarks/dispatch.py --presets seed-davinci --examples matmul_bias_gelu
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched.explore.dispatch import compare_dispatch, dispatch_table, kernel_graph  # noqa: E402
from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.pipeline import compile_graph  # noqa: E402

PRESETS = ("seed-davinci", "ascend-a2")
EXAMPLES = ("matmul_bias_gelu", "ffn_layernorm", "attention")
#: shapes of the smaller copies (tensor -> shape), used unless --full
SMALLER = {"attention": {name: [1, 8, 1024, 128] for name in ("q", "k", "v", "o")}}
#: the chain's ops, in turn (a scalar for those that take one)
CHAIN_OPS = (("gelu", None), ("relu", None), ("scale", 0.5), ("adds", 0.5))
CHAIN_COLS = 1024


def example(name: str, full: bool) -> tuple[str, TaskGraph]:
    data = json.loads((ROOT / "staticsched" / "examples" / f"{name}.json").read_text())
    if full or name not in SMALLER:
        return name, taskgraph_from_dict(data, name)
    data = copy.deepcopy(data)
    for tensor, shape in SMALLER[name].items():
        data["tensors"][tensor]["shape"] = shape
    shape = "x".join(map(str, next(iter(SMALLER[name].values()))))
    return f"{name} (smaller: {shape})", taskgraph_from_dict(data, name)


def chain(n: int, rows: int, cols: int = CHAIN_COLS) -> TaskGraph:
    """``n`` elementwise tasks in a row, ``x0 -> x1 -> ... -> xn``, each ``rows x cols``."""
    tensors = {f"x{i}": {"shape": [rows, cols]} for i in range(n + 1)}
    tasks = []
    for i in range(n):
        op, value = CHAIN_OPS[i % len(CHAIN_OPS)]
        t = {"id": f"t{i}", "type": "elementwise", "op": op, "inputs": [f"x{i}"], "out": f"x{i + 1}"}
        if value is not None:
            t["value"] = value
        tasks.append(t)
    return taskgraph_from_dict({"format": "staticsched.taskgraph", "version": 1, "tensors": tensors,
                                "tasks": tasks}, "chain")


def chain_rows(n: int, target_us: float, hw_name: str, method: str) -> tuple[int, float]:
    """The row count (a multiple of 16, at most 8192) whose ``n``-task chain's separate
    makespans add up closest to ``target_us`` on ``hw_name``, and that sum in µs: a bisection
    on the rows (the makespans grow with them), each step scheduling one kernel of each op of
    :data:`CHAIN_OPS`."""
    hw = load_hardware(hw_name)
    tried: dict[int, float] = {}

    def total(rows: int) -> float:
        if rows not in tried:
            g = chain(len(CHAIN_OPS), rows)
            spans = [compile_graph(kernel_graph(g, t.id), hw, method=method).schedule.makespan
                     for t in g.tasks]
            tried[rows] = hw.cycles_to_us(sum(spans[i % len(spans)] for i in range(n)))
        return tried[rows]

    lo, hi = 1, 512  # in units of 16 rows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if total(16 * mid) < target_us else (lo, mid)
    total(16 * lo), total(16 * hi)
    rows = min(tried, key=lambda r: (abs(tried[r] - target_us), r))
    return rows, tried[rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    ap.add_argument("--method", default="list", choices=("list", "cpsat"))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--full", action="store_true", help="schedule every example with its shipped shapes")
    ap.add_argument("--chain-tasks", type=int, default=200)
    ap.add_argument("--chain-us", type=float, default=300.0,
                    help="the chain's compute (sum of separate makespans) on seed-davinci, in µs")
    args = ap.parse_args(argv)
    start = time.monotonic()

    def log(line: str) -> None:
        print(f"  [{time.monotonic() - start:6.1f} s] {line}", file=sys.stderr, flush=True)

    graphs = [example(name, args.full) for name in args.examples]
    chain_graph = None
    if args.chain_tasks > 0:
        rows, est = chain_rows(args.chain_tasks, args.chain_us, "seed-davinci", args.method)
        chain_name = f"chain of {args.chain_tasks} elementwise [{rows}x{CHAIN_COLS}] (synthetic)"
        chain_graph = (chain_name, chain(args.chain_tasks, rows))
        log(f"chain: {rows} rows x {CHAIN_COLS} cols, {est:.1f} µs of separate makespans on seed-davinci")
        graphs.append(chain_graph)
    for preset in args.presets:
        t0 = time.monotonic()
        rows = []
        for name, tg in graphs:
            rows.append(compare_dispatch(tg, preset, method=args.method, name=name,
                                         time_limit=args.time_limit, progress=log))
        hw = load_hardware(preset)
        print(f"\n## {preset} (launch_overhead_us = {hw.launch_overhead_us:g}, clock {hw.clock_ghz:g} GHz, "
              f"method {args.method})\n")
        print("\n".join(dispatch_table(rows)))
        if chain_graph is not None:
            r = rows[-1]
            launches = r.n_tasks * r.launch_overhead_us
            print(f"\nchain: compute {r.kernel_compute_us:.1f} µs as {r.n_tasks} separate kernels "
                  f"(static program {r.static_compute_us:.1f} µs); launches {r.n_tasks} x "
                  f"{r.launch_overhead_us:g} µs = {launches:.0f} µs, {launches / r.kernel_compute_us:.2f}x "
                  f"the compute, {100 * launches / r.kernels_us:.0f}% of (b)")
        print(f"\n({time.monotonic() - t0:.0f} s for {preset})")
        sys.stdout.flush()
    print(f"\nwall time {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
