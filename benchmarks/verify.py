"""Benchmark the verifying executor on GEMM-shaped programs (a benchmark, not a test).

The programs come from :func:`staticsched.verify.samples.matmul_program`: the seed's
double-buffered MTE2 -> MTE1 -> CUBE -> FIXPIPE -> MTE3 pipeline with one flag per
cross-pipe dependency and credit flags for buffer reuse, timed by a nominal replay. The
headline row is one core of the seed's 4096^3 GEMM (base 128/128/128, 16 cores: 64 output
tiles x 32 K-steps = 10,368 micro-ops on core 0); the target is under 30 s.

Run from the repository root::

    python benchmarks/verify.py            # all rows
    python benchmarks/verify.py --quick    # skip the numeric rows

Wall times vary with machine load; the checks' results do not.
"""

from __future__ import annotations

import os

# Numeric replay issues thousands of small matmuls; on a loaded 2-core machine a
# multi-threaded BLAS spends ~400x longer synchronising threads than computing a 128^3 tile
# (measured: 15 ms vs 0.04 ms). Must be set before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from staticsched.model.hardware import load_hardware
from staticsched.verify import verify
from staticsched.verify.samples import matmul_program

HW = load_hardware("seed-davinci")


def row(name: str, program, **kw) -> dict:
    t0 = time.perf_counter()
    report = verify(program, HW, **kw)
    wall = time.perf_counter() - t0
    st = report.stat
    timings = dict(report.timings)
    return {
        "program": name,
        "options": " ".join(f"{k}={v}" for k, v in kw.items()) or "-",
        "micro_ops": st["micro_ops"],
        "instrs": st["instructions"],
        "makespan": st["replay_makespan"],
        "ok": "yes" if report.ok else f"no ({len(report.findings)})",
        "verify_s": f"{wall:.2f}",
        "replay_s": f"{timings.get('replay', 0):.2f}",
        "races_s": f"{timings.get('races', 0):.2f}",
        "jitter_s": f"{timings.get('jitter', 0):.2f}",
        "numeric_s": f"{timings.get('numeric', 0):.2f}",
    }


def print_table(rows: list[dict]) -> None:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the numeric rows")
    args = ap.parse_args(argv)

    rows = []
    t0 = time.perf_counter()
    one_core = matmul_program(HW, 4096, 4096, 4096, base=(128, 128, 128), cores=16, only_cores=[0])
    print(f"built 4096^3 core 0: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows.append(row("4096^3 core 0 of 16", one_core))
    rows.append(row("4096^3 core 0 of 16", one_core, jitter=4))

    t0 = time.perf_counter()
    chip = matmul_program(HW, 2048, 2048, 2048, base=(128, 128, 128), cores=16)
    print(f"built 2048^3 16 cores: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows.append(row("2048^3 16 cores", chip))

    if not args.quick:
        small = matmul_program(HW, 1024, 1024, 1024, base=(128, 128, 128), cores=16)
        rows.append(row("1024^3 16 cores", small, numeric=True))
        rows.append(row("1024^3 16 cores", small, numeric=True, jitter=2))
        rows.append(row("4096^3 core 0 of 16 (partial C)", one_core, numeric=True))
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
