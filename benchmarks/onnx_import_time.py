"""How long importing a model takes: a 100-node model and the shipped examples.

The 100-node model is 25 layers of ``MatMul -> Add bias -> Relu -> Mul 0.5`` on a [128, 256]
activation with [256, 256] weights, built with ``onnx.helper``. Each model is imported (read,
shape inference, constant folding, patterns, translation, the fusion rules for
``seed-davinci``) ``--repeat`` times; the table gives the median wall seconds and the node
and task counts.

    python benchmarks/onnx_import_time.py [--repeat 5]
    python benchmarks/onnx_import_time.py --chain 100000 --repeat 1   # a 10^5-node model

``--chain N`` times a chain of ``N`` ``Relu`` nodes on a [16, 16] activation instead (a
graph as long as a hostile model would make it: docs/onnx.md, "Hostile and broken models"),
imported without and with ``seed-davinci``'s fusion rules, with the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def hundred_nodes():
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(25):
        w = numpy_helper.from_array(rng.normal(0, 0.05, (256, 256)).astype(np.float32), f"w{i}")
        b = numpy_helper.from_array(rng.normal(0, 0.05, (256,)).astype(np.float32), f"b{i}")
        half = numpy_helper.from_array(np.array(0.5, np.float32), f"half{i}")
        inits += [w, b, half]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"l{i}/mm"),
                  helper.make_node("Add", [f"h{i}", f"b{i}"], [f"hb{i}"], name=f"l{i}/bias"),
                  helper.make_node("Relu", [f"hb{i}"], [f"r{i}"], name=f"l{i}/relu"),
                  helper.make_node("Mul", [f"r{i}", f"half{i}"], [f"y{i}"], name=f"l{i}/scale")]
        x = f"y{i}"
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [128, 256]) for n in ("x", x)]
    g = helper.make_graph(nodes, "hundred", io[:1], io[1:], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def chain(n: int):
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"n{i}")
             for i in range(n)]
    nodes[-1].output[0] = "y"
    io = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [16, 16]) for v in ("x", "y")]
    m = helper.make_model(helper.make_graph(nodes, "chain", io[:1], io[1:]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _time_chain(n: int, repeat: int) -> None:
    import resource

    from staticsched.onnx import import_model

    model = chain(n)
    print("| model | hardware | nodes | tasks | import s (median) | peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for hw in (None, "seed-davinci"):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            im = import_model(model, hw)
            times.append(time.perf_counter() - t0)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| chain of {n:,} Relu | {hw or 'none (unfused)'} | {n} | {len(im.graph.tasks)} | "
              f"{statistics.median(times):.2f} | {peak:,.0f} |")


def main() -> None:
    import onnx

    from staticsched.model.hardware_toml import load_hardware
    from staticsched.onnx import import_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chain", type=int, default=0, help="time a chain of this many Relu nodes instead")
    args = ap.parse_args()
    if args.chain:
        _time_chain(args.chain, args.repeat)
        return
    hw = load_hardware("seed-davinci")
    models = {"100 nodes (25 x MatMul/Add/Relu/Mul)": hundred_nodes()}
    for name in ("gpt_block", "bert_layer"):
        models[name] = onnx.load(str(ROOT / "examples" / "onnx" / f"{name}.onnx"))
    print("| model | nodes | tasks | import s (median) |")
    print("|---|---:|---:|---:|")
    for name, model in models.items():
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            im = import_model(model, hw)
            times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        print(f"| {name} | {len(model.graph.node)} | {len(im.graph.tasks)} | {median:.3f} |")


if __name__ == "__main__":
    main()
