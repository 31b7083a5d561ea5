"""How the whole pipeline scales with the number of micro-ops (a benchmark, not a test).

GEMM + GELU (``matmul`` with a GELU epilogue, ``transpose_b``) and causal attention on
``seed-davinci``, at sizes from about 10K to about 1M micro-ops, each run end to end with
``method="list"`` (so no search time limit flattens the curve): lower, solve, plan sync,
build program, verify (numeric replay and 3 jittered replays) and write (the default files).
Every case runs in a fresh process, so its peak RSS is its own.

The table gives, per case, the micro-ops, each phase's wall seconds, the total and the peak
RSS; then, per workload and phase, the exponent ``b`` of ``seconds ~ ops^b`` fitted (least
squares on logs) over the cases with at least ``--fit-from`` ops (100K: below that, fixed
costs dominate). ``--plot PATH`` draws the log-log plot (matplotlib).

``--repeat N`` runs every case N times, in N rounds of all the cases (so a slow spell of
the machine falls on every size, not on one case's runs), and reports per case and phase
the fastest of its N runs, the largest peak RSS and the total of the fastest phases. On a
2-core machine one phase of one case varies by 20-40% between runs, enough to move a fitted
exponent by 0.1; the fastest of several runs is the run least disturbed.

Run from the repository root, with nothing else running::

    python benchmarks/scale.py                     # every size (about an hour on 2 cores)
    python benchmarks/scale.py --max-ops 200000    # the small ones
    python benchmarks/scale.py --plot benchmarks/scale.png
    python benchmarks/scale.py --repeat 2 --plot benchmarks/scale.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHASES = ("lower", "solve", "plan sync", "build program", "verify", "write")

#: (workload, size label, TaskGraph parameters); the op counts are the lowering's
CASES = [
    ("gemm_gelu", "2048^3", (2048, 2048, 2048)),
    ("gemm_gelu", "4096^3", (4096, 4096, 4096)),
    ("gemm_gelu", "4096^2x8192", (4096, 4096, 8192)),
    ("gemm_gelu", "8192^2x4096", (8192, 8192, 4096)),
    ("gemm_gelu", "8192^2x6144", (8192, 8192, 6144)),
    ("attention", "1x8x1024", (1, 8, 1024)),
    ("attention", "1x16x2048", (1, 16, 2048)),
    ("attention", "2x16x2048", (2, 16, 2048)),
    ("attention", "2x8x4096", (2, 8, 4096)),
    ("attention", "4x8x4096", (4, 8, 4096)),
]


def taskgraph(workload: str, dims: tuple[int, int, int]) -> dict:
    if workload == "gemm_gelu":
        m, n, k = dims
        return {"format": "staticsched.taskgraph", "version": 1,
                "tensors": {"x": {"shape": [m, k]}, "w": {"shape": [n, k]}, "y": {"shape": [m, n]}},
                "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                           "transpose_b": True, "epilogue": [{"op": "gelu"}]}]}
    b, h, s = dims
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {t: {"shape": [b, h, s, 128]} for t in ("q", "k", "v", "o")},
            "tasks": [{"id": "attn", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o",
                       "causal": True}]}


def run_case(workload: str, dims: tuple[int, int, int]) -> dict:
    """One case in this process: the phases' seconds, the op count, the peak RSS."""
    from staticsched.api import compile_graph
    from staticsched.emit import choose_outputs, write_outputs
    from staticsched.frontend.taskgraph import taskgraph_from_dict
    from staticsched.model.hardware_toml import load_hardware
    from staticsched.progress import silent
    from staticsched.verify import verify

    hw = load_hardware("seed-davinci")
    tg = taskgraph_from_dict(taskgraph(workload, dims))
    rep = silent()
    res = compile_graph(tg, hw, method="list", progress=rep)
    seconds = dict(rep.timings)
    t0 = time.monotonic()
    report = verify(res.program, hw, jitter=3, numeric=True)
    seconds["verify"] = time.monotonic() - t0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        write_outputs(Path(tmp) / "out", res.schedule, res.program, res.plan,
                      outputs=choose_outputs(ops=len(res.schedule.ops)))
    seconds["write"] = time.monotonic() - t0
    return {"ops": len(res.schedule.ops), "seconds": seconds, "ok": report.ok,
            "makespan": res.schedule.makespan,
            "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def _header() -> None:
    print("| workload | size | ops | " + " | ".join(PHASES) + " | total s | peak RSS GiB | verified |")
    print("|---|---|---|" + "---|" * len(PHASES) + "---|---|---|")


def _row(workload: str, label: str, r: dict) -> None:
    sec = r["seconds"]
    cells = " | ".join(f"{sec.get(p, 0.0):.1f}" for p in PHASES)
    print(f"| {workload} | {label} | {r['ops']:,} | {cells} | {sum(sec.values()):.1f} | "
          f"{r['rss_gib']:.2f} | {'clean' if r['ok'] else 'FAILED'} |", flush=True)


def _fastest(runs: list[dict]) -> dict:
    """One case's runs as one: each phase's fastest, the largest peak RSS, clean only if every
    run was (the op count and makespan are the same in every run: the runs are deterministic)."""
    return {"ops": runs[0]["ops"], "makespan": runs[0]["makespan"],
            "seconds": {p: min(r["seconds"].get(p, 0.0) for r in runs) for p in PHASES},
            "ok": all(r["ok"] for r in runs), "rss_gib": max(r["rss_gib"] for r in runs)}


def fit(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(seconds) against log(ops)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(s, 1e-3)) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--max-ops", type=int, default=None, help="skip cases above this many ops")
    ap.add_argument("--fit-from", type=int, default=100_000)
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every case N times, in rounds; report each phase's fastest run")
    ap.add_argument("--case", nargs=2, metavar=("WORKLOAD", "DIMS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:  # the child process of one case
        dims = tuple(int(d) for d in args.case[1].split(","))
        print(json.dumps(run_case(args.case[0], dims)))  # type: ignore[arg-type]
        return 0
    from staticsched.frontend.lowering import estimate_ops, plan_tasks
    from staticsched.frontend.taskgraph import taskgraph_from_dict
    from staticsched.model.hardware_toml import load_hardware

    if args.repeat < 1:
        ap.error(f"--repeat must be >= 1, got {args.repeat}")
    hw = load_hardware("seed-davinci")
    cases = [(w, label, dims) for w, label, dims in CASES
             if args.max_ops is None
             or estimate_ops(plan_tasks(taskgraph_from_dict(taskgraph(w, dims)), hw)) <= args.max_ops]
    runs: dict[tuple[str, str], list[dict]] = {(w, label): [] for w, label, _ in cases}
    for rnd in range(args.repeat):
        if args.repeat > 1:
            print(f"round {rnd + 1} of {args.repeat}")
        _header()
        for workload, label, dims in cases:
            proc = subprocess.run(
                [sys.executable, __file__, "--case", workload, ",".join(map(str, dims))],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode:
                print(f"| {workload} | {label} | | failed: {proc.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[(workload, label)].append(r)
            _row(workload, label, r)
        print()
    rows = []
    for workload, label, _ in cases:
        if runs[(workload, label)]:
            rows.append((workload, label, _fastest(runs[(workload, label)])))
    if args.repeat > 1:
        print(f"fastest of {args.repeat} runs per case and phase (peak RSS: the largest):")
        _header()
        for workload, label, r in rows:
            _row(workload, label, r)
        print()
    print(f"exponent b of seconds ~ ops^b, fitted over cases with >= {args.fit_from:,} ops:")
    print()
    print("| workload | " + " | ".join(PHASES) + " | total |")
    print("|---|" + "---|" * (len(PHASES) + 1))
    for workload in dict.fromkeys(w for w, _, _ in rows):
        mine = [r for w, _, r in rows if w == workload and r["ops"] >= args.fit_from]
        if len(mine) < 2:
            continue
        cells = [fit([(r["ops"], r["seconds"].get(p, 0.0)) for r in mine]) for p in PHASES]
        total = fit([(r["ops"], sum(r["seconds"].values())) for r in mine])
        print(f"| {workload} | " + " | ".join(f"{b:.2f}" for b in cells) + f" | {total:.2f} |")
    if args.plot is not None and rows:
        _plot(rows, args.plot)
    return 0


def _plot(rows: list[tuple[str, str, dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, workload in zip(axes, ("gemm_gelu", "attention"), strict=True):
        mine = [r for w, _, r in rows if w == workload]
        if not mine:
            continue
        ops = [r["ops"] for r in mine]
        for p in PHASES:
            ax.loglog(ops, [max(r["seconds"].get(p, 0.0), 1e-2) for r in mine], marker="o", label=p)
        ax.loglog(ops, [sum(r["seconds"].values()) for r in mine], marker="s", color="k", label="total")
        ax.set_title(f"{workload} on seed-davinci (--method list)")
        ax.set_xlabel("micro-ops")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("wall seconds")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
