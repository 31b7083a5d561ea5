"""Task kinds and the vec-op table: the registry, hardware roles, the Vector ops and their
forms, batched matmuls with broadcast and transposes, elementwise row/column operands, row
reductions in matmul epilogues, and one line per bad input."""

from __future__ import annotations

import numpy as np
import pytest
from task_strategies import STRATEGIES
from taskcases import SEED, cli_error_lines, graph, max_error

from staticsched.errors import GraphError, HardwareError, TilingError
from staticsched.frontend.lowering import lower, plan_tasks, tiling_info
from staticsched.frontend.taskgraph import taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware_toml import hardware_document, hardware_from_dict
from staticsched.model.opkinds import KINDS as OPKINDS
from staticsched.model.opkinds import item_shape
from staticsched.model.vecops import VECOPS, extent
from staticsched.tasks import _MODULES, KINDS

# --------------------------------------------------------------------------- registry, roles


def test_registry_lists_each_kind_once_by_its_module():
    assert list(KINDS) == list(_MODULES)
    for name, kind in KINDS.items():
        module = __import__(f"staticsched.tasks.{name}", fromlist=["KIND"])
        assert module.KIND is kind and kind.name == name


def test_every_kind_has_a_test_strategy():
    # the end-to-end properties draw every registered kind through its strategy
    assert sorted(STRATEGIES) == sorted(KINDS)


def test_unknown_type_lists_the_registered_kinds():
    d = graph({"x": (4, 4), "y": (4, 4)}, {"id": "t", "type": "conv", "input": "x", "out": "y"})
    kinds = ", ".join(KINDS)
    with pytest.raises(GraphError, match=f"'type' = 'conv' is not one of {kinds}"):
        taskgraph_from_dict(d)


def test_roles_default_to_the_conventional_spaces_and_can_be_remapped():
    want = {"global": "GM", "operand": "L1", "cube_a": "L0A", "cube_b": "L0B", "accumulator": "L0C",
            "vector": "UB"}
    assert {r: SEED.role(r) for r in want} == want
    data, _ = hardware_document("seed-davinci")
    data["spaces"]["VB"] = data["spaces"].pop("UB")
    for p in data["paths"]:
        p["src"] = "VB" if p["src"] == "UB" else p["src"]
        p["dst"] = "VB" if p["dst"] == "UB" else p["dst"]
    for link in data["links"]:
        link["paths"] = [x.replace("UB", "VB") for x in link["paths"]]
    with pytest.raises(GraphError, match="no memory space 'UB' \\(role 'vector'"):
        lower(taskgraph_from_dict(graph({"x": (8, 8), "y": (8, 8)},
                                         {"id": "e", "type": "elementwise", "op": "relu", "inputs": ["x"],
                                          "out": "y"})), hardware_from_dict(data))
    data["roles"] = {"vector": "VB"}
    hw = hardware_from_dict(data)
    g = lower(taskgraph_from_dict(graph({"x": (8, 8), "y": (8, 8)},
                                         {"id": "e", "type": "elementwise", "op": "relu", "inputs": ["x"],
                                          "out": "y"})), hw)
    assert {it.space for it in g.items} == {"VB"}


@pytest.mark.parametrize(("roles", "needle"), [
    ({"vector": "L9"}, "roles: vector = 'L9' is not a declared space"),
    ({"global": "UB"}, "roles: global = 'UB' must be an unbounded space"),
    ({"vector": "GM"}, "roles: vector = 'GM' must be a bounded (on-chip) space"),
    ({"scratch": "UB"}, "roles: unknown key 'scratch'"),
])
def test_bad_roles_are_one_line_each(roles, needle):
    data, _ = hardware_document("seed-davinci")
    data["roles"] = roles
    with pytest.raises(HardwareError) as exc:
        hardware_from_dict(data, "hw.toml")
    assert len(exc.value.problems) == 1 and needle in exc.value.problems[0]


def test_vector_passes_must_name_table_ops():
    data, _ = hardware_document("seed-davinci")
    data["vector"]["passes"]["gleu"] = 2.0
    with pytest.raises(HardwareError, match="unknown vector op 'gleu'"):
        hardware_from_dict(data)


# --------------------------------------------------------------------------- the vec-op table


@pytest.mark.parametrize("name", sorted(VECOPS))
def test_every_vec_op_touches_exactly_its_extent(name):
    """Operands cut to their forms' extents, the result written to the destination's extent
    and nothing else, in the destination's dtype."""
    vop = VECOPS[name]
    rng = np.random.default_rng(0)
    rows, cols = 5, 7
    reads = []
    for form in vop.forms(vop.max_reads()):
        r, c = extent(form, rows, cols)
        reads.append(rng.uniform(0.5, 2.0, (r + 2, c + 3)).astype(np.float32))
    out_r, out_c = extent(vop.out, rows, cols)
    dst = np.full((out_r + 1, out_c + 1), 7.0, dtype=np.float16)
    a = {"op": name, "rows": rows, "cols": cols, "scalar": 0.5, "row0": 2, "col0": 1}
    OPKINDS["vec"].semantics(a, reads, [dst], {})
    want = vop.apply([x[:extent(f, rows, cols)[0], :extent(f, rows, cols)[1]]
                      for x, f in zip(reads, vop.forms(len(reads)), strict=True)], a)
    assert np.array_equal(dst[:out_r, :out_c], want.astype(np.float16), equal_nan=True)
    assert (dst[out_r:, :] == 7.0).all() and (dst[:, out_c:] == 7.0).all()


def test_reductions_combine_with_a_running_value_and_cost_the_full_extent():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    acc = np.array([[100.0], [0.0], [-1.0]], dtype=np.float32)
    assert VECOPS["rowmax"].apply([x, acc], {}).ravel().tolist() == [100, 7, 11]
    assert VECOPS["rowsum"].apply([x, acc], {}).ravel().tolist() == [106, 22, 37]
    vec = OPKINDS["vec"]
    full16 = item_shape("UB", 64 * 128 * 2, "float16", (64, 128))
    full32 = item_shape("UB", 64 * 128 * 4, "float32", (64, 128))
    row32 = item_shape("UB", 64 * 4, "float32", (64, 1))
    a = {"op": "rowmax", "rows": 64, "cols": 128}
    # cycles = 8 + ceil(bytes * passes / 256): the fp32 input costs twice the fp16 one
    assert vec.duration(SEED, a, [full32], [row32]) == 8 + 64 * 128 * 4 // 256
    assert vec.duration(SEED, a, [full16], [row32]) == 8 + 64 * 128 * 2 // 256
    assert vec.extents({**a, "op": "bias"}, [full16], [full16]) == ["vec op 'bias' takes 2 operand(s), got 1"]


def test_causal_mask_is_minus_infinity_past_the_diagonal():
    x = np.zeros((3, 4), dtype=np.float32)
    y = VECOPS["mask_causal"].apply([x], {"row0": 1, "col0": 0})
    # query row0 + i sees keys up to its own index
    assert np.isneginf(y).tolist() == [[False, False, True, True], [False, False, False, True],
                                       [False, False, False, False]]


# --------------------------------------------------------------------------- matmul, elementwise


@pytest.mark.parametrize(("a", "b", "out", "ta", "tb"), [
    ((2, 3, 40, 24), (24, 50), (2, 3, 40, 50), False, False),     # 2-D b broadcast
    ((3, 24, 40), (3, 50, 24), (3, 40, 50), True, True),           # batched b, both transposed
    ((40, 24), (2, 24, 50), (2, 40, 50), False, False),            # a broadcast
    ((2, 1, 40, 24), (1, 3, 24, 50), (2, 3, 40, 50), False, False),  # size-1 dims broadcast
])
def test_batched_matmul_with_broadcast_and_transposes_matches_numpy(a, b, out, ta, tb):
    d = graph({"a": a, "b": b, "bias": (50,), "r": (*out[:-1], 1), "y": out},
               {"id": "mm", "type": "matmul", "a": "a", "b": "b", "out": "y", "transpose_a": ta,
                "transpose_b": tb,
                "epilogue": [{"op": "bias", "tensor": "bias"}, {"op": "sub_row", "tensor": "r"}],
                "tiling": {"base_m": 16, "base_n": 32, "base_k": 16}})
    assert max_error(d) <= 4e-3
    tg = taskgraph_from_dict(d)
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg


def test_batch_dims_that_do_not_broadcast_are_refused():
    d = graph({"a": (2, 8, 8), "b": (3, 8, 8), "y": (2, 8, 8)},
               {"id": "mm", "type": "matmul", "a": "a", "b": "b", "out": "y"})
    with pytest.raises(GraphError, match=r"batch dims of a 'a' \[2\] and b 'b' \[3\] do not broadcast"):
        taskgraph_from_dict(d)


@pytest.mark.parametrize(("op", "shape"), [("sub_row", (2, 30, 1)), ("mul_row", (2, 30, 1)),
                                           ("div_row", (2, 30, 1)), ("mul_col", (70,)), ("exp", None),
                                           ("max", (2, 30, 70)), ("adds", None)])
def test_elementwise_row_column_and_full_operands(op, shape):
    tensors = {"x": (2, 30, 70), "o": (2, 30, 70)}
    inputs = ["x"]
    if shape is not None:
        tensors["z"] = shape
        inputs.append("z")
    task = {"id": "e", "type": "elementwise", "op": op, "inputs": inputs, "out": "o"}
    if op == "adds":
        task["value"] = 0.25
    d = graph(tensors, task)
    if op == "div_row":  # a divisor away from zero: r * r + 1
        d["tensors"]["r"] = {"shape": [2, 30, 1]}
        d["tensors"]["rr"] = {"shape": [2, 30, 1]}
        d["tasks"] = [{"id": "sq", "type": "elementwise", "op": "mul", "inputs": ["r", "r"], "out": "rr"},
                      {"id": "p", "type": "elementwise", "op": "adds", "inputs": ["rr"], "out": "z",
                       "value": 1.0},
                      task]
    assert max_error(d) <= 4e-3


# --------------------------------------------------------------------------- row reductions in epilogues


@pytest.mark.parametrize("epilogue", [
    [{"op": "softmax"}],
    [{"op": "scale", "value": 0.5}, {"op": "layernorm", "gamma": "g", "beta": "b"}, {"op": "relu"}],
    [{"op": "rmsnorm", "gamma": "g", "eps": 0.01}, {"op": "softmax"}],
])
@pytest.mark.parametrize("base_n", [32, 128])
def test_row_reductions_in_a_matmul_epilogue_keep_the_row_panel_on_chip(epilogue, base_n):
    d = graph({"x": (2, 45, 40), "w": (40, 100), "g": (100,), "b": (100,), "y": (2, 45, 100)},
               {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "epilogue": epilogue,
                "tiling": {"base_m": 16, "base_n": base_n, "base_k": 32}})
    assert max_error(d) <= 4e-3
    tg = taskgraph_from_dict(d)
    (info,) = tiling_info(tg, SEED)
    assert info.combine == ("two-pass" if base_n == 32 else "single")
    assert info.blocks == 2 * 3  # row panels: batch x M spans
    g = lower(tg, SEED)
    # a row panel (all of its N-blocks) runs on one core
    cores = {}
    for op in g.ops:
        if op.kind == "store":
            cores.setdefault(op.attr["region"][0], set()).add(op.core)
    assert all(len(c) == 1 for c in cores.values())


def test_a_row_panel_that_does_not_fit_the_vector_buffer_is_refused_with_the_arithmetic():
    d = graph({"x": (64, 64), "w": (64, 65536), "y": (64, 65536)},
               {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                "epilogue": [{"op": "softmax"}]})
    with pytest.raises(TilingError, match=r"task 'mm': \(base_m\*N \+ 4\*base_m\*2\)\*2 B\*2 buffers = "
                                          r"\(16\*65536 \+ 4\*16\*2\)\*2\*2 = \d+ B > UB 262144 B"):
        plan_tasks(taskgraph_from_dict(d), SEED)


def test_rank_5_is_one_line_and_exit_2(tmp_path, capsys):
    d = graph({"x": (2, 2, 2, 4, 8), "y": (32, 8)},
              {"id": "e", "type": "elementwise", "op": "relu", "inputs": ["x"], "out": "y"})
    code, lines = cli_error_lines(d, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and "'shape' must be a list of 1 to 4 integers" in lines[0], lines
