"""Hostile and broken ONNX models: each is refused in one line per problem (a ``ModelError``
from the API, exit 2 from the CLI), writes nothing and stays small in memory.

The cases are the ones docs/onnx.md lists under "Hostile and broken models". The memory figure
is the whole CLI run's peak RSS in a fresh interpreter (``os.wait4``), one run over every case,
so it counts the imports of numpy, onnx and OR-Tools too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from staticsched.cli import main  # noqa: E402
from staticsched.errors import ModelError  # noqa: E402
from staticsched.onnx import import_model  # noqa: E402

#: what a hostile model may cost the CLI, the interpreter's own imports included
MEMORY_LIMIT = 1 << 30


def _model(nodes, inputs, outputs, inits=(), ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = ir
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _relu(shape=(4, 4)):
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [_f("x", list(shape))], [_f("y", list(shape))]
    )


def _lying_initializer():
    """16 values declared [2**20, 2**20]: the case that once ended in ``cannot reshape``."""
    w = numpy_helper.from_array(np.ones(16, np.float32), "w")
    del w.dims[:]
    w.dims.extend([2**20, 2**20])
    big = [2**20, 2**20]
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_f("x", big)], [_f("y", big)], [w]
    )


def _external(location: str):
    """A [4, 4] weight whose values live in the file ``location`` names."""
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_f("x", [4, 4])], [_f("y", [4, 4])], [w]
    )


def _two_writers():
    return _model(
        [
            helper.make_node("Relu", ["x"], ["y"], name="a"),
            helper.make_node("Sigmoid", ["x"], ["y"], name="b"),
        ],
        [_f("x", [4, 4])],
        [_f("y", [4, 4])],
    )


def _input_twice():
    m = _relu()
    m.graph.input.append(m.graph.input[0])
    return m


def _shadowed_input():
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "x")
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [_f("x", [4, 4])], [_f("y", [4, 4])], [w]
    )


def _truncated():
    return _two_writers().SerializeToString()[:40]


#: case -> (the model, or its bytes; a line the refusal must hold)
CASES = {
    "external data outside its directory (../)": (
        _external("../outside.bin"),
        "points outside the directory",
    ),
    "external data at an absolute path": (_external("/etc/passwd"), "absolute path"),
    "external data through a symlink out": (_external("link.bin"), "symbolic link"),
    "a shape that needs more than the machine has": (_relu((2**40,)), "more than this machine's"),
    "a truncated protobuf": (_truncated(), "not an ONNX model"),
    "a corrupt protobuf": (b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage", "not an ONNX model"),
    "a value written by two nodes": (
        _two_writers(),
        "node 'b' (Sigmoid): writes 'y', already written by node 'a'",
    ),
    "a graph input listed twice": (_input_twice(), "graph input 'x': listed 2 times"),
    "an initializer that shadows an input": (_shadowed_input(), "input 'x': an initializer of the same name"),
    "a shape that disagrees with its initializer": (
        _lying_initializer(),
        "initializer 'w': dims [1048576, 1048576] declare 1,099,511,627,776 values, it holds 16",
    ),
}


def _write(case: str, where: Path) -> Path:
    """The case's model file in ``where`` (with the files its external data names)."""
    model, _ = CASES[case]
    where.mkdir(parents=True, exist_ok=True)
    (where.parent / "outside.bin").write_bytes(np.ones(16, np.float32).tobytes())
    if "symlink" in case and not (where / "link.bin").exists():
        (where / "link.bin").symlink_to(where.parent / "outside.bin")
    path = where / "model.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_model_is_refused_in_one_line_with_exit_2_and_nothing_written(case, tmp_path, capsys):
    path = _write(case, tmp_path / "m")
    want = CASES[case][1]
    with pytest.raises(ModelError) as err:
        import_model(path, "seed-davinci")
    assert want in err.value.problems[0], err.value.problems
    # one line per problem: the oversized shape names its input and its output, nothing else
    assert len(err.value.problems) == (2 if "machine" in case else 1), err.value.problems
    before = sorted(p.name for p in path.parent.iterdir())
    out = tmp_path / "out"
    assert main(["schedule", str(path), "--hw", "seed-davinci", "-o", str(out), "-q"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("staticsched: error: ") for line in lines), lines
    assert any(want in line for line in lines) and "Traceback" not in "\n".join(lines)
    assert not out.exists()
    assert main(["import", str(path), "--hw", "seed-davinci", "-o", str(tmp_path / "g.json")]) == 2
    assert not (tmp_path / "g.json").exists()
    assert sorted(p.name for p in path.parent.iterdir()) == before


_PEAK = """
import json, resource, sys
from staticsched.cli import main
codes = {name: main(["schedule", path, "--hw", "seed-davinci", "-o", path + ".out", "-q"])
         for name, path in json.loads(sys.argv[1]).items()}
print(json.dumps({"codes": codes, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def test_hostile_models_are_refused_in_under_1_gib(tmp_path):
    """Every case through the CLI in one fresh interpreter: exit 2 each, and the process's peak
    RSS, which bounds each case's, under :data:`MEMORY_LIMIT`."""
    paths = {case: str(_write(case, tmp_path / f"m{i}")) for i, case in enumerate(sorted(CASES))}
    run = subprocess.run(
        [sys.executable, "-c", _PEAK, json.dumps(paths)], capture_output=True, text=True, check=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["codes"] == dict.fromkeys(CASES, 2)
    assert result["peak"] < MEMORY_LIMIT, result["peak"]
    assert not any(Path(p + ".out").exists() for p in paths.values())


def test_a_long_chain_imports_without_recursing():
    """5,000 nodes in a row under a recursion limit of 400: nothing in the import recurses
    along the graph (a 10^5-node model's time is in benchmarks/onnx_import_time.py)."""
    nodes = [
        helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"n{i}")
        for i in range(5000)
    ]
    nodes[-1].output[0] = "y"
    model = _model(nodes, [_f("x", [4, 4])], [_f("y", [4, 4])])
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        imported = import_model(model, None)
    finally:
        sys.setrecursionlimit(limit)
    assert len(imported.graph.tasks) == 5000
