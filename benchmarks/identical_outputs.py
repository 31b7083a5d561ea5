"""Record or compare every output file of every example (for refactors that must not change
behaviour).

Usage, from the repository root::

    python benchmarks/identical_outputs.py record /tmp/before     # on the old code
    python benchmarks/identical_outputs.py compare /tmp/before    # on the new code

``compare`` schedules the same examples with the same options, renders every output file and
reports each file whose bytes differ (exit 1) or that is missing; exit 0 when all are
identical. Every shipped example is scheduled, in both modes. The large ones (the 4096^3
GEMMs, the attention and FFN examples, the HBM chain) use the list scheduler (minutes
otherwise); the others run CP-SAT. Every search must end at its deterministic budget, never at
the wall-clock safety net (which a loaded machine trips, and then the result depends on the
load): the script switches the net off (:func:`no_wall_net`). No output file holds a
wall-clock time, so every file is compared. ``--only`` restricts the run to some examples.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched.api import compile_graph  # noqa: E402
from staticsched.emit import OUTPUT_FILES, render_outputs  # noqa: E402
from staticsched.solver.budget import Clock  # noqa: E402

#: (example file, hardware, method, time limit)
CASES = [
    ("double_buffer.json", "double-buffer-demo", "cpsat", 60.0),
    ("matmul_bias_gelu.json", "seed-davinci", "cpsat", 60.0),
    ("chain.json", "seed-davinci", "cpsat", 60.0),
    ("gemv_m1.json", "seed-davinci", "cpsat", 60.0),
    ("matmul_gelu.json", "seed-davinci", "list", 5.0),
    ("attention.json", "seed-davinci", "list", 5.0),
    ("attention_tail.json", "seed-davinci", "list", 5.0),
    ("ffn_layernorm.json", "seed-davinci", "list", 5.0),
    ("elementwise_chain_hbm.json", "seed-davinci-hbm", "list", 5.0),
    ("awkward_gemm.json", "seed-davinci", "cpsat", 10.0),
    ("unequal_mm1000_hbm.json", "seed-davinci-hbm", "cpsat", 10.0),
    ("matmul_gelu_l1reuse.json", "seed-davinci", "list", 5.0),
    ("matmul_gelu_unfused.json", "seed-davinci", "list", 5.0),
]

#: skipped by --quick
LARGE = {"matmul_gelu.json", "attention.json", "attention_tail.json", "ffn_layernorm.json",
         "elementwise_chain_hbm.json", "matmul_gelu_l1reuse.json", "matmul_gelu_unfused.json"}


def no_wall_net() -> None:
    """Searches in deterministic mode see no wall-clock deadline (what an idle machine gives):
    only their deterministic budgets end them, so the files do not depend on the load."""
    remaining, expired = Clock.remaining, Clock.expired

    def _remaining(self: Clock) -> float:
        return 1e9 if self.deterministic else remaining(self)

    def _expired(self: Clock) -> bool:
        return False if self.deterministic else expired(self)

    Clock.remaining, Clock.expired = _remaining, _expired  # type: ignore[method-assign]


def digests(quick: bool, only: list[str] | None = None) -> dict[str, str]:
    """``"example/mode/file" -> sha256`` of every output file of every case."""
    no_wall_net()
    out = {}
    for example, hw, method, limit in CASES:
        if (quick and example in LARGE) or (only and example not in only):
            continue
        for mode in ("flags", "timed"):
            # gap 0: the search runs as it did before the gap limit existed (the default
            # stops earlier on purpose, which would change outputs)
            res = compile_graph(ROOT / "examples" / example, hw, method=method, mode=mode,
                                time_limit=limit, gap=0.0)
            files = render_outputs(res.schedule, res.program, res.plan, OUTPUT_FILES)
            for name, data in files.items():
                out[f"{example}/{mode}/{name}"] = hashlib.sha256(data).hexdigest()
            s = res.schedule
            print(f"{example} {mode}: makespan {s.makespan} ({s.status}, {s.stop_reason})", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("record", "compare"))
    ap.add_argument("dir", type=Path, help="where the digests are kept")
    ap.add_argument("--quick", action="store_true", help="skip the large examples")
    ap.add_argument("--only", nargs="+", metavar="EXAMPLE", help="only these examples (file names)")
    args = ap.parse_args()
    now = digests(args.quick, args.only)
    path = args.dir / "digests.txt"
    if args.action == "record":
        args.dir.mkdir(parents=True, exist_ok=True)
        kept = {}
        if args.only and path.exists():  # re-recording some examples keeps the others
            kept = dict(line.split() for line in path.read_text().splitlines())
            kept = {k: v for k, v in kept.items() if k.split("/")[0] not in args.only}
        path.write_text("".join(f"{k} {v}\n" for k, v in sorted({**kept, **now}.items())))
        print(f"recorded {len(now)} files in {path}")
        return 0
    before = dict(line.split() for line in path.read_text().splitlines())
    skipped = {k.split("/")[0] for k in before} - {k.split("/")[0] for k in now}
    bad = [k for k in sorted(before) if k in now and now[k] != before[k]]
    missing = [k for k in sorted(before) if k not in now
               and not ((args.quick or args.only) and k.split("/")[0] in skipped)]
    for k in bad:
        print(f"DIFFERS {k}")
    for k in missing:
        print(f"MISSING {k}")
    print(f"{len(now) - len(bad)} of {len(now)} files identical")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
