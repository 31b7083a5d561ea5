"""The kind table executes what each instruction says: its own extents, never the tiles' shapes;
OpGraph.check holds kinded ops to their extents and to the cost model."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from common import SEED

from staticsched.errors import GraphError
from staticsched.model.opgraph import Item, Op, OpGraph, Tensor
from staticsched.model.opkinds import KINDS, extent_problems, item_shape, shape_key


def _tile(shape, dtype="float16", fill=np.nan):
    return np.full(shape, fill, dtype=dtype)


def test_mmad_computes_only_its_own_m_n_k_and_leaves_the_rest_of_c():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (32, 32)).astype(np.float16)
    b = rng.uniform(-1, 1, (32, 32)).astype(np.float16)
    c = _tile((32, 32), "float32", 7.0)
    KINDS["mmad"].semantics({"m": 16, "n": 8, "k": 4, "init": True}, [a, b], [c], {})
    want = a[:16, :4].astype(np.float32) @ b[:4, :8].astype(np.float32)
    assert np.array_equal(c[:16, :8], want)
    assert (c[16:, :] == 7.0).all() and (c[:, 8:] == 7.0).all()
    # accumulation adds the product of the stated extents only
    KINDS["mmad"].semantics({"m": 16, "n": 8, "k": 4, "init": False}, [a, b, c], [c], {})
    assert np.array_equal(c[:16, :8], want + want)


def test_moves_vectors_loads_and_stores_touch_exactly_their_extent():
    src = np.arange(64, dtype=np.float16).reshape(8, 8)
    dst = _tile((8, 8))
    KINDS["move"].semantics({"rows": 3, "cols": 5}, [src], [dst], {})
    assert np.array_equal(dst[:3, :5], src[:3, :5]) and np.isnan(dst[3:]).all() and np.isnan(dst[:, 5:]).all()

    out = _tile((8, 8))
    KINDS["vec"].semantics({"op": "scale", "rows": 2, "cols": 4, "scalar": 2.0}, [src], [out], {})
    assert np.array_equal(out[:2, :4], src[:2, :4] * 2) and np.isnan(out[2:]).all()

    bias = np.arange(8, dtype=np.float16).reshape(1, 8)
    out = _tile((8, 8))
    KINDS["vec"].semantics({"op": "bias", "rows": 4, "cols": 8}, [src, bias], [out], {})
    assert np.array_equal(out[:4], src[:4] + bias) and np.isnan(out[4:]).all()

    gm = {"x": np.arange(100, dtype=np.float16).reshape(10, 10)}
    tile = _tile((8, 8))
    KINDS["load"].semantics({"tensor": "x", "region": ((2, 5), (1, 3)), "transpose": True}, [], [tile], gm)
    assert np.array_equal(tile[:2, :3], gm["x"][2:5, 1:3].T)
    assert np.isnan(tile[2:]).all() and np.isnan(tile[:, 3:]).all()  # no zero padding

    gm["y"] = _tile((10, 10))
    KINDS["store"].semantics({"tensor": "y", "region": ((4, 6), (0, 3))}, [src], [], gm)
    assert np.array_equal(gm["y"][4:6, 0:3], src[:2, :3])
    assert np.isnan(gm["y"][:4]).all() and np.isnan(gm["y"][6:]).all() and np.isnan(gm["y"][4:6, 3:]).all()


def test_an_extent_larger_than_its_operand_is_an_error_not_a_clip():
    src, dst = _tile((8, 8)), _tile((8, 8))
    with pytest.raises(ValueError, match="extent 9x8 does not fit an operand of shape"):
        KINDS["move"].semantics({"rows": 9, "cols": 8}, [src], [dst], {})
    shapes = [item_shape("L1", 128, "float16", (8, 8))]
    assert extent_problems(KINDS["move"], {"rows": 9, "cols": 8}, shapes, shapes) == [
        "the source extent 9x8 does not fit its 8x8 tile",
        "the destination extent 9x8 does not fit its 8x8 tile",
    ]
    assert extent_problems(KINDS["mmad"], {"m": 8, "n": 8, "k": 0}, shapes * 2, shapes) == [
        "'k' must be >= 1, got 0"
    ]


def test_durations_follow_the_stated_extent():
    l1 = item_shape("L1", 128 * 128 * 2, "float16", (128, 128))
    l0a = item_shape("L0A", 128 * 128 * 2, "float16", (128, 128))
    full = KINDS["move"].duration(SEED, {"rows": 128, "cols": 128}, [l1], [l0a])
    half = KINDS["move"].duration(SEED, {"rows": 64, "cols": 128}, [l1], [l0a])
    path = SEED.path("L1", "L0A")
    assert (full, half) == (path.cycles(128 * 128 * 2), path.cycles(64 * 128 * 2))
    ub = item_shape("UB", 128 * 128 * 2, "float16", (128, 128))
    assert KINDS["vec"].duration(SEED, {"op": "gelu", "rows": 1, "cols": 16}, [ub], [ub]) == (
        SEED.vector.cycles("gelu", 32)
    )


def _graph(op: Op) -> OpGraph:
    items = [
        Item("a", "L1", 128 * 128 * 2, "float16", (128, 128)),
        Item("b", "L0A", 128 * 128 * 2, "float16", (128, 128)),
    ]
    region = ((0, 128), (0, 128))
    load = Op("ld", "MTE2", 32 + 137, 0, writes=["a"], kind="load", attrs={"tensor": "x", "region": region})
    return OpGraph(items, [load, op], [Tensor("x", (128, 128))])


def test_check_holds_kinded_ops_to_extents_and_the_cost_model():
    shapes = [item_shape("L1", 0, "float16", (128, 128))], [item_shape("L0A", 0, "float16", (128, 128))]
    cost = KINDS["move"].duration(SEED, {"rows": 128, "cols": 128}, *shapes)
    good = Op("mv", "MTE1", cost, 0, reads=["a"], writes=["b"], kind="move", attrs={"rows": 128, "cols": 128})
    _graph(good).check(SEED)
    cases = [
        (
            attrs.evolve(good, duration=cost + 1),
            f"op 'mv': duration {cost + 1} disagrees with the cost model of 'seed-davinci' for kind "
            f"'move' ({cost} cycles)",
        ),
        (attrs.evolve(good, attrs={"rows": 128}), "op 'mv': kind 'move' needs attribute 'cols'"),
        (
            attrs.evolve(good, attrs={"rows": 129, "cols": 128}),
            "op 'mv': the source extent 129x128 does not fit its 128x128 tile",
        ),
    ]
    for op, needle in cases:
        with pytest.raises(GraphError) as exc:
            _graph(op).check(SEED)
        assert needle in str(exc.value)


def test_an_accumulating_mmad_also_reads_its_output():
    # the kind table says so (``init``): the OpGraph check takes its read counts from there
    mmad, vec = KINDS["mmad"], KINDS["vec"]
    assert mmad.read_range({"m": 16, "n": 16, "k": 16}) == (2, 2)
    assert mmad.read_range({"m": 16, "n": 16, "k": 16, "init": True}) == (2, 2)
    assert mmad.read_range({"m": 16, "n": 16, "k": 16, "init": False}) == (3, 3)
    assert vec.read_range({"op": "add", "rows": 1, "cols": 1}) == (1, 2)


def test_ops_of_one_shape_share_a_key_and_each_is_still_checked():
    # the lowering and the graph check work out costs once per shape_key: a tile's place in
    # its tensor is not part of it, its shape and every other attribute are
    dst = [item_shape("L1", 128 * 128 * 2, "float16", (128, 128))]
    at = [{"tensor": "x", "region": ((r, r + 64), (0, 128))} for r in (0, 64)]
    assert shape_key("load", at[0].items(), (), dst) == shape_key("load", at[1].items(), (), dst)
    taller = {"tensor": "x", "region": ((0, 128), (0, 128))}
    other = {"tensor": "y", "region": ((0, 64), (0, 128))}
    for a in (taller, other):
        assert shape_key("load", a.items(), (), dst) != shape_key("load", at[0].items(), (), dst)
    with pytest.raises(ValueError):
        shape_key("load", {"region": ((0, 1),)}.items(), (), dst)
    # two loads of one shape, the second with a wrong duration: the memo does not hide it
    cost = KINDS["load"].duration(SEED, at[0], (), dst)
    items = [Item(n, "L1", 128 * 128 * 2, "float16", (128, 128)) for n in ("a", "b")]
    loads = [Op("l0", "MTE2", cost, 0, writes=["a"], kind="load", attrs=at[0]),
             Op("l1", "MTE2", cost + 5, 0, writes=["b"], kind="load", attrs=at[1])]
    with pytest.raises(GraphError) as exc:
        OpGraph(items, loads, [Tensor("x", (128, 128))]).check(SEED)
    assert [line for line in exc.value.problems if "disagrees" in line] == [
        f"op 'l1': duration {cost + 5} disagrees with the cost model of 'seed-davinci' for kind "
        f"'load' ({cost} cycles)"
    ]
