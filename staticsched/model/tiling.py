"""Tile sizes: checking explicit matmul tilings, deriving missing ones, and elementwise row tiles.

A matmul tile is ``base_m x base_n`` of output with ``base_k`` of reduction per
step (seed article 000, §4.3). Per core and per buffer it needs an A tile in L0A,
a B tile in L0B, an fp32 accumulator block in L0C, both input tiles again in L1,
and in UB the fp16 output block plus one tile per epilogue operand. With double
buffering each of these is needed twice, so that the next tile can be filled
while the current one is used. :func:`matmul_requirements` states those
inequalities once; checking and deriving both read them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from staticsched._fields import Problems
from staticsched.errors import TilingError
from staticsched.model.hardware import DTYPE_BYTES, Hardware

if TYPE_CHECKING:
    from staticsched.model.taskgraph import ElementwiseTask, MatmulTask

#: operand and output element bytes (fp16) and accumulator element bytes (fp32)
ELEM_BYTES = DTYPE_BYTES["float16"]
ACC_BYTES = DTYPE_BYTES["float32"]


@attrs.frozen
class Tiling:
    """Base tile sizes of a matmul; ``double_buffer`` reserves room for two of every tile."""

    base_m: int
    base_n: int
    base_k: int
    double_buffer: bool = True

    @property
    def buffers(self) -> int:
        return 2 if self.double_buffer else 1


@attrs.frozen
class RowTiling:
    """Tiles of an elementwise task: ``rows`` full-width rows, or 1 row of ``cols`` columns."""

    rows: int
    cols: int


@attrs.frozen
class Requirement:
    """One capacity inequality: ``bytes`` (= ``formula`` = ``factors``) must fit ``space``."""

    space: str
    formula: str
    factors: str
    bytes: int


def _buffers_text(n: int) -> str:
    return f"{n} buffer" if n == 1 else f"{n} buffers"


def matmul_requirements(
    task: MatmulTask, base_m: int, base_n: int, base_k: int, buffers: int
) -> tuple[Requirement, ...]:
    """The bytes a matmul tiling needs in each on-chip space, with the arithmetic spelled out.

    Parameters
    ----------
    task
        The matmul (its epilogue decides the UB operand tiles).
    base_m, base_n, base_k
        Tile sizes.
    buffers
        Copies of every tile (2 with double buffering).
    """
    e, acc, b = ELEM_BYTES, ACC_BYTES, buffers
    bt = _buffers_text(buffers)
    # UB holds the fp16 output block and one tile per epilogue operand: [N] rows for bias,
    # [M, N] blocks for add
    ub_terms = ["base_m*base_n"]
    ub_factors = [f"{base_m}*{base_n}"]
    ub_elems = base_m * base_n
    for step in task.epilogue:
        if step.op == "bias":
            ub_terms.append("base_n")
            ub_factors.append(f"{base_n}")
            ub_elems += base_n
        elif step.op == "add":
            ub_terms.append("base_m*base_n")
            ub_factors.append(f"{base_m}*{base_n}")
            ub_elems += base_m * base_n

    def _sum(parts: list[str]) -> str:
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"

    return (
        Requirement(
            "L0A",
            f"base_m*base_k*{e} B*{bt}",
            f"{base_m}*{base_k}*{e}*{b}",
            base_m * base_k * e * b,
        ),
        Requirement(
            "L0B",
            f"base_k*base_n*{e} B*{bt}",
            f"{base_k}*{base_n}*{e}*{b}",
            base_k * base_n * e * b,
        ),
        Requirement(
            "L0C",
            f"base_m*base_n*{acc} B*{bt}",
            f"{base_m}*{base_n}*{acc}*{b}",
            base_m * base_n * acc * b,
        ),
        Requirement(
            "L1",
            f"(base_m*base_k + base_k*base_n)*{e} B*{bt}",
            f"({base_m}*{base_k} + {base_k}*{base_n})*{e}*{b}",
            (base_m * base_k + base_k * base_n) * e * b,
        ),
        Requirement(
            "UB",
            f"{_sum(ub_terms)}*{e} B*{bt}",
            f"{_sum(ub_factors)}*{e}*{b}",
            ub_elems * e * b,
        ),
    )


def _capacity(hw: Hardware, space: str) -> int | None:
    """Bytes available in ``space``; None when unbounded."""
    cap = hw.space(space).capacity
    return cap if cap > 0 else None


def _fractal(task_id: str, hw: Hardware) -> tuple[int, int, int]:
    if hw.cube is None:
        raise TilingError(f"task '{task_id}': hardware '{hw.name}' has no [cube] section to run a matmul")
    fm, fn, fk = hw.cube.fractal
    return fm, fn, fk


def _round_up(x: int, q: int) -> int:
    return -(-x // q) * q


def check_tiling(task: MatmulTask, tiling: Tiling, hw: Hardware) -> None:
    """Refuse an explicit tiling that is not a fractal multiple or does not fit the hardware.

    Raises
    ------
    TilingError
        One line per violation with the arithmetic, e.g. ``task 'mm': base_m*base_k*2 B*2
        buffers = 128*512*2*2 = 262144 B > L0A 65536 B``.
    """
    pr = Problems()
    fractal = _fractal(task.id, hw)
    sizes = (("base_m", tiling.base_m), ("base_n", tiling.base_n), ("base_k", tiling.base_k))
    for (key, value), f in zip(sizes, fractal, strict=True):
        if value <= 0 or value % f:
            pr.add(
                f"task '{task.id}': tiling {key} = {value} must be a positive multiple of {f} "
                f"(the Cube works on whole {fractal[0]}x{fractal[1]}x{fractal[2]} fractals; "
                f"only tails are padded)"
            )
    pr.raise_if_any(TilingError)
    for req in matmul_requirements(task, tiling.base_m, tiling.base_n, tiling.base_k, tiling.buffers):
        cap = _capacity(hw, req.space)
        if cap is not None and req.bytes > cap:
            pr.add(f"task '{task.id}': {req.formula} = {req.factors} = {req.bytes} B > {req.space} {cap} B")
    pr.raise_if_any(TilingError)


def _max_base_k(task: MatmulTask, bm: int, bn: int, fk: int, limit: int, hw: Hardware) -> int | None:
    """Largest legal base_k (multiple of ``fk``, at most ``limit``) for ``bm x bn``; None if none.

    Every requirement is affine in base_k, so evaluating at 0 and 1 gives its slope.
    """
    best = limit
    at0 = matmul_requirements(task, bm, bn, 0, 2)
    at1 = matmul_requirements(task, bm, bn, 1, 2)
    for r0, r1 in zip(at0, at1, strict=True):
        cap = _capacity(hw, r0.space)
        if cap is None:
            continue
        slope = r1.bytes - r0.bytes
        if r0.bytes > cap:
            return None
        if slope > 0:
            best = min(best, (cap - r0.bytes) // slope)
    best = best // fk * fk
    return best if best >= fk else None


def derive_tiling(task: MatmulTask, hw: Hardware) -> Tiling:
    """The tiling lowering uses when a matmul gives none (double buffered).

    Candidates are fractal multiples no larger than the problem (each dim rounded up to the
    fractal, so ``M = 1`` gives ``base_m = 16``) that fit every requirement of
    :func:`matmul_requirements` with two buffers. Among them the seed's hand rule (§4.3) is
    generalised as: make the smallest of the three base sizes as large as possible, then the
    next smallest (so no dimension is starved: base_m/base_n set the data reuse per loaded
    byte, base_k the work per step against the fixed per-op overheads); ties prefer square
    output tiles, then the largest base_k, then the largest output tile. The result is
    maximal: no single base size can grow by a fractal and still fit. On ``seed-davinci`` the
    4096³ GEMM gets 128/128/128.

    Raises
    ------
    TilingError
        When not even one fractal per dimension fits, with the failing arithmetic.
    """
    fm, fn, fk = _fractal(task.id, hw)
    pm, pn, pk = _round_up(task.m, fm), _round_up(task.n, fn), _round_up(task.k, fk)
    best: tuple | None = None
    # requirements grow with every base size, so each loop stops at the first misfit
    for bm in range(fm, pm + 1, fm):
        if _max_base_k(task, bm, fn, fk, pk, hw) is None:
            break
        for bn in range(fn, pn + 1, fn):
            bk = _max_base_k(task, bm, bn, fk, pk, hw)
            if bk is None:
                break
            key = (tuple(sorted((bm, bn, bk))), bm == bn, bk, bm * bn, bm)
            if best is None or key > best[0]:
                best = (key, Tiling(bm, bn, bk, double_buffer=True))
    if best is None:
        check_tiling(task, Tiling(fm, fn, fk, double_buffer=True), hw)
        raise TilingError(f"task '{task.id}': no tiling fits")  # check_tiling has raised already
    return best[1]


def derive_row_tiling(task: ElementwiseTask, hw: Hardware) -> RowTiling:
    """Tiles of an elementwise task, double buffered in UB.

    The op runs in place on its first input's tile, so the UB working set is one tile per
    input (the ``bias`` row operand is one row of the tile's width), each rounded up to the UB
    alignment, times two buffers. Tiles take full rows when a row fits, as many rows as fit but
    at most ``ceil(rows / (2 * cores))`` so that every core gets work and has a second tile to
    overlap with; when a single row does not fit, tiles are one row of the widest column span
    (a multiple of the alignment in elements) that does.

    Raises
    ------
    TilingError
        When not even one row of one alignment unit fits UB.
    """
    ub = hw.space("UB")
    cap = ub.capacity
    align = ub.alignment
    n_full = sum(1 for j in range(len(task.inputs)) if not (task.op == "bias" and j == 1))
    n_row = len(task.inputs) - n_full

    def fits(rows: int, cols: int) -> bool:
        if cap == 0:
            return True
        full = _round_up(rows * cols * ELEM_BYTES, align)
        row = _round_up(cols * ELEM_BYTES, align)
        return 2 * (n_full * full + n_row * row) <= cap

    if fits(1, task.cols):
        rows_fit = _largest(1, task.rows, lambda r: fits(r, task.cols))
        spread = math.ceil(task.rows / (2 * hw.cores))
        return RowTiling(max(1, min(rows_fit, spread)), task.cols)
    granule = max(1, align // ELEM_BYTES)
    if not fits(1, granule):
        raise TilingError(
            f"task '{task.id}': UB {cap} B cannot hold {len(task.inputs)} input tile(s) of one row of "
            f"{granule} columns twice (double buffering)"
        )
    units = _largest(1, task.cols // granule, lambda u: fits(1, u * granule))
    return RowTiling(1, units * granule)


def _largest(lo: int, hi: int, ok) -> int:
    """Largest ``x`` in ``[lo, hi]`` with ``ok(x)``, given ``ok(lo)`` and ``ok`` monotone."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
