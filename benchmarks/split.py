"""The coupled core against the split chip, example by example (a benchmark, not a test).

Each shipped TaskGraph example is scheduled on ``seed-davinci`` (16 coupled cores, each with
Cube and Vector) and on ``ascend-a2`` (24 clusters of one AIC and two AIVs: the Cube and the
Vector on separate cores, results handed over through a GM workspace ring), verified with
numeric replay and 2 jittered replays, and reported side by side: makespan, lower bound,
gap, the mean active % of the Cube and of the Vector pipes over the cores that have them,
the workspace traffic (bytes FixPipe stores into the ring plus bytes the AIVs load from it)
and the cross-core flags. A task the split lowering does not handle yet gets its one-line
refusal instead of numbers.

Run from the repository root, with nothing else running::

    python benchmarks/split.py                              # the default examples, list schedules
    python benchmarks/split.py --method cpsat --time-limit 20
    python benchmarks/split.py --examples matmul_gelu       # the 4096^3 chip (minutes on a2)
    python benchmarks/split.py --all                        # every shipped TaskGraph (~1 hour)
    python benchmarks/split.py --all --presets ascend-a2    # the split chip's rows only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched.api import compile_graph  # noqa: E402
from staticsched.errors import StaticschedError  # noqa: E402
from staticsched.frontend.taskgraph import FORMAT as TASKGRAPH_FORMAT  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.model.opkinds import region_bytes  # noqa: E402
from staticsched.verify import verify  # noqa: E402

PRESETS = ("seed-davinci", "ascend-a2")
DEFAULT = ("matmul_bias_gelu", "chain", "gemv_m1", "matmul_vector_heavy", "ffn_layernorm", "attention")


def taskgraph_examples() -> list[str]:
    """Every shipped example that is a TaskGraph (OpGraphs name their units: they belong to one
    chip), by name."""
    return [p.stem for p in sorted((ROOT / "examples").glob("*.json"))
            if json.loads(p.read_text()).get("format") == TASKGRAPH_FORMAT]


def _active(compiled, engine: str) -> float:
    hw, sched = compiled.schedule.hw, compiled.schedule
    model = hw.cube if engine == "cube" else hw.vector
    cores = hw.engine_cores(engine)
    on = set(cores)
    busy = sum(t.end - t.start for t in sched.ops if t.unit == model.unit and t.core in on)
    return 100.0 * busy / (len(cores) * max(1, sched.makespan))


def _workspace_bytes(compiled) -> int:
    ws = {t.name: t for t in compiled.graph.tensors if t.workspace}
    total = 0
    for op in compiled.graph.ops:
        if op.kind in ("load", "store") and op.attr.get("tensor") in ws:
            total += region_bytes(op.attr["region"], ws[op.attr["tensor"]].dtype)
    return total


def row(example: str, preset: str, method: str, time_limit: float) -> dict:
    path = ROOT / "examples" / f"{example}.json"
    t0 = time.monotonic()
    try:
        compiled = compile_graph(path, preset, method=method, time_limit=time_limit)
    except StaticschedError as exc:
        return {"example": example, "hw": preset, "refused": exc.problems[0].split(": ", 1)[-1]}
    report = verify(compiled.program, load_hardware(preset), jitter=2, numeric=True)
    s = compiled.schedule
    cross = sum(1 for f in compiled.plan.flags if f.kind == "cross")
    gm = sum(1 for f in compiled.plan.flags if f.route == "gm")
    barriers = sum(1 for b in compiled.plan.stats.barriers if b.kept)
    return {
        "example": example, "hw": preset, "ops": len(compiled.graph.ops), "makespan": s.makespan,
        "bound": s.lower_bound, "gap": 100.0 * (s.makespan - s.lower_bound) / max(1, s.makespan),
        "cube": _active(compiled, "cube"), "vector": _active(compiled, "vector"),
        "workspace": _workspace_bytes(compiled), "cross": cross, "gm": gm, "barriers": barriers,
        "verified": "clean" if report.ok else f"{len(report.findings)} findings",
        "numeric": dict(report.stats).get("numeric", "-"), "seconds": time.monotonic() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", nargs="*", default=list(DEFAULT))
    ap.add_argument("--all", action="store_true", help="every shipped TaskGraph example")
    ap.add_argument("--method", default="list", choices=("list", "cpsat"))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--presets", nargs="*", default=list(PRESETS), choices=PRESETS)
    args = ap.parse_args(argv)
    print("| example | hw | ops | makespan | bound | gap | cube active | vector active | "
          "workspace | cross-core flags | GM words, barriers | verified | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for ex in taskgraph_examples() if args.all else args.examples:
        for preset in args.presets:
            r = row(ex, preset, args.method, args.time_limit)
            if "refused" in r:
                print(f"| {ex} | {preset} | - | - | - | - | - | - | - | - | - | "
                      f"not lowered: {r['refused']} | - |")
            else:
                print(f"| {ex} | {preset} | {r['ops']} | {r['makespan']} | {r['bound']} | {r['gap']:.2f}% | "
                      f"{r['cube']:.1f}% | {r['vector']:.1f}% | {r['workspace'] / 2**20:.2f} MiB | "
                      f"{r['cross']} | {r['gm']}, {r['barriers']} | {r['verified']}, "
                      f"numbers {r['numeric']} | {r['seconds']:.1f} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
