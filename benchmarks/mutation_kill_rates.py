"""Kill rates of the verifier's mutation classes on emitted programs (a measurement, not a test).

Every class of ``tests/mutations.py`` is applied with seeds ``0..SEEDS-1`` to programs that
``compile_graph(..., method="list")`` emits for the examples and a matmul -> elementwise chain,
each also lowered to an OpGraph with its source dropped (no numeric replay), in flags and timed
mode where the class applies. Every mutant's stated cycles are rewritten from its own replay
(``restate``), so that conformance alone cannot catch it. A mutant is *killed* when the
verifier reports the class's expected (check, kind); *caught* counts any finding but
conformance. ``reuse_id_early`` mutants whose reused id is provably legal (an independent
networkx oracle) are equivalent programs and are counted apart. Duplicate mutants (two seeds
picking the same target) count once.

Run from the repository root::

    python benchmarks/mutation_kill_rates.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import attrs  # noqa: E402
from mutations import (  # noqa: E402
    DATAFLOW_MUTATIONS,
    MLP,
    PROGRAM_MUTATIONS,
    NoCandidate,
    restate,
    reuse_is_legal,
)

from staticsched.api import compile_graph  # noqa: E402
from staticsched.frontend.lowering import lower  # noqa: E402
from staticsched.frontend.taskgraph import load_graph, load_taskgraph, taskgraph_from_dict  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.verify import verify  # noqa: E402


def programs() -> dict[tuple[str, str], tuple]:
    seed = load_hardware("seed-davinci")
    graphs = {"double_buffer": (load_graph(ROOT / "examples" / "double_buffer.json"), "double-buffer-demo")}
    for name in ("chain", "matmul_bias_gelu", "gemv_m1"):
        graphs[name] = (load_taskgraph(ROOT / "examples" / f"{name}.json"), seed)
    graphs["mlp"] = (taskgraph_from_dict(MLP), seed)
    for name in ("chain", "mlp"):
        tg = graphs[name][0]
        graphs[f"{name}_opgraph"] = (attrs.evolve(lower(tg, seed), source=""), seed)
    out = {}
    for name, (graph, hw) in graphs.items():
        for mode in ("flags", "timed"):
            program = compile_graph(graph, hw, method="list", mode=mode).program
            out[(name, mode)] = (program, load_hardware(hw))
    return out


def classes() -> dict[str, tuple]:
    """name -> (function, expected (check, kind), modes)."""
    out = {}
    for name, (fn, expected) in PROGRAM_MUTATIONS.items():
        out[name] = (fn, expected, ("flags", "timed") if name == "overlap_items" else ("flags",))
    out.update(DATAFLOW_MUTATIONS)
    return out


def measure(seeds: int) -> list[dict]:
    progs = programs()
    rows = []
    for name, (fn, (check, kind), modes) in sorted(classes().items()):
        applied = killed = caught = legal = 0
        where = set()
        instead: Counter = Counter()
        for (pname, mode), (program, hw) in progs.items():
            if mode not in modes:
                continue
            seen = set()
            for seed in range(seeds):
                try:
                    raw = fn(program, seed=seed)
                except NoCandidate:
                    break
                key = json.dumps(attrs.asdict(raw, recurse=True), sort_keys=True, default=str)
                if key in seen:
                    continue
                seen.add(key)
                if name == "reuse_id_early" and reuse_is_legal(program, raw):
                    legal += 1
                    continue
                report = verify(restate(raw, hw), hw)
                applied += 1
                where.add(pname)
                hit = any(f.check == check and (not kind or f.kind == kind) for f in report.findings)
                others = sorted({f"{f.check}/{f.kind}" for f in report.findings if f.check != "conformance"})
                killed += hit
                caught += bool(others)
                if not hit:
                    instead[", ".join(others) or "nothing"] += 1
        rows.append(
            {
                "class": name,
                "expected": f"{check}/{kind or '*'}",
                "modes": "+".join(modes),
                "programs": len(where),
                "mutants": applied,
                "killed": killed,
                "kill_rate": f"{100 * killed / applied:.0f}%" if applied else "-",
                "caught": caught,
                "legal": legal,
                "not killed: found as": "; ".join(f"{k} ({n})" for k, n in sorted(instead.items())) or "-",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="mutants tried per class and program")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = measure(args.seeds)
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    print(f"\n{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
