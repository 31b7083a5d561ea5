"""How fast a load converts an ND (row-major) operand to the Cube's fractal format on the fly.

MTE2's in-flight ND2NZ reads each row of a tile as its own short piece, so its bandwidth
depends on the tile and on the source's row stride, not on one factor: on A2 an aligned
stride with 256-column tiles converts at 1.06x the time of a plain copy, a misaligned one at
2x (an HBM-fed reference) to 5.7x (an L2-fed one) (``docs/design.md``, refinement 48, lists
the measurements). :class:`Nd2NzModel` is the per-core bandwidth model CATLASS fits to such
measurements to choose its padding (``GetBandwidth`` of
``examples/102_dynamic_optimized_matmul/include/select_kernel_b16.h``, hicann/catlass at
``0dfcf9df``): a polynomial in the tile's columns for an odd stride, scaled by the stride's
alignment class, capped at the NZ copy's bandwidth, and scaled down for tiles of few rows.
The load's time is its bytes at the path's rate times :meth:`Nd2NzModel.ratio`, the NZ
copy's bandwidth over the converting one's (the model's GB/s are relative: only their ratio
is used, against the preset's own path rate).

The hardware's ``[cube.nd2nz]`` table holds the model's figures; a chip without it may give
one ``nd2nz_derate`` for every shape instead (:meth:`staticsched.model.hardware.CubeModel.
nd2nz_ratio`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from staticsched._fields import Problems, check_keys, get_int, get_list, get_number

#: an NZ access of fewer rows than a fractal moves whole fractal rows' runs less often: CATLASS
#: scales the NZ bandwidth by ``rows / 16`` below 16 rows (``aBandwidthAfterPaddingAic`` of
#: the same file)
FRACTAL_ROWS = 16


def _poly(coeffs: tuple[float, ...], x: float) -> float:
    """``c0 + c1 x + c2 x^2 + ...``."""
    out = 0.0
    for c in reversed(coeffs):
        out = out * x + c
    return out


@attrs.frozen
class Nd2NzModel:
    """CATLASS's fitted ND2NZ bandwidth (see the module docstring); every field is one of its
    figures, named as the preset's ``[cube.nd2nz]`` keys."""

    #: GB/s of an odd-stride conversion by tile columns ``d`` (elements): ``sum c_i d^i``
    width_poly: tuple[float, ...] = attrs.field(converter=tuple)
    #: ``(multiple, factor)``: the first multiple of which the row stride (elements) is one
    #: scales the bandwidth by factor
    stride_gain: tuple[tuple[int, float], ...] = attrs.field(converter=lambda v: tuple(tuple(x) for x in v))
    #: GB/s of the NZ copy: the cap of a conversion's bandwidth, and the reference of the ratio
    nz_bandwidth: float
    #: GB/s when the tile is whole rows (its columns the stride) of at most ``contiguous_max``
    #: columns, a multiple of 16
    contiguous: float = 0.0
    contiguous_max: int = 0
    #: a row stride of at least ``long_stride`` elements converts one row per instruction, at
    #: ``long_stride_bandwidth`` GB/s
    long_stride: int = 0
    long_stride_bandwidth: float = 0.0
    #: ``(column multiple, rows below which, poly)``: the first whose multiple divides the
    #: tile's columns scales the bandwidth of a tile of fewer rows by ``poly(rows)``
    row_polys: tuple[tuple[int, int, tuple[float, ...]], ...] = attrs.field(
        converter=lambda v: tuple((int(a), int(b), tuple(c)) for a, b, c in v), default=())

    def bandwidth(self, rows: int, cols: int, stride: int) -> float:
        """GB/s of converting a ``rows x cols`` tile whose source rows are ``stride`` apart."""
        band = _poly(self.width_poly, float(cols))
        if self.contiguous and cols == stride and cols <= self.contiguous_max and cols % 16 == 0:
            band = self.contiguous
        if self.long_stride and stride >= self.long_stride:
            band = self.long_stride_bandwidth
        for multiple, factor in self.stride_gain:
            if stride % multiple == 0:
                band *= factor
                break
        band = min(band, self.nz_bandwidth)
        for multiple, below, poly in self.row_polys:
            if cols % multiple == 0:
                if rows < below:
                    band *= _poly(poly, float(rows))
                break
        return band

    def ratio(self, rows: int, cols: int, stride: int) -> float:
        """The converting load's time over the NZ copy's of the same tile (at least 1): the NZ
        copy's bandwidth, itself scaled by ``rows / 16`` below a fractal's rows, over the
        conversion's."""
        nz = self.nz_bandwidth * min(1.0, rows / FRACTAL_ROWS)
        band = self.bandwidth(rows, cols, stride)
        return max(1.0, nz / band) if band > 0 else float("inf")


def read_nd2nz(body: Mapping[str, Any], where: str, pr: Problems) -> Nd2NzModel | None:
    """The ``[cube.nd2nz]`` table, checked (one line per problem; None when it has any)."""
    check_keys(body, {"width_poly", "stride_gain", "nz_bandwidth", "contiguous", "contiguous_max",
                      "long_stride", "long_stride_bandwidth", "row_polys"}, where, pr)
    before = len(pr.lines)
    width = get_list(body, "width_poly", where, pr)
    if not width or not all(isinstance(c, int | float) and not isinstance(c, bool) for c in width):
        pr.add(f"{where}: 'width_poly' must be a non-empty list of numbers, got {width!r}")
    gains = get_list(body, "stride_gain", where, pr, default=[])
    if not all(isinstance(g, list) and len(g) == 2 and isinstance(g[0], int) and g[0] > 0
               and isinstance(g[1], int | float) and g[1] > 0 for g in gains):
        pr.add(f"{where}: 'stride_gain' must be [multiple, factor] pairs (a positive int and a positive "
               f"number), got {gains!r}")
    polys = get_list(body, "row_polys", where, pr, default=[])
    if not all(isinstance(p, list) and len(p) == 3 and isinstance(p[0], int) and p[0] > 0
               and isinstance(p[1], int) and p[1] > 0 and isinstance(p[2], list) and p[2]
               and all(isinstance(c, int | float) for c in p[2]) for p in polys):
        pr.add(f"{where}: 'row_polys' must be [column multiple, rows below, [coefficients]] triples, "
               f"got {polys!r}")
    nz = get_number(body, "nz_bandwidth", where, pr)
    if nz is not None and nz <= 0:
        pr.add(f"{where}: 'nz_bandwidth' must be > 0, got {nz!r}")
    contiguous = get_number(body, "contiguous", where, pr, default=0.0)
    contiguous_max = get_int(body, "contiguous_max", where, pr, default=0, minimum=0)
    long_stride = get_int(body, "long_stride", where, pr, default=0, minimum=0)
    long_band = get_number(body, "long_stride_bandwidth", where, pr, default=0.0)
    if len(pr.lines) > before:
        return None
    return Nd2NzModel(tuple(float(c) for c in width), gains, float(nz), float(contiguous), contiguous_max,
                      long_stride, float(long_band), polys)
