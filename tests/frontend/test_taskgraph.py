"""TaskGraph JSON: loading, canonical round trip, format dispatch, and one test per error class."""

from __future__ import annotations

import copy
import json

import pytest
from common import EXAMPLES

from staticsched.errors import GraphError, InputError, TilingError
from staticsched.frontend.taskgraph import (
    TaskGraph,
    dumps_taskgraph,
    load_graph,
    load_taskgraph,
    taskgraph_from_dict,
    taskgraph_to_dict,
)
from staticsched.model.opgraph import OpGraph
from staticsched.tasks.elementwise import ElementwiseTask
from staticsched.tasks.matmul import MatmulTask, Tiling

TASKGRAPH_EXAMPLES = ["matmul_gelu", "matmul_bias_gelu", "gemv_m1", "chain"]


def _full() -> dict:
    """The DESIGN §4 example with every tensor it names declared, so that it is valid."""
    sq = {"shape": [256, 256], "dtype": "float16"}
    return {
        "format": "staticsched.taskgraph",
        "version": 1,
        "tensors": {
            "x": dict(sq),
            "w": dict(sq),
            "b": {"shape": [256], "dtype": "float16"},
            "r": dict(sq),
            "y": dict(sq),
            "z": dict(sq),
            "o": dict(sq),
            "o2": dict(sq),
        },
        "tasks": [
            {
                "id": "mm",
                "type": "matmul",
                "a": "x",
                "b": "w",
                "out": "y",
                "transpose_b": False,
                "epilogue": [
                    {"op": "bias", "tensor": "b"},
                    {"op": "add", "tensor": "r"},
                    {"op": "scale", "value": 0.5},
                    {"op": "relu"},
                    {"op": "gelu"},
                    {"op": "cast"},
                ],
                "tiling": {"base_m": 128, "base_n": 128, "base_k": 128, "double_buffer": True},
            },
            {"id": "act", "type": "elementwise", "op": "add", "inputs": ["y", "z"], "out": "o"},
            {"id": "act2", "type": "elementwise", "op": "gelu", "inputs": ["o"], "out": "o2", "value": 1.0},
        ],
    }


def test_design_example_parses():
    tg = taskgraph_from_dict(_full(), "g.json")
    mm, act, act2 = tg.tasks
    assert isinstance(mm, MatmulTask) and (mm.m, mm.n, mm.k) == (256, 256, 256)
    assert [s.op for s in mm.epilogue] == ["bias", "add", "scale", "relu", "gelu", "cast"]
    assert mm.epilogue[2].value == 0.5 and mm.epilogue[0].tensor == "b"
    assert mm.tiling == Tiling(128, 128, 128, double_buffer=True)
    assert (
        isinstance(act, ElementwiseTask) and act.inputs == ("y", "z") and (act.rows, act.cols) == (256, 256)
    )
    assert act2.value == 1.0
    assert tg.input_names == ("b", "r", "w", "x", "z")
    assert tg.output_names == ("o", "o2", "y")
    assert tg.writer == {"y": "mm", "o": "act", "o2": "act2"}
    assert tg.tensor_map["b"].shape2d == (1, 256)


@pytest.mark.parametrize("name", TASKGRAPH_EXAMPLES)
def test_examples_round_trip_canonically(name):
    path = EXAMPLES / f"{name}.json"
    tg = load_taskgraph(path)
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
    text = dumps_taskgraph(tg)
    assert text == dumps_taskgraph(load_taskgraph(path))
    assert taskgraph_from_dict(json.loads(text)) == tg
    # canonical: sorted keys, compact, one line
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert "\n" not in text and ", " not in text


def test_dumps_ignores_key_order_and_formatting():
    a = _full()
    b = json.loads(json.dumps(a, indent=3))
    b["tensors"] = dict(reversed(list(b["tensors"].items())))
    b["tasks"][0] = dict(reversed(list(b["tasks"][0].items())))
    assert dumps_taskgraph(taskgraph_from_dict(a)) == dumps_taskgraph(taskgraph_from_dict(b))


def test_ordered_tasks_follow_dependencies_not_file_order():
    d = _full()
    d["tasks"].reverse()
    tg = taskgraph_from_dict(d)
    assert [t.id for t in tg.tasks] == ["act2", "act", "mm"]
    assert [t.id for t in tg.ordered_tasks] == ["mm", "act", "act2"]


def test_one_dimensional_operand_is_a_row():
    d = _full()
    d["tensors"]["x"] = {"shape": [256]}
    d["tensors"]["y"] = {"shape": [256]}
    d["tensors"]["r"] = {"shape": [1, 256]}
    d["tasks"] = d["tasks"][:1]
    mm = taskgraph_from_dict(d).tasks[0]
    assert (mm.m, mm.n, mm.k) == (1, 256, 256)


def test_transpose_b_reads_b_as_n_by_k():
    d = _full()
    d["tensors"]["w"] = {"shape": [192, 256]}  # [N, K]
    for t in ("y", "r", "z", "o", "o2"):
        d["tensors"][t] = {"shape": [256, 192]}
    d["tensors"]["b"] = {"shape": [192]}
    d["tasks"][0]["transpose_b"] = True
    mm = taskgraph_from_dict(d).tasks[0]
    assert (mm.m, mm.n, mm.k) == (256, 192, 256)


def test_load_graph_dispatches_on_format(tmp_path):
    assert isinstance(load_graph(EXAMPLES / "chain.json"), TaskGraph)
    assert isinstance(load_graph(EXAMPLES / "double_buffer.json"), OpGraph)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "onnx", "version": 1}))
    with pytest.raises(InputError, match=r"bad\.json: 'format' must be 'staticsched\.taskgraph' or"):
        load_graph(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match=r"bad\.json: top level must be a JSON object .* got list"):
        load_graph(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_graph(bad)
    with pytest.raises(InputError, match="no such file"):
        load_taskgraph(tmp_path / "missing.json")


def _error(mutate, error=GraphError) -> str:
    d = _full()
    mutate(d)
    with pytest.raises(error) as exc:
        taskgraph_from_dict(d, "g.json")
    return str(exc.value)


def _task(d: dict, task_id: str) -> dict:
    return next(t for t in d["tasks"] if t["id"] == task_id)


def _task_set(task_id: str, key: str, value):
    def mutate(d):
        _task(d, task_id)[key] = value

    return mutate


def _step_set(i: int, key: str, value):
    def mutate(d):
        _task(d, "mm")["epilogue"][i][key] = value

    return mutate


def _tensor_set(name: str, body):
    def mutate(d):
        d["tensors"][name] = body

    return mutate


@pytest.mark.parametrize(
    ("mutate", "needles"),
    [
        # unknown keys, at every level
        (lambda d: d.update(colour="red"), ["g.json: unknown key 'colour'"]),
        (_task_set("mm", "alpha", 1.0), ["task 'mm': unknown key 'alpha'"]),
        (_task_set("act", "tiling", {}), ["task 'act': unknown key 'tiling'"]),
        (_step_set(1, "scale", 2), ["task 'mm': epilogue[1]: unknown key 'scale'"]),
        (_tensor_set("x", {"shape": [256, 256], "order": "nz"}), ["tensor 'x': unknown key 'order'"]),
        # unknown tensors
        (_task_set("mm", "a", "q"), ["task 'mm': 'a' names unknown tensor 'q'"]),
        (_task_set("act", "inputs", ["y", "zz"]), ["task 'act': 'inputs'[1] names unknown tensor 'zz'"]),
        (_step_set(0, "tensor", "bb"), ["task 'mm': epilogue[0]: 'tensor' names unknown tensor 'bb'"]),
        # shape mismatches, with the numbers
        (
            _tensor_set("w", {"shape": [128, 256]}),
            ["task 'mm': K mismatch: a 'x' is [256, 256] (K = 256) but b 'w' is [128, 256]", "(K = 128)"],
        ),
        (
            _tensor_set("y", {"shape": [256, 255]}),
            ["task 'mm': out 'y' is [256, 255], expected [256, 256]"],
        ),
        (
            _tensor_set("b", {"shape": [255]}),
            ["task 'mm': epilogue[0] 'bias' tensor 'b' is [255], expected [256]"],
        ),
        (
            _tensor_set("r", {"shape": [128, 256]}),
            ["task 'mm': epilogue[1] 'add' tensor 'r' is [128, 256], expected [256, 256]"],
        ),
        (
            _tensor_set("z", {"shape": [256, 128]}),
            ["task 'act': input 'z' is [256, 128], expected [256, 256] (from out 'o' [256, 256])"],
        ),
        # writers and reads
        (
            _task_set("act2", "out", "o"),
            [
                "tensor 'o' is written by 2 tasks ('act', 'act2')",
                "task 'act2': reads its own output tensor 'o'",
            ],
        ),
        (_task_set("mm", "a", "y"), ["task 'mm': reads its own output tensor 'y'"]),
        # values, dims, types
        (
            _tensor_set("x", {"shape": [0, 256]}),
            ["tensor 'x': every dim of 'shape' must be positive, got [0, 256]"],
        ),
        (
            _tensor_set("x", {"shape": [2, 2, 2, 2, 2]}),
            ["tensor 'x': 'shape' must be a list of 1 to 4 integers (leading batch/head dims, then rows and "
             "columns), got [2, 2, 2, 2, 2]"],
        ),
        (_tensor_set("x", {"shape": "256x256"}), ["tensor 'x': 'shape' must be a list"]),
        (_tensor_set("x", {"shape": [256, True]}), ["tensor 'x': 'shape' must be a list of 1 to 4 integers"]),
        (_step_set(2, "value", float("nan")), ["task 'mm': epilogue[2]: 'value' must be finite, got nan"]),
        (_task_set("act2", "value", float("inf")), ["task 'act2': 'value' must be finite, got inf"]),
        (_step_set(2, "value", "half"), ["task 'mm': epilogue[2]: 'value' must be a number, got 'half'"]),
        (_task_set("mm", "transpose_b", "yes"), ["task 'mm': 'transpose_b' must be true or false"]),
        (_task_set("mm", "epilogue", {"op": "relu"}), ["task 'mm': 'epilogue' must be a list"]),
        (_task_set("act", "id", 7), ["tasks[1]: 'id' must be a string, got 7"]),
        (lambda d: d.update(tasks={"mm": {}}), ["g.json: 'tasks' must be a list"]),
        (lambda d: d.update(tasks=[]), ["g.json: 'tasks' is empty"]),
        (lambda d: d["tasks"].append("act3"), ["tasks[3]: must be an object, got str"]),
        (_tensor_set("x", {"shape": [256, 256], "dtype": "int8"}), ["tensor 'x': dtype 'int8'"]),
        (_tensor_set("x", {"shape": [256, 256], "dtype": "float32"}),
         ["task 'mm': operands of different dtypes", "a 'x' is float32", "b 'w' is float16"]),
        # ops
        (_task_set("act", "op", "sinc"), ["task 'act': 'op' = 'sinc' is not one of"]),
        (_step_set(3, "op", "logsoftmax"), ["task 'mm': epilogue[3]: 'op' = 'logsoftmax' is not one of"]),
        (_task_set("act", "inputs", ["y"]), ["task 'act': op 'add' takes 2 input(s), got 1"]),
        (_step_set(2, "value", None), ["task 'mm': epilogue[2]: 'value' must be a number, got None"]),
        (lambda d: _task(d, "mm")["epilogue"][2].pop("value"), ["epilogue[2]: op 'scale' needs a 'value'"]),
        (_step_set(3, "tensor", "r"), ["task 'mm': epilogue[3]: op 'relu' takes no 'tensor'"]),
        (_task_set("mm", "type", "conv"), ["task 'mm': 'type' = 'conv' is not one of matmul, elementwise"]),
        # header, ids, names
        (lambda d: d.update(format="staticsched.opgraph"), ["'format' must be 'staticsched.taskgraph'"]),
        (lambda d: d.update(version=2), ["'version' = 2 is above the maximum 1"]),
        (_task_set("act2", "id", "act"), ["task 'act': duplicate task id"]),
        (_task_set("mm", "id", "mm.1"), ["task 'mm.1': id must not contain '.'"]),
        (_task_set("mm", "id", "m m"), ["g.json: tasks[0]: task name 'm m' must be non-empty and use only"]),
        (
            lambda d: d["tensors"].update({"a b": {"shape": [4]}}),
            ["g.json: tensor name 'a b' must be non-empty"],
        ),
    ],
)
def test_graph_errors_name_the_offender(mutate, needles):
    msg = _error(mutate)
    for needle in needles:
        assert needle in msg, msg


def test_dependency_cycle_names_tasks_and_tensors():
    def mutate(d):
        d["tasks"] = [
            {"id": "p", "type": "elementwise", "op": "relu", "inputs": ["o"], "out": "o2"},
            {"id": "q", "type": "elementwise", "op": "gelu", "inputs": ["o2"], "out": "o"},
        ]

    msg = _error(mutate)
    assert "task dependency cycle 'p' -> 'q' -> 'p' (through tensors 'o2', 'o')" in msg


def test_every_problem_is_reported_at_once():
    def mutate(d):
        d["colour"] = 1
        _task(d, "mm")["a"] = "nope"
        _task(d, "act")["op"] = "sinc"
        d["tensors"]["z"] = {"shape": [-1]}

    lines = _error(mutate).splitlines()
    assert len(lines) == 4, lines


@pytest.mark.parametrize(
    ("tiling", "needle"),
    [
        (
            {"base_m": 0, "base_n": 128, "base_k": 128},
            "task 'mm': tiling: 'base_m' = 0 is below the minimum 1",
        ),
        ({"base_m": "128", "base_n": 128, "base_k": 128}, "task 'mm': tiling: 'base_m' must be an integer"),
        ({"base_n": 128, "base_k": 128}, "task 'mm': tiling: missing required key 'base_m'"),
        ({"base_m": 128, "base_n": 128, "base_k": 128, "depth": 3}, "task 'mm': tiling: unknown key 'depth'"),
        (
            {"base_m": 128, "base_n": 128, "base_k": 128, "double_buffer": 1},
            "'double_buffer' must be true or",
        ),
    ],
)
def test_tiling_only_problems_are_tiling_errors(tiling, needle):
    msg = _error(_task_set("mm", "tiling", tiling), TilingError)
    assert needle in msg


def test_input_is_not_mutated():
    d = _full()
    before = copy.deepcopy(d)
    taskgraph_from_dict(d)
    assert d == before


def test_top_level_must_be_an_object():
    with pytest.raises(GraphError, match="top level must be an object"):
        taskgraph_from_dict([1], "g.json")


def test_a_bad_shape_is_one_problem_not_one_per_user():
    msg = _error(_tensor_set("y", {"shape": [256, 0]}))
    assert msg.splitlines() == ["g.json: tensor 'y': every dim of 'shape' must be positive, got [256, 0]"]


def test_cycles_and_tiling_problems_are_reported_together():
    def mutate(d):
        _task(d, "mm")["tiling"]["base_k"] = -1
        d["tasks"] += [
            {"id": "p", "type": "elementwise", "op": "relu", "inputs": ["r"], "out": "z"},
            {"id": "q", "type": "elementwise", "op": "relu", "inputs": ["z"], "out": "r"},
        ]

    msg = _error(mutate, GraphError)
    assert "task dependency cycle" in msg and "'base_k' = -1 is below the minimum 1" in msg


def test_a_trailing_newline_is_not_a_valid_name():
    # errors escape control characters so that one problem stays one line
    assert "tasks[0]: task name 'mm\\n' must be non-empty" in _error(_task_set("mm", "id", "mm\n"))
