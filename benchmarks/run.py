"""Benchmark table for the README: per shipped example, method and program mode, ops, the
program's makespan (what runs) against the solver's plan, the lower bound and gap, the list
baseline, whether the sync planner needed the baton plan, Cube and Vector utilisation, times and
the verifier's verdict.

Usage::

    python benchmarks/run.py                      # every example, cpsat and list, flags and timed
    python benchmarks/run.py --quick              # skip the large examples
    python benchmarks/run.py --only attention.json --methods list --modes flags

A flags program leaves shared links to the hardware and may need credits: its replayed
makespan can differ from the plan (``vs plan``). A timed program runs its plan exactly. Times
are wall-clock on this machine and noisy; compare ratios within one run. The seed article's
memory-system arguments (fusion, L1 reuse, bandwidth, unequal work) have their own table:
``python benchmarks/memory.py``.
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
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.solver import solve  # noqa: E402
from staticsched.verify import verify  # noqa: E402

#: every shipped example and the preset it is made for
EXAMPLES = [
    ("double_buffer.json", "double-buffer-demo"),
    ("matmul_bias_gelu.json", "seed-davinci"),
    ("gemv_m1.json", "seed-davinci"),
    ("chain.json", "seed-davinci"),
    ("awkward_gemm.json", "seed-davinci"),
    ("matmul_gelu.json", "seed-davinci"),
    ("matmul_gelu_unfused.json", "seed-davinci"),
    ("matmul_gelu_l1reuse.json", "seed-davinci"),
    ("attention.json", "seed-davinci"),
    ("attention_tail.json", "seed-davinci"),
    ("ffn_layernorm.json", "seed-davinci"),
    ("elementwise_chain_hbm.json", "seed-davinci-hbm"),
    ("unequal_mm1000_hbm.json", "seed-davinci-hbm"),
]

#: skipped by --quick (each takes a minute or more)
LARGE = {"matmul_gelu.json", "matmul_gelu_unfused.json", "matmul_gelu_l1reuse.json", "attention.json",
         "attention_tail.json", "ffn_layernorm.json"}
#: verified without numeric replay and jitter (minutes of NumPy at 10^5 ops)
BIG = {"matmul_gelu.json", "matmul_gelu_unfused.json", "matmul_gelu_l1reuse.json"}


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


def run(example: str, hw_name: str, method: str, mode: str, *, time_limit: float, workers: int,
        baseline: int) -> dict:
    hw = load_hardware(hw_name)
    graph = as_opgraph(ROOT / "examples" / example, hw)
    t0 = time.perf_counter()
    res = compile_graph(graph, hw, method=method, mode=mode, time_limit=time_limit, workers=workers)
    t_solve = time.perf_counter() - t0
    t0 = time.perf_counter()
    big = example in BIG
    jitter = 0 if big or mode == "timed" else 2
    report = verify(res.program, hw, jitter=jitter, numeric=bool(res.program.source) and not big)
    t_verify = time.perf_counter() - t0
    s = res.schedule
    err = report.stat.get("numeric_max_error")
    return {
        "example": example, "hw": hw_name, "method": method, "mode": mode, "ops": len(graph.ops),
        "makespan": s.makespan, "planned": s.plan_makespan, "vs_plan": s.makespan / s.plan_makespan - 1.0,
        "lower_bound": s.lower_bound, "gap": s.gap, "list": baseline,
        "vs_list": s.makespan / baseline - 1.0, "status": s.status, "stop": s.stop_reason,
        "baton": "yes" if res.plan.stats.fallback else "no", "credits": res.plan.stats.credits,
        "cube": utilisation(s, hw.cube.unit if hw.cube else None),
        "vector": utilisation(s, hw.vector.unit if hw.vector else None),
        "t_solve": t_solve, "t_verify": t_verify,
        "verified": ("clean" if report.ok else f"FAILED ({len(report.findings)})")
        + (f", max error {err:.2g}" if isinstance(err, float) and report.ok else "")
        + (f", {jitter} jittered" if jitter else ""),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the large examples")
    ap.add_argument("--only", nargs="*", help="these examples only")
    ap.add_argument("--methods", nargs="*", default=["cpsat", "list"], choices=("cpsat", "list"))
    ap.add_argument("--modes", nargs="*", default=["flags", "timed"], choices=("flags", "timed"))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    head = ("| example | hw | method | mode | ops | makespan | planned | vs plan | lower bound | gap | "
            "list baseline | vs list | status | stop | baton | credits | Cube | Vector | solve time | "
            "verify time | verify |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1), flush=True)
    for ex, hw in EXAMPLES:
        if (args.quick and ex in LARGE) or (args.only and ex not in args.only):
            continue
        graph = as_opgraph(ROOT / "examples" / ex, load_hardware(hw))
        baseline = solve(graph, load_hardware(hw), method="list").makespan
        for method in args.methods:
            for mode in args.modes:
                r = run(ex, hw, method, mode, time_limit=args.time_limit, workers=args.workers,
                        baseline=baseline)
                print(
                    f"| {r['example']} | {r['hw']} | {r['method']} | {r['mode']} | {r['ops']} | "
                    f"{r['makespan']} | {r['planned']} | {r['vs_plan']:+.2%} | {r['lower_bound']} | "
                    f"{r['gap']:.2%} | {r['list']} | {r['vs_list']:+.2%} | {r['status']} | {r['stop']} | "
                    f"{r['baton']} | {r['credits']} | {_pct(r['cube'])} | {_pct(r['vector'])} | "
                    f"{r['t_solve']:.1f} s | {r['t_verify']:.1f} s | {r['verified']} |",
                    flush=True,
                )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


if __name__ == "__main__":
    main()
