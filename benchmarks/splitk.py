"""Split-K against the best tiling without it, on both presets (a benchmark, not a test).

For ``examples/splitk_64x64x65536.json`` (a decode-like 64 x 64 x 65536 GEMM + gelu) on
``seed-davinci`` and ``ascend-a2``:

- ``tune --no-split-k``: the best tiling ``tune`` finds when every block's K loop stays on one
  core (list schedules);
- the example as shipped (its tiling splits K over 16 cores);
- ``tune`` with split-K searched (the default).

Each is verified with numeric replay and 3 jittered replays. The table gives the tiling,
makespan, lower bound, the speedup over the best tiling without split-K, the workspace bytes
and the reduction's busy cycles (the loads of the partials and the Vector ops adding them).

Run from the repository root, with nothing else running::

    python benchmarks/splitk.py
    python benchmarks/splitk.py --presets seed-davinci
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched import tune  # noqa: E402
from staticsched.api import compile_graph  # noqa: E402
from staticsched.emit.workspace_summary import reduction_ops  # noqa: E402
from staticsched.frontend.taskgraph import load_graph  # noqa: E402
from staticsched.model.hardware import DTYPE_BYTES  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.tasks.matmul.splitk import PARTIALS  # noqa: E402
from staticsched.tasks.space import tiling_label, used_tiling  # noqa: E402
from staticsched.verify import verify  # noqa: E402

EXAMPLE = ROOT / "examples" / "splitk_64x64x65536.json"
PRESETS = ("seed-davinci", "ascend-a2")


def _reduction_cycles(compiled) -> int:
    """Busy cycles of the split-K reductions (the summary's definition)."""
    when = {t.id: t.end - t.start for t in compiled.schedule.ops}
    return sum(when[op.id] for t in compiled.graph.tensors if t.workspace and t.name.endswith(PARTIALS)
               for op in reduction_ops(compiled.graph, t.name)[0])


def _row(what: str, compiled, tg, preset: str, seconds: float) -> dict:
    hw = load_hardware(preset)
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    ws = sum(t.shape[0] * t.shape[1] * DTYPE_BYTES[t.dtype] for t in compiled.graph.tensors if t.workspace)
    return {"what": what, "hw": preset, "tiling": tiling_label(used_tiling(tg.tasks[0], hw)),
            "makespan": compiled.schedule.makespan, "bound": compiled.schedule.lower_bound,
            "workspace": ws, "reduction": _reduction_cycles(compiled),
            "verified": "clean" if report.ok else f"{len(report.findings)} findings",
            "numeric": dict(report.stats).get("numeric", "-"), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    args = ap.parse_args(argv)
    print("| hw | schedule | tiling | makespan | bound | speedup | workspace | reduction busy | "
          "verified | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for preset in args.presets:
        rows = []
        t0 = time.monotonic()
        plain = tune(EXAMPLE, preset, method="list", split_k=False)
        rows.append(_row("tune --no-split-k", plain.best, plain.graph, preset, time.monotonic() - t0))
        t0 = time.monotonic()
        shipped = load_graph(EXAMPLE)
        rows.append(_row("example as shipped", compile_graph(shipped, preset), shipped, preset,
                         time.monotonic() - t0))
        t0 = time.monotonic()
        searched = tune(EXAMPLE, preset, method="list")
        rows.append(_row("tune (split-K searched)", searched.best, searched.graph, preset,
                         time.monotonic() - t0))
        base = rows[0]["makespan"]
        for r in rows:
            print(f"| {r['hw']} | {r['what']} | {r['tiling']} | {r['makespan']} | {r['bound']} | "
                  f"{base / r['makespan']:.2f}x | {r['workspace'] / 2**20:.2f} MiB | {r['reduction']} | "
                  f"{r['verified']}, numbers {r['numeric']} | {r['seconds']:.1f} |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
