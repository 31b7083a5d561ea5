"""Tilings: the seed's 128/128/128, refusals that show the arithmetic, derived tilings that are
legal and maximal, and elementwise row tiles that fit UB."""

from __future__ import annotations

import itertools
import math

import attrs
import pytest
from common import EXAMPLES, SEED
from hypothesis import given, settings
from hypothesis import strategies as st

from staticsched.errors import TilingError
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import load_taskgraph
from staticsched.model.hardware import Hardware
from staticsched.tasks.elementwise import ElementwiseTask, RowTiling, derive_row_tiling
from staticsched.tasks.matmul import EpilogueStep, MatmulTask, Tiling
from staticsched.tasks.matmul.tiling import check_tiling, derive_tiling, matmul_requirements


def _mm(m: int, n: int, k: int, epilogue=()) -> MatmulTask:
    return MatmulTask(id="mm", a="x", b="w", out="y", m=m, n=n, k=k, epilogue=epilogue)


def _shrunk(hw: Hardware, factor: int) -> Hardware:
    """``hw`` with every on-chip capacity divided by ``factor`` (binding constraints move)."""
    spaces = [attrs.evolve(s, capacity=s.capacity // factor) if s.bounded else s for s in hw.spaces]
    return attrs.evolve(hw, spaces=spaces)


def test_seed_gemm_derives_128_cubed():
    (task,) = load_taskgraph(EXAMPLES / "matmul_gelu.json").tasks
    assert task.tiling is None
    assert derive_tiling(task, SEED) == Tiling(128, 128, 128, double_buffer=True)


def test_seed_gemm_requirements_match_the_article():
    # seed §4.3: L0A/L0B tiles of 32 KiB, twice; L0C block 64 KiB, twice; L1 (32+32) KiB twice
    reqs = {r.space: r.bytes for r in matmul_requirements(_mm(4096, 4096, 4096), 128, 128, 128, 2)}
    assert reqs == {"L0A": 65536, "L0B": 65536, "L0C": 131072, "L1": 131072, "UB": 65536}


def test_explicit_base_k_512_is_refused_with_the_l0a_arithmetic():
    task = _mm(4096, 4096, 4096)
    with pytest.raises(TilingError) as exc:
        check_tiling(task, Tiling(128, 128, 512, double_buffer=True), SEED)
    lines = exc.value.problems
    assert "task 'mm': base_m*base_k*2 B*2 buffers = 128*512*2*2 = 262144 B > L0A 65536 B" in lines
    assert "task 'mm': base_k*base_n*2 B*2 buffers = 512*128*2*2 = 262144 B > L0B 65536 B" in lines


def test_lower_refuses_an_explicit_tiling_that_does_not_fit():
    tg = load_taskgraph(EXAMPLES / "matmul_gelu.json")
    bad = attrs.evolve(tg, tasks=[attrs.evolve(tg.tasks[0], tiling=Tiling(128, 128, 512))])
    with pytest.raises(TilingError, match=r"128\*512\*2\*2 = 262144 B > L0A 65536 B"):
        lower(bad, SEED)


def test_single_buffering_halves_the_requirement():
    task = _mm(4096, 4096, 4096)
    check_tiling(task, Tiling(128, 128, 256, double_buffer=False), SEED)  # 128*256*2*1 = 64 KiB
    with pytest.raises(TilingError, match=r"base_m\*base_k\*2 B\*1 buffer = 128\*512\*2\*1 = 131072 B"):
        check_tiling(task, Tiling(128, 128, 512, double_buffer=False), SEED)


@pytest.mark.parametrize(("sizes", "key"), [((100, 128, 128), "base_m"), ((128, 128, 0), "base_k")])
def test_base_sizes_must_be_fractal_multiples(sizes, key):
    with pytest.raises(
        TilingError,
        match=f"tiling {key} = {sizes[('base_m', 'base_n', 'base_k').index(key)]} "
        "must be a positive multiple of 16 \\(the Cube works on whole 16x16x16",
    ):
        check_tiling(_mm(256, 256, 256), Tiling(*sizes), SEED)


def test_epilogue_operands_count_in_ub():
    task = _mm(256, 256, 256, (EpilogueStep("bias", "b"), EpilogueStep("add", "r"), EpilogueStep("gelu")))
    (ub,) = [r for r in matmul_requirements(task, 128, 64, 32, 2) if r.space == "UB"]
    assert ub.formula == "(base_m*base_n + base_n + base_m*base_n)*2 B*2 buffers"
    assert ub.factors == "(128*64 + 64 + 128*64)*2*2"
    assert ub.bytes == (128 * 64 + 64 + 128 * 64) * 2 * 2


def test_m1_clamps_base_m_to_one_fractal():
    t = derive_tiling(_mm(1, 4096, 4096, (EpilogueStep("bias", "b"), EpilogueStep("gelu"))), SEED)
    assert t.base_m == 16
    check_tiling(_mm(1, 4096, 4096), t, SEED)


def test_no_tiling_fits_a_tiny_core():
    tiny = _shrunk(SEED, 1024)  # L0A 64 B: not even a 16x16 fp16 tile
    with pytest.raises(
        TilingError, match=r"base_m\*base_k\*2 B\*2 buffers = 16\*16\*2\*2 = 1024 B > L0A 64 B"
    ):
        derive_tiling(_mm(64, 64, 64), tiny)


def _legal(task: MatmulTask, t: Tiling, hw: Hardware) -> bool:
    try:
        check_tiling(task, t, hw)
    except TilingError:
        return False
    return True


def _pad16(x: int) -> int:
    return -(-x // 16) * 16


_epilogues = st.lists(
    st.sampled_from([EpilogueStep("bias", "b"), EpilogueStep("add", "r"), EpilogueStep("gelu")]), max_size=3
)


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
    shrink=st.sampled_from([1, 2, 4, 8, 16]),
    epilogue=_epilogues,
)
def test_derived_tiling_is_legal_and_maximal(m, n, k, shrink, epilogue):
    hw = _shrunk(SEED, shrink)
    task = _mm(m, n, k, tuple(epilogue))
    t = derive_tiling(task, hw)
    assert t.double_buffer
    assert _legal(task, t, hw)
    for size, dim in ((t.base_m, m), (t.base_n, n), (t.base_k, k)):
        assert size % 16 == 0 and 16 <= size <= _pad16(dim)
    # maximal: growing any one base size by a fractal leaves the problem or the hardware
    for grown in (
        attrs.evolve(t, base_m=t.base_m + 16),
        attrs.evolve(t, base_n=t.base_n + 16),
        attrs.evolve(t, base_k=t.base_k + 16),
    ):
        inside = grown.base_m <= _pad16(m) and grown.base_n <= _pad16(n) and grown.base_k <= _pad16(k)
        assert not (inside and _legal(task, grown, hw)), grown


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 160),
    n=st.integers(1, 160),
    k=st.integers(1, 160),
    shrink=st.sampled_from([4, 8, 16, 32]),
    epilogue=_epilogues,
)
def test_derived_tiling_is_the_documented_choice_among_all_legal_ones(m, n, k, shrink, epilogue):
    """Brute force over every fractal-multiple tiling, legality from check_tiling: the derived one
    maximises the smallest base size, then the next, then prefers square, larger base_k."""
    hw = _shrunk(SEED, shrink)
    task = _mm(m, n, k, tuple(epilogue))
    legal = [
        Tiling(bm, bn, bk)
        for bm, bn, bk in itertools.product(
            range(16, _pad16(m) + 1, 16), range(16, _pad16(n) + 1, 16), range(16, _pad16(k) + 1, 16)
        )
        if _legal(task, Tiling(bm, bn, bk), hw)
    ]
    if not legal:
        with pytest.raises(TilingError):
            derive_tiling(task, hw)
        return
    best = max(
        legal,
        key=lambda t: (
            sorted((t.base_m, t.base_n, t.base_k)),
            t.base_m == t.base_n,
            t.base_k,
            t.base_m * t.base_n,
            t.base_m,
        ),
    )
    assert derive_tiling(task, hw) == best


# --------------------------------------------------------------------------- elementwise


def _ew(op: str, rows: int, cols: int) -> ElementwiseTask:
    arity = 1 if op in ("relu", "gelu", "scale", "cast") else 2
    inputs = ("x", "b") if op == "bias" else ("x", "z")[:arity]
    return ElementwiseTask(id="ew", op=op, inputs=inputs, out="o", rows=rows, cols=cols)


def _ub_bytes(task: ElementwiseTask, t: RowTiling, align: int) -> int:
    """Double-buffered UB bytes of one tile: inputs in place, the bias operand one row."""
    total = 0
    for j in range(len(task.inputs)):
        rows = 1 if (task.op == "bias" and j == 1) else t.rows
        total += math.ceil(rows * t.cols * 2 / align) * align
    return 2 * total


def test_chain_rows_spread_over_cores():
    # 96 rows on 16 cores, two tiles per core: ceil(96 / 32) = 3 rows, full 160-column rows
    assert derive_row_tiling(_ew("add", 96, 160), SEED) == RowTiling(3, 160)


def test_large_elementwise_takes_as_many_rows_as_fit():
    # two 4096-column fp16 inputs: 2 buffers * 2 inputs * rows * 8192 B <= 256 KiB -> 8 rows
    t = derive_row_tiling(_ew("add", 4096, 4096), SEED)
    assert t == RowTiling(8, 4096)
    assert _ub_bytes(_ew("add", 4096, 4096), attrs.evolve(t, rows=9), 32) > 262144


def test_a_row_too_wide_for_ub_splits_columns():
    task = _ew("relu", 2, 200_000)
    t = derive_row_tiling(task, SEED)
    assert t == RowTiling(1, 65536)  # 2 buffers * 65536 * 2 B = 256 KiB
    assert _ub_bytes(task, attrs.evolve(t, cols=t.cols + 16), 32) > 262144


def test_ub_too_small_for_one_row_unit():
    with pytest.raises(TilingError, match="task 'ew': UB 64 B cannot hold 2 input tile"):
        derive_row_tiling(_ew("add", 4, 4), _shrunk(SEED, 4096))


@settings(max_examples=80, deadline=None)
@given(
    op=st.sampled_from(["add", "mul", "bias", "relu", "gelu", "scale"]),
    rows=st.integers(1, 3000),
    cols=st.integers(1, 70_000),
    shrink=st.sampled_from([1, 4, 16, 64]),
)
def test_row_tiles_fit_ub_and_use_it(op, rows, cols, shrink):
    hw = _shrunk(SEED, shrink)
    ub = hw.space("UB")
    task = _ew(op, rows, cols)
    try:
        t = derive_row_tiling(task, hw)
    except TilingError:
        # only when one alignment unit of every input, twice, overflows UB
        assert _ub_bytes(task, RowTiling(1, min(cols, 16)), ub.alignment) > ub.capacity
        return
    assert _ub_bytes(task, t, ub.alignment) <= ub.capacity
    assert 1 <= t.rows <= rows and 1 <= t.cols <= cols
    if t.cols == cols:
        # full rows: as many as fit, capped so every core gets two tiles' worth of rows
        spread = math.ceil(rows / (2 * hw.cores))
        more = attrs.evolve(t, rows=t.rows + 1)
        assert t.rows == spread or t.rows == rows or _ub_bytes(task, more, ub.alignment) > ub.capacity
    else:
        assert t.rows == 1 and t.cols % 16 == 0
        assert _ub_bytes(task, RowTiling(1, cols), ub.alignment) > ub.capacity
        assert _ub_bytes(task, attrs.evolve(t, cols=t.cols + 16), ub.alignment) > ub.capacity
