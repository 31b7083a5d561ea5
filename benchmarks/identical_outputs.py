"""Record or compare every output file of every example (for refactors that must not change
behaviour).

Usage, from the repository root::

    python benchmarks/identical_outputs.py record /tmp/before     # on the old code
    python benchmarks/identical_outputs.py compare /tmp/before    # on the new code

``compare`` schedules the same examples with the same options, renders every output file and
reports each file whose bytes differ (exit 1) or that is missing; exit 0 when all are
identical. Every shipped example is scheduled, in both modes. The large ones (the 4096^3 GEMM,
the attention and FFN examples, the HBM chain) use the list scheduler (minutes otherwise); the
others run CP-SAT with a limit long enough that its deterministic budget (not the wall-clock
safety net, which a loaded machine can trip) ends every search. No output file holds a wall-clock
time, so every file is compared.
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
]

#: skipped by --quick
LARGE = {"matmul_gelu.json", "attention.json", "attention_tail.json", "ffn_layernorm.json",
         "elementwise_chain_hbm.json"}


def digests(quick: bool) -> dict[str, str]:
    """``"example/mode/file" -> sha256`` of every output file of every case."""
    out = {}
    for example, hw, method, limit in CASES:
        if quick and example in LARGE:
            continue
        for mode in ("flags", "timed"):
            res = compile_graph(ROOT / "examples" / example, hw, method=method, mode=mode,
                                time_limit=limit)
            files = render_outputs(res.schedule, res.program, res.plan, OUTPUT_FILES)
            for name, data in files.items():
                out[f"{example}/{mode}/{name}"] = hashlib.sha256(data).hexdigest()
            print(f"{example} {mode}: makespan {res.schedule.makespan}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("record", "compare"))
    ap.add_argument("dir", type=Path, help="where the digests are kept")
    ap.add_argument("--quick", action="store_true", help="skip the large examples")
    args = ap.parse_args()
    now = digests(args.quick)
    path = args.dir / "digests.txt"
    if args.action == "record":
        args.dir.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k} {v}\n" for k, v in sorted(now.items())))
        print(f"recorded {len(now)} files in {path}")
        return 0
    before = dict(line.split() for line in path.read_text().splitlines())
    bad = [k for k in sorted(before) if k in now and now[k] != before[k]]
    missing = [k for k in sorted(before)
               if k not in now and not (args.quick and k.split("/")[0] in LARGE)]
    for k in bad:
        print(f"DIFFERS {k}")
    for k in missing:
        print(f"MISSING {k}")
    print(f"{len(now) - len(bad)} of {len(now)} files identical")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
