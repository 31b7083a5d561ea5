"""The matmul's Vector lowering (``"engine": "vector"``, issue 25): GEMV and small-M matmuls on
the Vector cores alone -- numbers against the reference and float64 NumPy, scheduled and
verified with numbers on the coupled and the split preset, the explicit Cube engine equal to
none, the JSON round trip, the tile, and one line per refused input."""

from __future__ import annotations

import json
import math

import attrs
import numpy as np
import pytest
from common import SEED, preset
from taskcases import cli_error_lines, graph, max_error

import staticsched
from staticsched.api import compile_graph
from staticsched.errors import GraphError, StaticschedError, TilingError
from staticsched.frontend.lowering import lower, tiling_info
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_document, hardware_from_dict
from staticsched.model.opkinds import KINDS as OPKINDS
from staticsched.model.opkinds import item_shape
from staticsched.model.vecops import USER_OPS, VECOPS
from staticsched.tasks.elementwise import OPS as ELEMENTWISE_OPS
from staticsched.tasks.matmul import EPILOGUE_OPS, KIND
from staticsched.tasks.matmul.vector import MAC, VectorPlan, working_set
from staticsched.verify import verify

A2 = preset("ascend-a2")
HWS = pytest.mark.parametrize("hw", [SEED, A2], ids=["seed-davinci", "ascend-a2"])
BIAS_GELU = [{"op": "bias", "tensor": "bias"}, {"op": "gelu"}]


def _mm(tensors: dict, engine: str | None = "vector", **task) -> dict:
    body = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", **task}
    if engine is not None:
        body["engine"] = engine
    return graph(tensors, body)


def gemv(engine: str | None = "vector", **task) -> dict:
    """``[1, 300] @ [300, 200]``."""
    return _mm({"x": (1, 300), "w": (300, 200), "y": (1, 200)}, engine, **task)


def batched(engine: str | None = "vector", **task) -> dict:
    """``[2, 5, 64] @ [64, 96]`` + bias, gelu: M = 5, the 2-D ``b`` shared by both batch elements."""
    return _mm({"x": (2, 5, 64), "w": (64, 96), "bias": (96,), "y": (2, 5, 96)}, engine,
               epilogue=BIAS_GELU, **task)


# --------------------------------------------------------------------------- numbers


@HWS
@pytest.mark.parametrize("case", [
    gemv(),
    batched(),
    # b per batch element, both transposes, long K (several chunks), row and full operands
    _mm({"x": (2, 900, 3), "w": (2, 40, 900), "r": (2, 3, 1), "f": (2, 3, 40), "y": (2, 3, 40)},
        transpose_a=True, transpose_b=True,
        epilogue=[{"op": "sub_row", "tensor": "r"}, {"op": "add", "tensor": "f"},
                  {"op": "scale", "value": 0.5}]),
    # a broadcast over b's batch
    _mm({"x": (1, 3, 48), "w": (4, 48, 24), "y": (4, 3, 24)}),
], ids=["gemv", "batched-bias-gelu", "transposes-operands", "broadcast-a"])
def test_the_lowered_ops_compute_the_reference_with_their_exact_op_count(hw, case):
    # only the order of the fp32 sums differs from the reference: within an fp16 rounding
    assert max_error(case, hw) <= 1e-3


def test_long_k_is_cut_into_even_chunks_folded_in_fp32():
    d = _mm({"x": (1, 300), "w": (300, 200), "y": (1, 200)})
    data, _ = hardware_document("seed-davinci")
    data["spaces"]["UB"]["capacity"] = 8192  # K chunks of a few dozen
    hw = hardware_from_dict(data, "small-ub")
    plan = KIND.plan(taskgraph_from_dict(d).tasks[0], hw)
    assert len(plan.k_spans) >= 3 and len({k1 - k0 for k0, k1 in plan.k_spans[:-1]}) == 1
    assert max_error(d, hw) <= 1e-3
    ops = lower(taskgraph_from_dict(d), hw).ops
    adds = [op for op in ops if op.attr.get("op") == "add"]
    assert adds and all(op.attr["rows"] == 1 for op in adds)
    assert {op.attr["op"] for op in ops if op.kind == "vec"} == {MAC, "add", "cast"}


@pytest.mark.parametrize("make", [gemv, batched], ids=["gemv", "batched-bias-gelu"])
def test_the_reference_is_float64_numpy_within_fp16_rounding(make):
    tg = taskgraph_from_dict(make())
    inputs = make_inputs(tg, 3)
    got = reference(tg, inputs)["y"].astype(np.float64)
    task = tg.tasks[0]
    a = inputs["x"].astype(np.float64).reshape(task.batches, task.m, task.k)
    want = (a @ inputs["w"].astype(np.float64)).reshape(-1, task.n)
    if task.epilogue:
        want = want + inputs["bias"].astype(np.float64).reshape(1, -1)
        want = 0.5 * want * (1 + np.tanh(math.sqrt(2 / math.pi) * (want + 0.044715 * want**3)))
    assert np.all(np.abs(got - want) <= 4e-3 * np.maximum(1.0, np.abs(want)))


# --------------------------------------------------------------------------- scheduled, verified


@HWS
@pytest.mark.parametrize("make", [gemv, batched], ids=["gemv", "batched-bias-gelu"])
def test_scheduled_programs_verify_clean_with_numbers_on_the_vector_cores(hw, make):
    tg = taskgraph_from_dict(make())
    compiled = compile_graph(tg, hw, method="list")
    report = verify(compiled.program, hw, jitter=1, numeric=True)
    assert report.ok, report.text()
    ops = compiled.schedule.graph.ops
    assert {op.kind for op in ops} == {"load", "vec", "store"}
    vector_cores = set(hw.engine_cores("vector"))
    assert {op.core for op in ops} <= vector_cores
    if hw.split:  # the AIVs, never an AIC
        assert not vector_cores & set(hw.engine_cores("cube"))
    # the units spread over the cores
    assert len({op.core for op in ops}) == min(len(vector_cores), tiling_info(tg, hw)[0].blocks)


def test_the_public_schedule_takes_the_key():
    s = staticsched.schedule(taskgraph_from_dict(gemv()), "seed-davinci", method="list")
    assert s.makespan > 0 and not any(op.kind == "mmad" for op in s.graph.ops)


@pytest.mark.parametrize("make", [gemv, batched], ids=["gemv", "batched-bias-gelu"])
def test_engine_cube_given_is_the_cube_lowering(make):
    absent = compile_graph(taskgraph_from_dict(make(engine=None)), SEED, method="list")
    cube = compile_graph(taskgraph_from_dict(make(engine="cube")), SEED, method="list")
    # the same program; only the embedded source TaskGraph says "engine": "cube"
    assert attrs.evolve(cube.program, source="") == attrs.evolve(absent.program, source="")
    assert cube.schedule.graph.ops == absent.schedule.graph.ops
    assert json.loads(cube.program.source)["tasks"][0]["engine"] == "cube"
    assert "engine" not in json.loads(absent.program.source)["tasks"][0]
    assert any(op.kind == "mmad" for op in absent.schedule.graph.ops)


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("engine", [None, "cube", "vector"])
def test_json_round_trip_writes_engine_only_when_given(engine):
    tg = taskgraph_from_dict(batched(engine=engine))
    task = tg.tasks[0]
    assert task.engine == (engine or "")
    out = KIND.to_dict(task)
    assert out.get("engine") == engine and ("engine" in out) == (engine is not None)
    again = taskgraph_from_dict(json.loads(dumps_taskgraph(tg)))
    assert again == tg


# --------------------------------------------------------------------------- the tile


@HWS
def test_the_derived_tile_fits_the_vector_buffer_double_buffered_and_is_reported(hw):
    tg = taskgraph_from_dict(_mm({"x": (1, 4096), "w": (4096, 4096), "y": (1, 4096)}))
    plan = KIND.plan(tg.tasks[0], hw)
    assert isinstance(plan, VectorPlan)
    t = plan.tiling
    ub = hw.space(hw.role("vector"))
    assert 2 * working_set(tg.tasks[0], t.base_m, t.base_n, t.base_k, ub.alignment) <= ub.capacity
    assert t.base_m == 1 and t.base_n % 16 == 0 and t.base_k % 16 == 0
    info = tiling_info(tg, hw)[0]
    assert info.text().startswith(f"mm: matmul on the Vector engine, base m/n/k 1/{t.base_n}/{t.base_k} "
                                  f"(derived), double buffered, {plan.blocks} blocks")
    assert info.as_dict()["base"] == [1, t.base_n, t.base_k]
    assert plan.blocks == math.ceil(4096 / t.base_n)
    # rows sharing one b: M = 5 over two batch elements of a 2-D b is one group of 10 rows
    assert KIND.plan(taskgraph_from_dict(batched()).tasks[0], hw).tiling.base_m == 10


def test_a_chip_without_a_cube_runs_the_vector_lowering():
    data, _ = hardware_document("seed-davinci")
    del data["cube"]
    hw = hardware_from_dict(data, "no-cube")
    assert max_error(gemv(), hw) <= 1e-3
    with pytest.raises(GraphError, match=r"no \[cube\] section"):
        lower(taskgraph_from_dict(gemv(engine=None)), hw)


def test_a_vector_buffer_too_small_for_any_tile_is_one_line():
    data, _ = hardware_document("seed-davinci")
    data["spaces"]["UB"]["capacity"] = 1024
    hw = hardware_from_dict(data, "tiny-ub")
    with pytest.raises(TilingError) as exc:
        lower(taskgraph_from_dict(gemv()), hw)
    assert exc.value.problems == ("task 'mm': engine 'vector': UB 1024 B cannot hold the smallest tile "
                                  "(1 row, 16 columns, 16 of K) twice: 1408 B with the fp32 sums and the "
                                  "epilogue's operands",)


# --------------------------------------------------------------------------- refused input


W = "<taskgraph>: task 'mm': "


@pytest.mark.parametrize("task, error, line", [
    ({"engine": "gpu"}, GraphError, "'engine' = 'gpu' is not one of cube, vector"),
    ({"engine": 1}, GraphError, "'engine' must be a string, got 1"),
    ({"engine": "vector", "epilogue": [{"op": "bias", "tensor": "bias"}, {"op": "softmax"}]}, GraphError,
     "engine 'vector': the row reduction (softmax) in the epilogue is not lowered on the Vector engine; "
     "make it a separate rowwise task"),
    ({"engine": "vector", "tiling": {"base_m": 16, "base_n": 16, "base_k": 16, "split_k": 2}}, TilingError,
     "engine 'vector' takes no 'tiling' (base_m/base_n/base_k, steps, split_k are the Cube lowering's); its "
     "tile is derived"),
])
def test_bad_input_is_one_line_each(task, error, line):
    d = graph({"x": (1, 64), "w": (64, 32), "bias": (32,), "y": (1, 32)},
              {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", **task})
    with pytest.raises(error) as exc:
        taskgraph_from_dict(d)
    assert type(exc.value) is error and exc.value.problems == (W + line,)


def test_the_cli_refuses_an_unknown_engine_in_one_line(tmp_path, capsys):
    code, lines = cli_error_lines(gemv(engine="npu"), tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and "'engine' = 'npu' is not one of cube, vector" in lines[0]


def test_a_tiling_set_after_reading_is_a_tiling_error():
    task = attrs.evolve(taskgraph_from_dict(gemv()).tasks[0], tiling=KIND.plan(
        taskgraph_from_dict(gemv(engine=None)).tasks[0], SEED).tiling)
    with pytest.raises(StaticschedError, match="engine 'vector' takes no 'tiling'"):
        KIND.plan(task, SEED)


# --------------------------------------------------------------------------- the Vector op


def test_colsum_mul_row_is_a_lowering_only_column_reduction_costing_two_passes():
    vop = VECOPS[MAC]
    assert (vop.operands, vop.out, vop.passes) == (("full", "row"), "col", 2.0)
    assert not vop.user and not vop.combine and not vop.reduces
    assert MAC not in USER_OPS and MAC not in EPILOGUE_OPS and MAC not in ELEMENTWISE_OPS
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (37, 11)).astype(np.float16).astype(np.float32)
    r = rng.uniform(-1, 1, (37, 1)).astype(np.float16).astype(np.float32)
    got = vop.apply([x, r], {})
    assert got.dtype == np.float32 and got.shape == (1, 11)
    want = (x.astype(np.float64) * r.astype(np.float64)).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # cycles = 8 + ceil(bytes of the fp16 tile * 2 passes / 256): the fp32 result row is no full operand
    tile = item_shape("UB", 464 * 128 * 2, "float16", (464, 128))
    col = item_shape("UB", 464 * 2, "float16", (464, 1))
    out = item_shape("UB", 128 * 4, "float32", (1, 128))
    a = {"op": MAC, "rows": 464, "cols": 128}
    assert OPKINDS["vec"].duration(SEED, a, [tile, col], [out]) == 8 + 464 * 128 * 2 * 2 // 256
    assert OPKINDS["vec"].extents(a, [tile, col], [out]) == []
    assert OPKINDS["vec"].extents(a, [tile, out], [out]) != []  # the row operand is [rows, 1]
