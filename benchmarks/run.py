"""Benchmark table for the README: per example, ops, makespan, lower bound, gap, list-schedule
baseline, Cube and Vector utilisation, solve time and verify time.

Usage::

    python benchmarks/run.py            # every example, the large ones included (~10 minutes)
    python benchmarks/run.py --quick    # skip the large examples (the 4096^3 GEMM, attention, FFN)
    python benchmarks/run.py --only attention.json

Times are wall-clock on this machine and noisy; compare ratios within one run. The seed
article's memory-system arguments (fusion, L1 reuse, bandwidth, unequal work) have their own
table: ``python benchmarks/memory.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numeric replay: tiny matmuls, no threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched.api import as_opgraph, compile_graph  # noqa: E402
from staticsched.model.hardware import load_hardware  # noqa: E402
from staticsched.solver import solve  # noqa: E402
from staticsched.verify import verify  # noqa: E402

EXAMPLES = [
    ("double_buffer.json", "double-buffer-demo"),
    ("matmul_bias_gelu.json", "seed-davinci"),
    ("gemv_m1.json", "seed-davinci"),
    ("chain.json", "seed-davinci"),
    ("matmul_gelu.json", "seed-davinci"),
    ("attention.json", "seed-davinci"),
    ("attention_tail.json", "seed-davinci"),
    ("ffn_layernorm.json", "seed-davinci"),
    ("elementwise_chain_hbm.json", "seed-davinci-hbm"),
    ("unequal_mm1000_hbm.json", "seed-davinci-hbm"),
]

#: examples scheduled with the list scheduler alone (none at present)
LIST_ONLY: set[str] = set()

#: skipped by --quick (each takes a minute or more)
LARGE = {"matmul_gelu.json", "attention.json", "attention_tail.json", "ffn_layernorm.json"}


def utilisation(schedule, unit: str | None) -> float | None:
    """Busy fraction of ``unit`` over the makespan, mean over the cores that have ops."""
    if unit is None or not schedule.makespan:
        return None
    busy: dict[int, int] = {}
    for t in schedule.ops:
        busy.setdefault(t.core, 0)
        if t.unit == unit:
            busy[t.core] += t.end - t.start
    return sum(busy.values()) / len(busy) / schedule.makespan


def run(example: str, hw_name: str, *, time_limit: float, workers: int) -> dict:
    hw = load_hardware(hw_name)
    graph = as_opgraph(ROOT / "examples" / example, hw)
    t0 = time.perf_counter()
    baseline = solve(graph, hw, method="list")
    t_list = time.perf_counter() - t0
    t0 = time.perf_counter()
    method = "list" if example in LIST_ONLY else "cpsat"
    res = compile_graph(graph, hw, method=method, time_limit=time_limit, workers=workers)
    t_solve = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = verify(res.program, hw, jitter=2, numeric=bool(res.program.source))
    t_verify = time.perf_counter() - t0
    s = res.schedule
    err = report.stat.get("numeric_max_error")
    return {
        "example": example, "hw": hw_name, "ops": len(graph.ops), "makespan": s.makespan,
        "lower_bound": s.lower_bound, "gap": s.gap, "list": baseline.makespan,
        "vs_list": s.makespan / baseline.makespan - 1.0, "status": s.status,
        "cube": utilisation(s, hw.cube.unit if hw.cube else None),
        "vector": utilisation(s, hw.vector.unit if hw.vector else None),
        "t_list": t_list, "t_solve": t_solve, "t_verify": t_verify,
        "verified": ("clean" if report.ok else f"FAILED ({len(report.findings)})")
        + (f", max error {err:.2g}" if isinstance(err, float) and report.ok else ""),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the large examples")
    ap.add_argument("--only", nargs="*", help="these examples only")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rows = [
        run(ex, hw, time_limit=args.time_limit, workers=args.workers)
        for ex, hw in EXAMPLES
        if not (args.quick and ex in LARGE) and (not args.only or ex in args.only)
    ]
    head = ("| example | hw | ops | makespan | lower bound | gap | list baseline | vs list | "
            "status | Cube | Vector | list time | solve time | verify time | verify |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        print(
            f"| {r['example']} | {r['hw']} | {r['ops']} | {r['makespan']} | {r['lower_bound']} | "
            f"{r['gap']:.2%} | {r['list']} | {r['vs_list']:+.2%} | {r['status']} | "
            f"{_pct(r['cube'])} | {_pct(r['vector'])} | "
            f"{r['t_list']:.1f} s | {r['t_solve']:.1f} s | {r['t_verify']:.1f} s | {r['verified']} |",
            flush=True,
        )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


if __name__ == "__main__":
    main()
