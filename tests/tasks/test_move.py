"""The move kind: the blocks :func:`blocks_of` finds for NumPy's data movements reproduce them
exactly; a move's bad blocks are one line each; scheduled moves verify clean with numbers on
both presets, and a program whose move reads the wrong rectangle is caught."""

from __future__ import annotations

import json

import numpy as np
import pytest
from taskcases import SEED, graph, max_error

from staticsched.errors import GraphError
from staticsched.formats.load import loads_program
from staticsched.formats.program_json import dumps_program_json
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.pipeline import compile_graph
from staticsched.tasks.move import MoveTask, blocks_of, gather_source, reference
from staticsched.verify import verify

X = np.arange(2 * 3 * 5 * 7, dtype=np.float64).reshape(2, 3, 5, 7) * 0.25 - 20

#: NumPy's data movements of X (and of a second tensor Y), as the ONNX import meets them
CASES = {
    "transpose 0213": lambda x, y: x.transpose(0, 2, 1, 3),
    "transpose 3120": lambda x, y: x.transpose(3, 1, 2, 0),
    "last two swapped": lambda x, y: x.swapaxes(-1, -2),
    "slice with steps": lambda x, y: x[:, ::-2, 1:, ::3],
    "reversed rows": lambda x, y: x[:, :, ::-1, :],
    "concat axis 1": lambda x, y: np.concatenate([x, y], axis=1),
    "concat last axis": lambda x, y: np.concatenate([x, y[:, :3]], axis=3),
    "tile": lambda x, y: np.tile(x, (1, 2, 1, 2)),
    "expand a column": lambda x, y: np.broadcast_to(x[:, :, :, :1], (2, 3, 5, 9)),
    "expand a row": lambda x, y: np.broadcast_to(x[:, :, :1, :], (2, 3, 4, 7)),
    "flatten": lambda x, y: x.reshape(6, 35),
    "merge rows": lambda x, y: x.reshape(2, 105),
    "split rows": lambda x, y: x.reshape(30, 7).reshape(210, 1),
}


def _moved(fn):
    y = np.arange(2 * 4 * 5 * 7, dtype=np.float64).reshape(2, 4, 5, 7) + 1000
    shapes = [(30, 7), (40, 7)]
    ids = fn(*(g.reshape(s) for g, s in zip(gather_source(shapes), [X.shape, y.shape], strict=True)))
    want = fn(X, y)
    return ids, want, shapes, y


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_blocks_of_a_numpy_move_reproduce_it(name):
    ids, want, shapes, y = _moved(CASES[name])
    flat = ids.reshape(-1, ids.shape[-1])
    blocks = blocks_of(flat, shapes)
    task = MoveTask(id="m", inputs=["x", "y"], out="o", rows=flat.shape[0], cols=flat.shape[1],
                    blocks=blocks, dtype="float32")
    env = {"x": X.reshape(30, 7).astype(np.float32), "y": y.reshape(40, 7).astype(np.float32)}
    got = reference(task, env)["o"]
    np.testing.assert_array_equal(got, want.reshape(flat.shape).astype(np.float32))


def test_blocks_are_rectangles_not_elements():
    ids, *_ = _moved(CASES["transpose 0213"])
    # the rows are permuted, each moves whole (rows adjacent in both are one block)
    blocks = blocks_of(ids.reshape(-1, 7), [(30, 7), (40, 7)])
    assert {(b.how, b.cols) for b in blocks} == {("copy", 7)} and len(blocks) < 30
    ids, *_ = _moved(CASES["last two swapped"])
    blocks = blocks_of(ids.reshape(-1, 5), [(30, 7), (40, 7)])
    assert len(blocks) == 6 and {b.how for b in blocks} == {"transpose"}
    ids, *_ = _moved(CASES["expand a column"])
    assert {b.how for b in blocks_of(ids.reshape(-1, 9), [(30, 7), (40, 7)])} == {"broadcast"}


def _graph(blocks, out=(4, 6), dtype=None):
    d = graph({"x": (6, 4), "o": out},
              {"id": "m", "type": "move", "inputs": ["x"], "out": "o", "blocks": blocks})
    if dtype:
        d["tensors"]["o"]["dtype"] = dtype
    return d


@pytest.mark.parametrize(("blocks", "needle"), [
    ([[0, 0, 0, 0, 0, 4, 6, "transpose"], [0, 0, 0, 0, 0, 1, 1]], "more than one block writes 1 element(s)"),
    ([[0, 0, 0, 0, 0, 4, 5, "transpose"]],
     "no block writes 4 element(s) of out 'o' (the first at row 0, column 5)"),
    ([[0, 0, 0, 0, 0, 4, 6, "copy"]], "reads input 0 rows [0, 4) and columns [0, 6), past its 6 x 4"),
    ([[1, 0, 0, 0, 0, 4, 6, "transpose"]], "src 1 is not an input (0..0)"),
    ([[0, 0, 0, 0, 0, 4, 6, "sideways"]], "must be [src, src_row, src_col, row, col, rows, cols, how]"),
    ([[0, 0, 0, 1, 0, 4, 6, "transpose"]], "writes rows [1, 5) and columns [0, 6), past out 'o' 4 x 6"),
])
def test_bad_blocks_are_one_line_each(blocks, needle):
    with pytest.raises(GraphError) as exc:
        taskgraph_from_dict(_graph(blocks), "g.json")
    assert any(needle in line for line in exc.value.problems), exc.value.problems


def test_a_move_converts_nothing():
    with pytest.raises(GraphError, match="a move converts nothing: its inputs are float16 and out 'o' "):
        taskgraph_from_dict(_graph([[0, 0, 0, 0, 0, 4, 6, "transpose"]], dtype="float32"), "g.json")


def test_a_transpose_too_large_for_one_tile_is_cut_into_pieces_that_match():
    d = graph({"x": [300, 200], "o": [200, 300]},
              {"id": "m", "type": "move", "inputs": ["x"], "out": "o",
               "blocks": [[0, 0, 0, 0, 0, 200, 300, "transpose"]]})
    assert max_error(d, SEED) == 0.0


def _mixed():
    """A transpose, a concat and a broadcast in one graph, the second reading the first."""
    ids = gather_source([(24, 20), (8, 20)])
    t = ids[0].reshape(2, 12, 20).transpose(0, 2, 1)  # [2, 20, 12]
    cat = np.concatenate([t.reshape(40, 12), ids[1].reshape(8, 20)[:, :12]], axis=0)
    tb = blocks_of(t.reshape(40, 12), [(24, 20)])
    src2 = gather_source([(40, 12), (8, 20)])
    cb = blocks_of(np.concatenate([src2[0], src2[1][:, :12], np.broadcast_to(src2[1][:, :1], (8, 12))]),
                   [(40, 12), (8, 20)])
    assert cat.shape == (48, 12)
    return graph({"x": [2, 12, 20], "y": [8, 20], "t": [2, 20, 12],
                  "o": [56, 12]},
                 {"id": "tr", "type": "move", "inputs": ["x"], "out": "t",
                  "blocks": [b.as_list() for b in tb]},
                 {"id": "cat", "type": "move", "inputs": ["t", "y"], "out": "o",
                  "blocks": [b.as_list() for b in cb]})


@pytest.mark.parametrize("hw", ["seed-davinci", "ascend-a2"])
def test_moves_schedule_and_verify_clean_with_numbers(hw):
    compiled = compile_graph(taskgraph_from_dict(_mixed()), hw, method="list")
    program = loads_program(dumps_program_json(compiled.program), "<emitted>")
    report = verify(program, hw, numeric=True, jitter=1)
    assert report.ok, [f.line() for f in report.findings][:5]
    assert compiled.schedule.makespan >= compiled.schedule.lower_bound > 0


def test_a_move_that_reads_the_wrong_rectangle_is_caught():
    compiled = compile_graph(taskgraph_from_dict(_mixed()), "seed-davinci", method="list")
    doc = json.loads(dumps_program_json(compiled.program))
    text = json.dumps(doc)
    # the transpose's first load reads rows [0, 12) of x; shift it by one row
    broken = text.replace('"region": [[0, 12], [0, 20]]', '"region": [[1, 13], [0, 20]]', 1)
    assert broken != text, "the emitted program has no load of x's first 12 rows"
    report = verify(loads_program(broken, "<broken>"), "seed-davinci", numeric=True)
    assert not report.ok
