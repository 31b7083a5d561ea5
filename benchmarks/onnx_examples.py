"""The shipped ONNX examples, imported, scheduled, verified and run against ONNX's reference.

For each model (``examples/onnx/*.onnx``), hardware and fusion mode: import, schedule (the
method given, default CP-SAT), verify the emitted program (numeric replay, one jittered
replay), run it with the backend on seeded inputs, and compare every output with
``onnx.reference.ReferenceEvaluator`` on the same inputs. Prints one table row each: tasks,
makespan, lower bound, verification, and the max element error (absolute, and relative to
``max(1, |reference|)``), which docs/onnx.md's tolerance bounds (2^-7).

    python benchmarks/onnx_examples.py [--method list] [--fusion rules,search,none]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gpt_block", "bert_layer")
HARDWARE = ("seed-davinci", "ascend-a2")


def feeds_for(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: ``x`` normal, BERT's additive ``mask`` 0 but for the last 28 keys."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.name == "mask":
            m = np.zeros(shape, np.float32)
            m[..., -28:] = -10000.0
            out[vi.name] = m
        else:
            out[vi.name] = rng.normal(0.0, 1.0, shape).astype(np.float32)
    return out


def main() -> None:
    import onnx
    from onnx.reference import ReferenceEvaluator

    from staticsched.onnx.backend import StaticschedBackend

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="cpsat")
    ap.add_argument("--fusion", default="rules", help="comma-separated fusion modes")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--hw", default=",".join(HARDWARE))
    args = ap.parse_args()
    print("| model | hw | fusion | tasks | makespan | lower bound | verified | max abs err | max rel err "
          "| s |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|")
    for name in args.models.split(","):
        model = onnx.load(str(ROOT / "examples" / "onnx" / f"{name}.onnx"))
        feeds = feeds_for(model)
        want = ReferenceEvaluator(model).run(None, feeds)
        for hw in args.hw.split(","):
            for fusion in args.fusion.split(","):
                t0 = time.monotonic()
                rep = StaticschedBackend.prepare(model, hw=hw, method=args.method, fusion=fusion, jitter=1)
                got = rep.run(feeds)
                wall = time.monotonic() - t0
                errs = [np.abs(g.astype(np.float64) - w) for g, w in zip(got, want, strict=True)]
                abs_err = max(float(e.max()) for e in errs)
                rel_err = max(float((e / np.maximum(1.0, np.abs(w))).max())
                              for e, w in zip(errs, want, strict=True))
                print(f"| {name} | {hw} | {fusion} | {len(rep.imported.graph.tasks)} | "
                      f"{rep.makespan:,} | {rep.lower_bound:,} | "
                      f"{'clean' if rep.report.ok else 'FAILED'} | {abs_err:.2e} | {rel_err:.2e} | "
                      f"{wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
