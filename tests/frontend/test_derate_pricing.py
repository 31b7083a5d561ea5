"""The fusion balance rule and the intensity rule price the Cube's ND2NZ conversions (issue 48,
item 1): an ND operand's loads convert at its tile's ratio on a chip that prices layouts, so
the matmul takes longer and its Cube-side intensity is lower; NZ operands, and chips that price
no layouts, are unchanged."""

from __future__ import annotations

from common import preset

from staticsched.frontend.fusion import _cube_cycles
from staticsched.frontend.mapping import mapping
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.tasks.matmul.tiling import derive_tiling

A2 = preset("ascend-a2")
SEED = preset("seed-davinci")


def _graph(a_layout: str = "ND", m: int = 128, k: int = 256, n: int = 256):
    x = {"shape": [m, k]} | ({"layout": a_layout} if a_layout != "ND" else {})
    return taskgraph_from_dict({
        "format": "staticsched.taskgraph", "version": 1,
        "tensors": {"x": x, "w": {"shape": [k, n], "layout": "NZ"}, "y": {"shape": [m, n]}},
        "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y"}]})


def _task(tg):
    return next(t for t in tg.tasks if t.id == "mm")


def test_the_balance_rule_counts_an_nd_operands_converting_loads():
    nd, nz = _task(_graph("ND")), _task(_graph("NZ"))
    # the ND activation's loads convert: the matmul's time grows by the derated A bytes
    assert _cube_cycles(nd, A2) > _cube_cycles(nz, A2)
    # no layout pricing on the coupled chip: both alike
    assert _cube_cycles(nd, SEED) == _cube_cycles(nz, SEED)


def test_the_balance_rule_is_at_least_the_macs_at_the_cubes_rate():
    t = _task(_graph("NZ", m=256, k=512, n=256))
    macs = t.m * t.n * t.k / dict(A2.cube.macs_per_cycle)["float16"] / len(A2.engine_cores("cube"))
    assert _cube_cycles(t, A2) >= macs


def test_the_intensity_rule_prices_conversions_of_nd_cube_operands_only():
    _, (nd,) = mapping(_graph("ND"), A2)
    _, (nz,) = mapping(_graph("NZ"), A2)
    _, (seed,) = mapping(_graph("ND"), SEED)
    assert nd.converted > 0 and nd.cube_intensity < nd.intensity
    assert "ND2NZ conversion" in nd.line()
    assert nz.converted == 0 and nz.cube_intensity == nz.intensity
    assert seed.converted == 0
    # the conversion's byte-equivalents are x's bytes times its tile's ratio less one
    t = derive_tiling(_task(_graph("ND")), A2)
    ratio = A2.cube.nd2nz_ratio(t.base_m, t.base_k, 256)
    assert ratio > 1.0
    assert nd.converted == round(128 * 256 * 2 * (ratio - 1.0))
