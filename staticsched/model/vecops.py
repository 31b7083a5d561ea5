"""The one table of Vector ops: what the ``op`` attribute of a ``vec`` micro-op means.

Every op says, once:

- **operands**: the form of each tensor operand, in order. ``full`` is the op's whole
  ``rows x cols`` extent; ``row`` is ``rows x 1`` (one value per row, broadcast along the row,
  e.g. a row maximum); ``col`` is ``1 x cols`` (one value per column, broadcast down the
  columns, e.g. a bias). A scalar comes from the op's ``scalar`` attribute (``scalar``:
  ``"required"``, or ``"ignored"`` for ops that accept and ignore one).
- **out**: the form of the result. An op whose result is a ``row`` while its first operand is
  ``full`` **reduces** over the columns.
- **combine**: a reduction may take one more ``row`` operand, the running value of earlier
  column blocks of the same rows, and combines its result with it (``max`` or ``add``). That is
  how a row spanning several blocks is reduced block by block.
- **passes**: its cost in passes over the full extent, the default of the hardware's
  ``[vector].passes`` (cycles = overhead + ceil(bytes * passes / bytes_per_cycle), bytes of the
  widest full-extent operand).
- **UB working set**: the operand tiles it needs besides the tile it works on
  (:meth:`VecOp.operand_elems`), plus ``scratch`` full tiles of temporary space.
- **fn**: its NumPy semantics in float32 (results are rounded to the destination's dtype).

``user`` ops may appear in TaskGraphs (elementwise tasks, matmul epilogues); the others are
emitted by lowering only (the causal mask, with its block offsets ``row0``/``col0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

_F32 = np.float32

#: semantics: (float32 operands cut to their forms' extents, the op's attributes) -> result
VecFn = Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray]


def gelu(x: np.ndarray) -> np.ndarray:
    """tanh-form GELU in float32 (what the Vector unit computes)."""
    x = x.astype(_F32)
    c = _F32(math.sqrt(2.0 / math.pi))
    # x * x * x, not x**3: NumPy's float32 power takes a slow path for negative bases (1 s per
    # 4096^2 tensor against 20 ms), and rounds no closer where it matters (a 0.044715 term)
    return _F32(0.5) * x * (_F32(1.0) + np.tanh(c * (x + _F32(0.044715) * (x * x * x))))


# fdlibm's erf (Sun Microsystems, 1993, "Permission to use, copy, modify, and distribute this
# software is freely granted, provided that this notice is preserved"; as in FreeBSD's
# msun/src/s_erf.c and musl's src/math/erf.c): rational approximations on four ranges of |x|,
# each within 2**-57 of erf, evaluated here in float64
_ERX = 8.45062911510467529297e-01
# erf(x) = x + x * P(x^2) / Q(x^2) on [0, 0.84375]
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
# erf(1 + s) = erx + P(s) / Q(s) on [0.84375, 1.25]
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
# erfc(x) = exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / x on [1.25, 1/0.35] and [1/0.35, 6]
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


#: elements of one block of :func:`erf` (its float64 temporaries stay in the cache: 0.6 s per
#: 4096^2 tensor against 1.1 s whole and 3 s for ``np.vectorize(math.erf)``)
_ERF_BLOCK = 1 << 16


def _poly(c: tuple[float, ...], z: np.ndarray) -> np.ndarray:
    """``c[0] + c[1] z + c[2] z^2 + ...`` by Horner's rule."""
    out = np.full_like(z, c[-1])
    for k in c[-2::-1]:
        out *= z
        out += k
    return out


def _ratio(p: tuple[float, ...], q: tuple[float, ...], z: np.ndarray) -> np.ndarray:
    out = _poly(p, z)
    out /= _poly(q, z)
    return out


def _erf64(x: np.ndarray) -> np.ndarray:
    """fdlibm's erf of a 1-D float64 block, range by range (each on its own elements only)."""
    a = np.abs(x)
    # |x| >= 6 (and inf) is 1; NaN stays NaN; the ranges below overwrite the rest
    out = np.where(a >= 6.0, 1.0, a)
    m = a < 0.84375
    z = a[m]
    r = _ratio(_PP, _QQ, z * z)
    r *= z
    r += z
    out[m] = r
    m = (a >= 0.84375) & (a < 1.25)
    r = _ratio(_PA, _QA, a[m] - 1.0)
    r += _ERX
    out[m] = r
    for lo, hi, p, q in ((1.25, 1 / 0.35, _RA, _SA), (1 / 0.35, 6.0, _RB, _SB)):
        m = (a >= lo) & (a < hi)
        z = a[m]
        r = _ratio(p, q, 1.0 / (z * z))
        r -= z * z + 0.5625
        np.exp(r, out=r)
        r /= z
        out[m] = 1.0 - r
    return np.copysign(out, x, out=out)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in float32: fdlibm's approximations in float64, rounded (equal to
    ``math.erf`` rounded to float32 on a grid of 400,001 points of [-8, 8]), without SciPy; in
    blocks, fast on big tensors."""
    x = np.asarray(x, dtype=_F32)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=_F32)
    for i in range(0, flat.size, _ERF_BLOCK):
        out[i : i + _ERF_BLOCK] = _erf64(flat[i : i + _ERF_BLOCK].astype(np.float64))
    return out.reshape(x.shape)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """Exact (erf-form) GELU in float32: ``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    x = x.astype(_F32)
    return _F32(0.5) * x * (_F32(1.0) + erf(x * _F32(1.0 / math.sqrt(2.0))))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` in float32, from ``exp(-|x|)`` so that nothing overflows."""
    x = x.astype(_F32)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, _F32(1.0) / (_F32(1.0) + e), e / (_F32(1.0) + e)).astype(_F32)


def _scalar(a: Mapping[str, Any]) -> np.float32:
    return _F32(a.get("scalar", 0.0))


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` in float32, as ``max(x, 0) + log1p(exp(-|x|))`` (no overflow)."""
    x = x.astype(_F32)
    return (np.maximum(x, _F32(0)) + np.log1p(np.exp(-np.abs(x)))).astype(_F32)


def _elu(x: np.ndarray, alpha: np.float32) -> np.ndarray:
    # exp of the negative side only: a large positive x would overflow to inf for nothing
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, _F32(0)))).astype(_F32)


def _celu(x: np.ndarray, alpha: np.float32) -> np.ndarray:
    # ONNX's formula as it stands: with a negative alpha the exp's overflow is its value (-inf)
    with np.errstate(over="ignore", invalid="ignore"):
        neg = alpha * np.expm1(x / alpha)
    return (np.maximum(x, _F32(0)) + np.minimum(neg, _F32(0))).astype(_F32)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return (x * np.clip(x * _F32(1.0 / 6.0) + _F32(0.5), _F32(0), _F32(1))).astype(_F32)


def _causal_mask(x: np.ndarray, a: Mapping[str, Any]) -> np.ndarray:
    """``-inf`` where the key index ``col0 + j`` is past the query index ``row0 + i``."""
    rows, cols = x.shape
    q = a.get("row0", 0) + np.arange(rows)[:, None]
    k = a.get("col0", 0) + np.arange(cols)[None, :]
    return np.where(k > q, _F32(-np.inf), x)


@attrs.frozen
class VecOp:
    """One Vector op; see the module docstring."""

    name: str
    operands: tuple[str, ...] = attrs.field(converter=tuple)
    out: str
    passes: float
    fn: VecFn = attrs.field(eq=False, repr=False)
    formula: str
    scalar: str = "ignored"
    combine: str = ""
    attrs_: tuple[str, ...] = attrs.field(converter=tuple, default=())
    scratch: int = 0
    user: bool = True
    #: operands (by position) the verifier's drawn inputs keep in [0.5, 1.5): a square root's
    #: domain, a divisor away from 0 (:func:`staticsched.frontend.reference.make_inputs`)
    positive: tuple[int, ...] = attrs.field(converter=tuple, default=())
    #: the lower end of those drawn operands, ``[least, least + 1)`` (``acosh``'s domain is 1 up)
    least: float = 0.5

    @property
    def arity(self) -> int:
        """Tensor operands (without the optional running value of a reduction)."""
        return len(self.operands)

    @property
    def reduces(self) -> bool:
        return self.out == "row" and self.operands[0] == "full"

    def forms(self, n_reads: int) -> tuple[str, ...]:
        """The forms of ``n_reads`` operands (a reduction's extra one is its running ``row``)."""
        if n_reads > self.arity and self.combine:
            return (*self.operands, "row")
        return self.operands[:n_reads]

    def max_reads(self) -> int:
        return self.arity + (1 if self.combine else 0)

    def operand_elems(self, rows: int, cols: int) -> int:
        """Elements of the operands besides the first (the tile the op works on)."""
        return sum(extent(f, rows, cols)[0] * extent(f, rows, cols)[1] for f in self.operands[1:])

    def apply(self, args: Sequence[np.ndarray], a: Mapping[str, Any]) -> np.ndarray:
        """The result, float32, of ``args`` cut to their extents (a running value last)."""
        out = self.fn(args[: self.arity], a)
        if len(args) > self.arity:
            acc = args[self.arity]
            out = np.maximum(acc, out) if self.combine == "max" else acc + out
        return out


def extent(form: str, rows: int, cols: int) -> tuple[int, int]:
    """The ``(rows, cols)`` an operand of ``form`` covers in a ``rows x cols`` op (``t``: the
    transposed extent, ``cols x rows``, a transpose's result)."""
    if form == "row":
        return (rows, 1)
    if form == "col":
        return (1, cols)
    if form == "t":
        return (cols, rows)
    return (rows, cols)


def _op(name, operands, out, passes, fn, formula, **kw) -> VecOp:
    return VecOp(name, operands, out, passes, fn, formula, **kw)


_FULL = ("full",)
_TWO = ("full", "full")
_ROW = ("full", "row")
_COL = ("full", "col")

#: the table, in documentation order
VECOPS: dict[str, VecOp] = {
    op.name: op
    for op in (
        # elementwise on full tiles
        _op("add", _TWO, "full", 1.0, lambda x, a: x[0] + x[1], "x + y"),
        _op("sub", _TWO, "full", 1.0, lambda x, a: x[0] - x[1], "x - y"),
        _op("mul", _TWO, "full", 1.0, lambda x, a: x[0] * x[1], "x * y"),
        # [assumption] division iterates a reciprocal: twice the passes of a multiply
        _op("div", _TWO, "full", 2.0, lambda x, a: x[0] / x[1], "x / y", positive=(1,)),
        _op("max", _TWO, "full", 1.0, lambda x, a: np.maximum(x[0], x[1]), "max(x, y)"),
        _op("scale", _FULL, "full", 1.0, lambda x, a: x[0] * _scalar(a), "x * value", scalar="required"),
        _op("adds", _FULL, "full", 1.0, lambda x, a: x[0] + _scalar(a), "x + value", scalar="required"),
        _op("relu", _FULL, "full", 1.0, lambda x, a: np.maximum(x[0], _F32(0)), "max(x, 0)"),
        # [assumption] tanh-form GELU is ~8 vector instructions
        _op("gelu", _FULL, "full", 8.0, lambda x, a: gelu(x[0]), "tanh-form GELU"),
        _op("cast", _FULL, "full", 1.0, lambda x, a: x[0], "x, rounded to the destination's dtype"),
        # a copy moves data only: an elementwise copy task is a load and a store (an AIV
        # reformat task writes an NZ copy of an ND tensor, the DMAs reordering it)
        _op("copy", _FULL, "full", 0.0, lambda x, a: x[0], "x (a copy: the data moves, the Vector unit "
            "does nothing)"),
        # [assumption] transcendental functions take two passes (range reduction + polynomial)
        _op("exp", _FULL, "full", 2.0, lambda x, a: np.exp(x[0]), "exp(x)"),
        _op("rsqrt", _FULL, "full", 2.0, lambda x, a: _F32(1.0) / np.sqrt(x[0]), "1 / sqrt(x)",
            positive=(0,)),
        # [assumption] like exp: one transcendental, two passes
        _op("sigmoid", _FULL, "full", 2.0, lambda x, a: sigmoid(x[0]), "1 / (1 + exp(-x))"),
        _op("tanh", _FULL, "full", 2.0, lambda x, a: np.tanh(x[0]), "tanh(x)"),
        _op("erf", _FULL, "full", 2.0, lambda x, a: erf(x[0]), "erf(x)"),
        # [assumption] x / sqrt(2), erf (2), + 1, * x, * 0.5: six passes
        _op("gelu_erf", _FULL, "full", 6.0, lambda x, a: gelu_erf(x[0]),
            "exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))"),
        # [assumption] like rsqrt: two passes
        _op("sqrt", _FULL, "full", 2.0, lambda x, a: np.sqrt(x[0]), "sqrt(x)", positive=(0,)),
        # [assumption] a division: two passes
        _op("reciprocal", _FULL, "full", 2.0, lambda x, a: _F32(1.0) / x[0], "1 / x", positive=(0,)),
        _op("square", _FULL, "full", 1.0, lambda x, a: x[0] * x[0], "x * x"),
        _op("neg", _FULL, "full", 1.0, lambda x, a: -x[0], "-x"),
        _op("rsubs", _FULL, "full", 1.0, lambda x, a: _scalar(a) - x[0], "value - x", scalar="required"),
        # [assumption] a division: two passes
        _op("rdivs", _FULL, "full", 2.0, lambda x, a: _scalar(a) / x[0], "value / x", scalar="required",
            positive=(0,)),
        # the rest of ONNX's unary float ops. Their passes count the instruction sequence each
        # composes: k one-pass steps (add, multiply, compare/select, abs, a rounding cast) cost
        # k passes; each exp, log, square root or division costs what exp costs (2 passes here,
        # 4 on ascend-a2's preset). [assumption] every count below is such a sequence.
        _op("abs", _FULL, "full", 1.0, lambda x, a: np.abs(x[0]), "|x|"),
        # two compare/selects
        _op("sign", _FULL, "full", 2.0, lambda x, a: np.sign(x[0]), "sign(x): -1, 0 or 1"),
        # one conversion with a rounding mode each
        _op("floor", _FULL, "full", 1.0, lambda x, a: np.floor(x[0]), "floor(x)"),
        _op("ceil", _FULL, "full", 1.0, lambda x, a: np.ceil(x[0]), "ceil(x)"),
        _op("round", _FULL, "full", 1.0, lambda x, a: np.rint(x[0]), "x rounded half to even"),
        _op("log", _FULL, "full", 2.0, lambda x, a: np.log(x[0]), "log(x)", positive=(0,)),
        # a range reduction (2 steps) and an odd or even polynomial by Horner's rule (6 steps)
        _op("sin", _FULL, "full", 8.0, lambda x, a: np.sin(x[0]), "sin(x)"),
        _op("cos", _FULL, "full", 8.0, lambda x, a: np.cos(x[0]), "cos(x)"),
        # sin and cos (16) and a division (2)
        _op("tan", _FULL, "full", 18.0, lambda x, a: np.tan(x[0]), "tan(x)"),
        # a reduction to [0, 1] by a division (2), a polynomial (6), the fix-up (2)
        _op("atan", _FULL, "full", 10.0, lambda x, a: np.arctan(x[0]), "atan(x)"),
        # atan(x / sqrt(1 - x*x)): atan (10), two steps, a square root and a division (4)
        _op("asin", _FULL, "full", 16.0, lambda x, a: np.arcsin(x[0]), "asin(x)"),
        _op("acos", _FULL, "full", 16.0, lambda x, a: np.arccos(x[0]), "acos(x)"),
        # exp(x) and its reciprocal (4), a subtract or add and a halving (2)
        _op("sinh", _FULL, "full", 6.0, lambda x, a: np.sinh(x[0]), "sinh(x)"),
        _op("cosh", _FULL, "full", 6.0, lambda x, a: np.cosh(x[0]), "cosh(x)"),
        # log(x + sqrt(x*x +- 1)): three steps, a square root and a log (4)
        _op("asinh", _FULL, "full", 7.0, lambda x, a: np.arcsinh(x[0]), "asinh(x)"),
        _op("acosh", _FULL, "full", 7.0, lambda x, a: np.arccosh(x[0]), "acosh(x)", positive=(0,),
            least=1.0),
        # 0.5 * log((1 + x) / (1 - x)): three steps, a division and a log (4)
        _op("atanh", _FULL, "full", 7.0, lambda x, a: np.arctanh(x[0]), "atanh(x)"),
        # max(x, 0) + log(1 + exp(-|x|)): five steps, an exp and a log (4)
        _op("softplus", _FULL, "full", 9.0, lambda x, a: softplus(x[0]), "log(1 + exp(x))"),
        # |x|, + 1 and a division (2)
        _op("softsign", _FULL, "full", 4.0, lambda x, a: x[0] / (_F32(1) + np.abs(x[0])), "x / (1 + |x|)"),
        # softplus (9), tanh (2) and a multiply
        _op("mish", _FULL, "full", 12.0, lambda x, a: x[0] * np.tanh(softplus(x[0])),
            "x * tanh(softplus(x))"),
        # a multiply and a compare/select
        _op("leaky_relu", _FULL, "full", 2.0, lambda x, a: np.where(x[0] >= 0, x[0], _scalar(a) * x[0]),
            "x if x >= 0 else value * x", scalar="required"),
        _op("thresholded_relu", _FULL, "full", 2.0,
            lambda x, a: np.where(x[0] > _scalar(a), x[0], _F32(0)), "x if x > value else 0",
            scalar="required"),
        # an exp (2), a subtract, a multiply and a compare/select
        _op("elu", _FULL, "full", 5.0, lambda x, a: _elu(x[0], _scalar(a)),
            "x if x > 0 else value * (exp(x) - 1)", scalar="required"),
        # a multiply by 1 / value, an exp (2), a subtract, a multiply, a min, a max and an add
        _op("celu", _FULL, "full", 8.0, lambda x, a: _celu(x[0], _scalar(a)),
            "max(0, x) + min(0, value * (exp(x / value) - 1))", scalar="required"),
        # a multiply-add, a max, a min and a multiply
        _op("hard_swish", _FULL, "full", 4.0, lambda x, a: _hard_swish(x[0]),
            "x * max(0, min(1, x / 6 + 1 / 2))"),
        # a multiply, a sigmoid (2) and a multiply
        _op("swish", _FULL, "full", 4.0, lambda x, a: x[0] * sigmoid(_scalar(a) * x[0]),
            "x * sigmoid(value * x)", scalar="required"),
        _op("maxs", _FULL, "full", 1.0, lambda x, a: np.maximum(x[0], _scalar(a)), "max(x, value)",
            scalar="required"),
        _op("mins", _FULL, "full", 1.0, lambda x, a: np.minimum(x[0], _scalar(a)), "min(x, value)",
            scalar="required"),
        _op("min", _TWO, "full", 1.0, lambda x, a: np.minimum(x[0], x[1]), "min(x, y)"),
        # a multiply and a compare/select
        _op("prelu", _TWO, "full", 2.0, lambda x, a: np.where(x[0] >= 0, x[0], x[1] * x[0]),
            "x if x >= 0 else y * x"),
        # a column operand [1, N]: one value per column
        _op("prelu_col", _COL, "full", 2.0, lambda x, a: np.where(x[0] >= 0, x[0], x[1] * x[0]),
            "x if x >= 0 else s * x (s of shape [N])"),
        _op("bias", _COL, "full", 1.0, lambda x, a: x[0] + x[1], "x + b (b of shape [N])"),
        _op("mul_col", _COL, "full", 1.0, lambda x, a: x[0] * x[1], "x * g (g of shape [N])"),
        _op("sub_col", _COL, "full", 1.0, lambda x, a: x[0] - x[1], "x - g (g of shape [N])"),
        # [assumption] divisions: two passes, as div
        _op("div_col", _COL, "full", 2.0, lambda x, a: x[0] / x[1], "x / g (g of shape [N])", positive=(1,)),
        # reversed (the broadcast operand on the left of the ONNX op)
        _op("rsub_col", _COL, "full", 1.0, lambda x, a: x[1] - x[0], "g - x (g of shape [N])"),
        _op("rdiv_col", _COL, "full", 2.0, lambda x, a: x[1] / x[0], "g / x (g of shape [N])", positive=(0,)),
        # a row operand [M, 1]: one value per row
        _op("add_row", _ROW, "full", 1.0, lambda x, a: x[0] + x[1], "x + r (r of shape [M, 1])"),
        _op("sub_row", _ROW, "full", 1.0, lambda x, a: x[0] - x[1], "x - r (r of shape [M, 1])"),
        _op("mul_row", _ROW, "full", 1.0, lambda x, a: x[0] * x[1],
            "x * r (r of shape [M, 1])"),
        _op("div_row", _ROW, "full", 2.0, lambda x, a: x[0] / x[1], "x / r (r of shape [M, 1])",
            positive=(1,)),
        # reversed (the broadcast operand on the left of the ONNX op)
        _op("rsub_row", _ROW, "full", 1.0, lambda x, a: x[1] - x[0], "r - x (r of shape [M, 1])"),
        _op("rdiv_row", _ROW, "full", 2.0, lambda x, a: x[1] / x[0], "r / x (r of shape [M, 1])",
            positive=(0,)),
        # reductions over each row, [M, N] -> [M, 1], optionally combined with a running value
        _op("rowmax", _FULL, "row", 1.0, lambda x, a: x[0].max(axis=1, keepdims=True),
            "max over the row", combine="max"),
        _op("rowsum", _FULL, "row", 1.0, lambda x, a: x[0].sum(axis=1, keepdims=True, dtype=_F32),
            "sum over the row", combine="add"),
        # [assumption] a multiply and a sum: two passes
        _op("rowsumsq", _FULL, "row", 2.0,
            lambda x, a: (x[0] * x[0]).sum(axis=1, keepdims=True, dtype=_F32),
            "sum of squares over the row", combine="add"),
        # lowering only: the matmul's Vector lowering (a GEMV's k rows of b, each times a[m, k],
        # summed down the columns: [R, C], [R, 1] -> [1, C] in fp32, the products exact from
        # fp16). [assumption] a multiply and an add per element: two passes (an fp32 Axpy per
        # row of x, one fp32 pass, is two passes over the fp16 tile)
        _op("colsum_mul_row", _ROW, "col", 2.0,
            lambda x, a: (x[0] * x[1]).sum(axis=0, keepdims=True, dtype=_F32),
            "sum over the rows of x * r (r of shape [R, 1]): [1, C]", user=False),
        # lowering only: a move task's transposed block ([R, C] -> [C, R]) and its column
        # broadcast ([R, 1] -> [R, C]). [assumption] one pass each over the full extent, like
        # any one-instruction op: the Vector unit transposes 16 x 16 blocks of a tile, and its
        # broadcast repeats each row's value across the row
        _op("transpose", _FULL, "t", 1.0, lambda x, a: x[0].T, "x transposed: [R, C] -> [C, R]",
            user=False),
        _op("broadcast", ("row",), "full", 1.0, lambda x, a: np.broadcast_to(x[0], (x[0].shape[0],
            int(a["cols"]))), "r broadcast along the row: [R, 1] -> [R, C]", user=False),
        # lowering only: attention's causal mask on a diagonal block
        _op("mask_causal", _FULL, "full", 1.0, lambda x, a: _causal_mask(x[0], a),
            "-inf where col0 + j > row0 + i", attrs_=("row0", "col0"), user=False),
    )
}

#: ops TaskGraphs may name
USER_OPS = tuple(name for name, op in VECOPS.items() if op.user)
