"""Solver benchmark: makespan against the lower bound and the list-schedule baseline.

Run from the repository root::

    python benchmarks/solver.py                 # all instances, 60 s limit each
    python benchmarks/solver.py --quick         # small instances only
    python benchmarks/solver.py --only gemm --time-limit 120 --workers 2

Prints one table row per instance: ops, makespan, lower bound, gap, list makespan, CP-SAT
makespan (after LNS for large cores), status, what stopped the search, and wall time. With
``--repeat`` each instance is solved twice and the row says whether the timetables are
byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched.model.hardware import Hardware, load_hardware  # noqa: E402
from staticsched.model.opgraph import Item, Op, OpGraph, load_opgraph  # noqa: E402
from staticsched.model.synthetic import tile_pipeline  # noqa: E402
from staticsched.solver import solve  # noqa: E402


def double_buffer() -> tuple[OpGraph, Hardware]:
    return load_opgraph(ROOT / "examples" / "double_buffer.json"), load_hardware("double-buffer-demo")


def gemm_opgraph(hw: Hardware, cores: int, blocks: int = 64, ksteps: int = 32) -> OpGraph:
    """The seed's 4096^3 GEMM per core, built directly (the shape lowering produces): per block
    ``ksteps`` x (loadA, loadB: MTE2 GM->L1 32 KiB, 169; moveA: MTE1 L1->L0A, 72; moveB:
    MTE1 L1->L0B, 136; mmad: CUBE 512 into a 64 KiB L0C item), then fixpipe (L0C->UB, 272),
    gelu (VECTOR on UB, 1032) and store (MTE3 UB->GM, 288)."""
    items, ops = [], []
    for c in range(cores):
        for b in range(blocks):
            p = f"c{c}.b{b}"
            items += [Item(f"{p}.l0c", "L0C", 65536), Item(f"{p}.ub", "UB", 32768)]
            for k in range(ksteps):
                q = f"{p}.k{k}"
                items += [
                    Item(f"{q}.{n}", s, 32768)
                    for n, s in (("l1a", "L1"), ("l1b", "L1"), ("l0a", "L0A"), ("l0b", "L0B"))
                ]
                ops += [
                    Op(f"{q}.load_a", "MTE2", 169, c, writes=[f"{q}.l1a"]),
                    Op(f"{q}.load_b", "MTE2", 169, c, writes=[f"{q}.l1b"]),
                    Op(f"{q}.move_a", "MTE1", 72, c, reads=[f"{q}.l1a"], writes=[f"{q}.l0a"]),
                    Op(f"{q}.move_b", "MTE1", 136, c, reads=[f"{q}.l1b"], writes=[f"{q}.l0b"]),
                    Op(
                        f"{q}.mmad",
                        "CUBE",
                        512,
                        c,
                        reads=[f"{q}.l0a", f"{q}.l0b", *([f"{p}.l0c"] if k else [])],
                        writes=[f"{p}.l0c"],
                    ),
                ]
            ops += [
                Op(f"{p}.fixpipe", "FIXPIPE", 272, c, reads=[f"{p}.l0c"], writes=[f"{p}.ub"]),
                Op(f"{p}.gelu", "VECTOR", 1032, c, reads=[f"{p}.ub"], writes=[f"{p}.ub"]),
                Op(f"{p}.store", "MTE3", 288, c, reads=[f"{p}.ub"]),
            ]
    return OpGraph(items, ops)


def matmul_gelu(cores: int | None = None) -> tuple[OpGraph, Hardware]:
    """``examples/matmul_gelu.json`` lowered on ``seed-davinci`` (all 16 cores), or the direct
    GEMM build on ``cores`` cores when given (or when lowering is unavailable)."""
    hw = load_hardware("seed-davinci")
    if cores is None:
        try:
            from staticsched.model.lowering import lower
            from staticsched.model.taskgraph import load_graph
        except ImportError:
            cores = hw.cores
        else:
            return lower(load_graph(ROOT / "examples" / "matmul_gelu.json"), hw), hw
    return gemm_opgraph(hw, cores), hw


def lowered(example: str) -> tuple[OpGraph, Hardware]:
    """An example TaskGraph lowered on ``seed-davinci``."""
    from staticsched.model.lowering import lower
    from staticsched.model.taskgraph import load_graph

    hw = load_hardware("seed-davinci")
    return lower(load_graph(ROOT / "examples" / example), hw), hw


INSTANCES: dict[str, tuple[Callable[[], tuple[OpGraph, Hardware]], bool]] = {
    # name: (builder, part of --quick)
    "double_buffer": (double_buffer, True),
    "chain": (lambda: lowered("chain.json"), True),
    "matmul_bias": (lambda: lowered("matmul_bias_gelu.json"), True),
    "gemv_m1": (lambda: lowered("gemv_m1.json"), False),
    "pipeline_100": (lambda: tile_pipeline(100), True),
    "pipeline_1000": (lambda: tile_pipeline(1000), False),
    "pipeline_5000": (lambda: tile_pipeline(5000), False),
    "gemm_1core": (lambda: matmul_gelu(cores=1), False),
    "matmul_gelu": (matmul_gelu, False),
}


def fingerprint(schedule) -> str:
    data = json.dumps([[attrs.astuple(o) for o in schedule.ops], [attrs.astuple(p) for p in schedule.items]])
    return hashlib.sha256(data.encode()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="small instances only")
    ap.add_argument("--only", nargs="*", help=f"instances to run ({', '.join(INSTANCES)})")
    ap.add_argument("--repeat", action="store_true", help="solve twice and compare the timetables")
    args = ap.parse_args(argv)
    names = args.only or [n for n, (_, quick) in INSTANCES.items() if quick or not args.quick]
    head = (
        f"{'instance':<14} {'ops':>7} {'makespan':>9} {'lower':>9} {'gap':>8} {'list':>9} "
        f"{'cp-sat':>9} {'status':<9} {'stop':<19} {'time':>7}"
    )
    print(head + ("  same" if args.repeat else ""))
    print("-" * len(head))
    for name in names:
        graph, hw = INSTANCES[name][0]()
        graph.check(hw)
        t0 = time.monotonic()
        s = solve(graph, hw, time_limit=args.time_limit, seed=args.seed, workers=args.workers)
        wall = time.monotonic() - t0
        problems = s.verify()
        stats = dict(s.stats)
        cp = stats["cpsat_makespan"]
        row = (
            f"{name:<14} {len(graph.ops):>7} {s.makespan:>9} {s.lower_bound:>9} {100 * s.gap:>7.3f}% "
            f"{stats['list_makespan']:>9} {cp if cp >= 0 else '-':>9} {s.status:<9} "
            f"{s.stop_reason:<19} {wall:>6.1f}s"
        )
        if args.repeat:
            again = solve(graph, hw, time_limit=args.time_limit, seed=args.seed, workers=args.workers)
            row += "  " + ("yes" if fingerprint(again) == fingerprint(s) else "NO")
        print(row + ("" if not problems else f"  INVALID: {problems[0]}"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
