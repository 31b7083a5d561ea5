"""Fused attention against the unfused chain, in cycles.

For each attention example, the same shapes as three tasks that go through GM: ``s = scale ·
q kᵀ`` (a batched matmul with ``transpose_b`` and a ``scale`` epilogue; for the causal example
also an ``add`` of a ``[B, H, S, S]`` mask tensor, the unfused way to mask), ``p = softmax(s)``
(a ``rowwise`` task), ``o = p v`` (a batched matmul). Both are scheduled on ``seed-davinci``
with the same method; the table gives makespans, ops and GM traffic.

Usage::

    python benchmarks/attention.py               # list schedules (~5 minutes)
    python benchmarks/attention.py --method cpsat --time-limit 60

The unfused causal chain computes every block (a dense mask, no skipping): it is what a graph
without a fused attention kind runs. Its numbers are not checked (the mask input is data).
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
from staticsched.frontend.taskgraph import taskgraph_from_dict  # noqa: E402
from staticsched.model.hardware_toml import load_hardware  # noqa: E402
from staticsched.model.traffic import gm_traffic  # noqa: E402

EXAMPLES = ["attention.json", "attention_tail.json"]


def unfused(fused: dict) -> dict:
    """The unfused chain of a fused attention TaskGraph (same tensors, same shapes)."""
    (att,) = fused["tasks"]
    t = fused["tensors"]
    q, v = t[att["q"]]["shape"], t[att["v"]]["shape"]
    lead, sq, d = q[:-2], q[-2], q[-1]
    sk = t[att["k"]]["shape"][-2]
    tensors = {name: dict(body) for name, body in t.items()}
    tensors["s"] = {"shape": [*lead, sq, sk]}
    tensors["p"] = {"shape": [*lead, sq, sk]}
    epilogue = [{"op": "scale", "value": att.get("scale", d**-0.5)}]
    if att.get("causal"):
        tensors["mask"] = {"shape": [*lead, sq, sk]}
        epilogue.append({"op": "add", "tensor": "mask"})
    assert v[-2] == sk
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": [
        {"id": "qk", "type": "matmul", "a": att["q"], "b": att["k"], "out": "s", "transpose_b": True,
         "epilogue": epilogue},
        {"id": "sm", "type": "rowwise", "op": "softmax", "input": "s", "out": "p"},
        {"id": "pv", "type": "matmul", "a": "p", "b": att["v"], "out": att["out"]},
    ]}


def run(doc: dict, hw, method: str, time_limit: float) -> dict:
    tg = taskgraph_from_dict(doc)
    t0 = time.perf_counter()
    res = compile_graph(tg, hw, method=method, time_limit=time_limit)
    traffic = gm_traffic(res.graph, hw)
    return {"makespan": res.schedule.makespan, "bound": res.schedule.lower_bound, "ops": len(res.graph.ops),
            "gm": traffic.read + traffic.written, "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="list", choices=("list", "cpsat"))
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    hw = load_hardware("seed-davinci")
    print("| example | variant | ops | makespan | lower bound | GM bytes | us at 1.8 GHz | time |")
    print("|---|---|---|---|---|---|---|---|")
    for name in EXAMPLES:
        fused = json.loads((ROOT / "examples" / name).read_text())
        rows = {"fused": run(fused, hw, args.method, args.time_limit),
                "unfused": run(unfused(fused), hw, args.method, args.time_limit)}
        for variant, r in rows.items():
            print(f"| {name} | {variant} | {r['ops']} | {r['makespan']} | {r['bound']} | {r['gm']} | "
                  f"{hw.cycles_to_us(r['makespan']):.1f} | {r['seconds']:.0f} s |", flush=True)
        ratio = rows["unfused"]["makespan"] / rows["fused"]["makespan"]
        print(f"| {name} | unfused / fused | | {ratio:.2f}x | | | | |", flush=True)


if __name__ == "__main__":
    main()
