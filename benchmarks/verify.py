"""Benchmark the verifying executor on GEMM-shaped programs (a benchmark, not a test).

The headline row is the whole chip: the program ``staticsched.compile_graph`` emits for
``examples/matmul_gelu.json`` (the seed's 4096^3 GEMM + GELU) on ``seed-davinci`` with
``method="list"`` — 16 cores, 166,912 micro-ops, 569,472 instructions — verified with 3
jittered replays (issue 9.6 target: 10 s on the 2-core machine). Compiling it takes 1-2
minutes, so the emitted program is cached (``--cache``, keyed by the sources it depends on).

The other rows come from :func:`benchmarks.samples.matmul_program`: the seed's
double-buffered MTE2 -> MTE1 -> CUBE -> FIXPIPE -> MTE3 pipeline with one flag per
cross-pipe dependency and credit flags for buffer reuse, timed by a nominal replay (one core
of the 4096^3 GEMM: 64 output tiles x 32 K-steps = 10,368 micro-ops on core 0).

Run from the repository root::

    python benchmarks/verify.py            # all rows
    python benchmarks/verify.py --quick    # skip the numeric rows
    python benchmarks/verify.py --chip     # only the whole-chip rows

Wall times vary with machine load (``load`` is the 1-minute load average before each row);
the checks' results do not. ``cpu_s`` is the CPU time of this process and its workers.
"""

from __future__ import annotations

import os

# Numeric replay issues thousands of small matmuls; on a loaded 2-core machine a
# multi-threaded BLAS spends ~400x longer synchronising threads than computing a 128^3 tile
# (measured: 15 ms vs 0.04 ms). Must be set before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import hashlib
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.samples import matmul_program
from staticsched.model.hardware_toml import load_hardware
from staticsched.verify import verify

HW = load_hardware("seed-davinci")
ROOT = Path(__file__).resolve().parents[1]
CHIP_GRAPH = ROOT / "examples" / "matmul_gelu.json"


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def row(name: str, program, **kw) -> dict:
    load = _load()
    c0 = _cpu()
    t0 = time.perf_counter()
    report = verify(program, HW, **kw)
    wall = time.perf_counter() - t0
    cpu = _cpu() - c0
    st = report.stat
    timings = dict(report.timings)
    return {
        "program": name,
        "options": " ".join(f"{k}={v}" for k, v in kw.items()) or "-",
        "micro_ops": st["micro_ops"],
        "instrs": st["instructions"],
        "makespan": st["replay_makespan"],
        "ok": "yes" if report.ok else f"no ({len(report.findings)})",
        "load": load,
        "verify_s": f"{wall:.2f}",
        "cpu_s": f"{cpu:.2f}",
        **{f"{k}_s": f"{timings.get(k, 0):.2f}" for k in ("index", "replay", "races", "cost", "memory")},
        "jitter_s": f"{timings.get('jitter', 0):.2f}",
        "numeric_s": f"{timings.get('numeric', 0):.2f}",
    }


def chip_program(cache: Path):
    """The emitted whole-chip program, from the cache when the sources it depends on are
    unchanged (the model, solver and emitter code, the graph and the hardware preset)."""
    from staticsched.api import compile_graph
    from staticsched.emit import dumps_program_json
    from staticsched.formats.load import load_program

    digest = hashlib.sha256(CHIP_GRAPH.read_bytes())
    for sub in ("model", "solver", "emit", "presets"):
        for f in sorted((ROOT / "staticsched" / sub).rglob("*")):
            if f.is_file() and f.suffix in (".py", ".toml"):
                digest.update(f.read_bytes())
    path = cache / f"matmul_gelu-{digest.hexdigest()[:16]}.program.json"
    if not path.exists():
        t0 = time.perf_counter()
        res = compile_graph(CHIP_GRAPH, HW, method="list")
        print(f"compiled the chip program: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".partial")
        tmp.write_text(dumps_program_json(res.program))
        tmp.replace(path)
    t0 = time.perf_counter()
    program = load_program(path)
    print(f"loaded {path.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return program


def print_table(rows: list[dict]) -> None:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the numeric rows")
    ap.add_argument("--chip", action="store_true", help="only the whole-chip rows")
    ap.add_argument("--no-chip", action="store_true", help="skip the whole-chip rows")
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "staticsched",
        help="where the emitted whole-chip program is kept (default ~/.cache/staticsched)",
    )
    args = ap.parse_args(argv)

    rows = []
    if not args.no_chip:
        chip = chip_program(args.cache)
        rows.append(row("matmul_gelu 4096^3 chip (emitted)", chip, jitter=3))
        rows.append(row("matmul_gelu 4096^3 chip (emitted)", chip))
        del chip
    if args.chip:
        print_table(rows)
        return 0

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
