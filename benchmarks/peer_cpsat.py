"""The peer: a plain CP-SAT model of an OpGraph, to compare staticsched against.

Usage, from the repository root::

    python benchmarks/peer_cpsat.py examples/matmul_bias_gelu.json --hw seed-davinci --time-limit 30
    python benchmarks/peer_cpsat.py --jobshop ft10 --time-limit 60

The model is what anyone would write first, in about forty lines (:func:`build_peer_model`):

* one fixed-size interval per op;
* ``AddNoOverlap`` per (core, unit);
* ``start[dst] >= end[src] + latency`` for every edge of ``graph.edges`` (explicit deps and
  the same-item RAW/WAR/WAW edges), with the latency :func:`staticsched.model.deps.edge_latency`
  gives;
* ``AddCumulative`` per bounded (core, space) over item lifetimes (first access start to last
  access end), each item demanding its bytes;
* minimise the makespan.

No hint, no decomposition, no lower bound of its own, one worker by default, stopped by the
wall clock (``max_time_in_seconds``). It relaxes what staticsched must honour: addresses
(fragmentation, alignment, the flag-latency gap before reused bytes) and event-id budgets, so
its makespan may be lower than any program can achieve; on job shops (no memory, no flags) it
is exact, and :func:`main` with ``--check`` feeds its results back against the known optima.
It is a peer to compare against, not a verifier of staticsched.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import attrs
from ortools.sat.python import cp_model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from staticsched.model.deps import edge_latency  # noqa: E402
from staticsched.model.hardware import Hardware  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.model.opgraph import OpGraph  # noqa: E402


@attrs.frozen
class PeerResult:
    """What the peer found: ``makespan`` (-1 when it found nothing), its ``bound``, CP-SAT's
    ``status`` (``OPTIMAL``, ``FEASIBLE``, ``INFEASIBLE``, ``UNKNOWN``) and the wall time of
    the search and of building the model."""

    makespan: int
    bound: int
    status: str
    seconds: float
    build_seconds: float
    starts: tuple[int, ...] = attrs.field(converter=tuple, default=())


def build_peer_model(
    graph: OpGraph, hw: Hardware
) -> tuple[cp_model.CpModel, list[cp_model.IntVar], cp_model.IntVar]:
    """The plain model of ``graph`` on ``hw``: ``(model, starts, makespan)``."""
    model = cp_model.CpModel()
    ops = graph.ops
    edges = [(graph.op_index[e.src], graph.op_index[e.dst], edge_latency(graph, hw, e)) for e in graph.edges]
    # a serial schedule with the largest latency between consecutive ops fits below this
    horizon = sum(op.duration for op in ops) + len(ops) * max([0, *(lat for _, _, lat in edges)])
    start = [model.new_int_var(0, horizon, f"s{i}") for i in range(len(ops))]
    end = [start[i] + op.duration for i, op in enumerate(ops)]
    interval = [
        model.new_fixed_size_interval_var(start[i], op.duration, f"op{i}") for i, op in enumerate(ops)
    ]
    by_pipe: dict[tuple[int, str], list[int]] = {}
    for i, op in enumerate(ops):
        by_pipe.setdefault((op.core, op.unit), []).append(i)
    for key in sorted(by_pipe):
        model.add_no_overlap([interval[i] for i in by_pipe[key]])
    for a, b, lat in edges:
        model.add(start[b] >= end[a] + lat)
    bounded = {s.name: s for s in hw.spaces if s.bounded}
    by_space: dict[tuple[int, str], list[tuple[cp_model.IntervalVar, int]]] = {}
    for k, it in enumerate(graph.items):
        uses = graph.accesses.get(it.name, ())
        if it.space not in bounded or it.bytes <= 0 or not uses:
            continue
        first = uses[0][0]
        last = model.new_int_var(0, horizon, f"last{k}")
        model.add_max_equality(last, [end[i] for i, _ in uses])
        size = model.new_int_var(0, horizon, f"life{k}")
        life = model.new_interval_var(start[first], size, last, f"item{k}")
        by_space.setdefault((ops[first].core, it.space), []).append((life, it.bytes))
    for key in sorted(by_space):
        lives = by_space[key]
        model.add_cumulative([x for x, _ in lives], [b for _, b in lives], bounded[key[1]].capacity)
    makespan = model.new_int_var(0, horizon, "makespan")
    model.add_max_equality(makespan, end)
    model.minimize(makespan)
    return model, start, makespan


def peer_solve(
    graph: OpGraph, hw: Hardware, *, time_limit: float, workers: int = 1, seed: int = 0
) -> PeerResult:
    """Build the plain model and solve it for ``time_limit`` wall-clock seconds."""
    t0 = time.monotonic()
    model, start, _ = build_peer_model(graph, hw)
    built = time.monotonic() - t0
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = time_limit
    t1 = time.monotonic()
    status = solver.solve(model)
    seconds = time.monotonic() - t1
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        starts = [solver.value(s) for s in start]
        objective, bound = int(solver.objective_value), int(solver.best_objective_bound)
        return PeerResult(objective, bound, name, seconds, built, starts)
    return PeerResult(-1, -1, name, seconds, built)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph", nargs="?", help="OpGraph or TaskGraph JSON (lowered first)")
    ap.add_argument("--hw", help="hardware preset name or TOML path")
    ap.add_argument("--jobshop", nargs="*", help="job-shop instances from benchmarks/jobshop/ instead")
    ap.add_argument("--time-limit", type=float, default=30.0, help="wall-clock seconds (30)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="job shops: fail unless the peer is exact")
    args = ap.parse_args(argv)
    bad = 0
    if args.jobshop is not None:
        from jssp import INSTANCES, load_jobshop

        for name in args.jobshop or list(INSTANCES):
            graph, hw, info = load_jobshop(name)
            res = peer_solve(graph, hw, time_limit=args.time_limit, workers=args.workers, seed=args.seed)
            # a proof must equal the known optimum, and no solution may beat it
            wrong = (res.status == "OPTIMAL" and res.makespan != info.best) or (
                0 <= res.makespan < info.lower
            )
            bad += wrong
            print(
                f"{name:<6} {len(graph.ops):>4} ops  peer {res.makespan:>6} ({res.status}, bound {res.bound})"
                f"  best known {info.best}  {res.seconds:.1f} s" + ("  WRONG" if wrong else ""),
                flush=True,
            )
        return 1 if bad and args.check else 0
    if not args.graph or not args.hw:
        ap.error("give GRAPH and --hw, or --jobshop")
    from staticsched.api import as_opgraph

    hw = load_hardware(args.hw)
    graph = as_opgraph(args.graph, hw)
    res = peer_solve(graph, hw, time_limit=args.time_limit, workers=args.workers, seed=args.seed)
    print(
        f"{args.graph}: {len(graph.ops)} ops, peer makespan {res.makespan} ({res.status}, "
        f"bound {res.bound}), search {res.seconds:.1f} s, build {res.build_seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
