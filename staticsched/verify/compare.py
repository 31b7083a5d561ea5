"""The numeric replay's outputs against a reference: tolerances, and what differs and where.

:func:`compare` holds a replayed GM tensor to the NumPy reference within a tolerance (by the
tensor's dtype unless one is given) and names the first differing elements and the store that
wrote each; :func:`diff` holds two replays of one program (nominal and jittered) to bit
identity. The replay itself is :mod:`staticsched.verify.numeric`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from staticsched.model.dtypes import is_float
from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding

#: default max element error (abs error relative to max(1, |reference|)); fp16 outputs carry
#: ~1e-3 relative rounding and fp32 accumulation order differs from NumPy's, so 2e-2 leaves
#: room for long K while any wrong tile (errors of order 1) still fails
DEFAULT_TOLERANCE = 2e-2
#: the default tolerance by the compared tensor's dtype (docs/verification.md). bf16 keeps 8
#: bits of mantissa where fp16 keeps 11: an output differs from the reference by one bf16
#: spacing (2^-7 = 7.8e-3 at 1) where the fp32 sums' order moves a value across a rounding
#: boundary, and each in-place epilogue step rounds to bf16 again (a layernorm epilogue: 1.1e-2
#: measured), so 2^-4 = 6.25e-2 (8 spacings) leaves room while a wrong tile (errors of order
#: 1) still fails. fp32 outputs carry no rounding worth the name, but the order of fp32
#: additions (K-long sums, row statistics, streamed E[x^2] - mean^2) differs from NumPy's and
#: later tasks amplify it (a K = 4096 matmul with exp in its epilogue, then softmax: 7.5e-5
#: measured), so 1e-3.
DEFAULT_TOLERANCES = {"float16": DEFAULT_TOLERANCE, "bfloat16": 2.0**-4, "float32": 1e-3}


def default_tolerance(dtype: str) -> float:
    """The tolerance a tensor of ``dtype`` is compared with when none is given."""
    return DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCE)


#: differing elements listed in a message
SHOW = 5
#: elements compared at a time (a block of rows that stays in the cache)
COMPARE_BLOCK = 1 << 16


def written_tensors(ix: ProgramIndex) -> list[str]:
    """GM tensors some op writes, sorted, but for workspaces (scratch the lowering made, such
    as a split chip's AIC -> AIV ring: the outputs read through them are what is compared)."""
    scratch = {t.name for t in ix.program.tensors if t.workspace}
    return sorted({g.tensor for g in ix.gm_accesses if g.write} - scratch)


def compare(
    ix: ProgramIndex,
    rep: Replay,
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    tolerance: float,
) -> tuple[float, Finding | None]:
    """Max element error of ``got`` against the reference ``want`` and a ``mismatch`` finding
    naming the first differing elements (and the store that wrote each) when it exceeds
    ``tolerance``. NaN counts as an infinite error, except where the reference is NaN too."""
    if got.shape != want.shape:
        return math.inf, Finding(
            "numeric",
            "mismatch",
            f"tensor '{name}' has shape {list(got.shape)} but the reference has {list(want.shape)}",
        )
    # in blocks of rows that stay in the cache (a 4096^2 tensor: 0.08 s against 1.4 s whole);
    # the error array of the whole tensor only when something is to be shown
    rows = max(1, COMPARE_BLOCK // max(1, math.prod(got.shape[1:])))
    max_err, count = 0.0, 0
    for r in range(0, got.shape[0], rows):
        part = _errors(got[r : r + rows], want[r : r + rows])
        if part.size:
            max_err = max(max_err, float(part.max()))
            count += int((part > tolerance).sum())
    if not count:
        return max_err, None
    err = _errors(got, want)
    bad = err > tolerance
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    shown = []
    first_store = -1
    for idx in np.argwhere(bad)[:SHOW]:
        i = tuple(int(x) for x in idx)
        writer = _writer(ix, rep, name, i)
        if first_store < 0:
            first_store = writer
        by = f" by {ix.op_label(writer)!r}" if writer >= 0 else ", never stored"
        shown.append(f"[{', '.join(map(str, i))}] = {_num(got[i])} want {_num(want[i])}{by}")
    message = (
        f"tensor '{name}': {count} of {got.size} elements differ by more than {tolerance:g} "
        f"(max error {_num(max_err)} at [{', '.join(str(int(x)) for x in worst)}]); first: "
        + "; ".join(shown)
    )
    if first_store >= 0:
        return max_err, ix.finding_at("numeric", "mismatch", message, first_store, -1)
    return max_err, Finding("numeric", "mismatch", message)


def _errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element ``|got - want| / max(1, |want|)`` in float64; NaN counts as infinite, equal
    values (infinities too) as no error, and so does NaN where the reference is NaN (a log of a
    negative sum, a fully masked softmax row: the right value is NaN)."""
    g64 = got.astype(np.float64)
    w64 = want.astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(g64 - w64) / np.maximum(1.0, np.abs(w64))
    err[np.isnan(err)] = math.inf
    err[(g64 == w64)] = 0.0  # equal infinities are no error
    err[np.isnan(g64) & np.isnan(w64)] = 0.0
    return err


def _num(x: Any) -> str:
    return f"{float(x):.6g}"


def _writer(ix: ProgramIndex, rep: Replay, tensor: str, idx: tuple[int, ...]) -> int:
    """The store that wrote element ``idx`` last in the replay (-1 if none)."""
    best, best_end = -1, -1
    for g in ix.gm_accesses:
        if not g.write or g.tensor != tensor or len(idx) != 2:
            continue
        (r0, r1), (c0, c1) = g.region
        if r0 <= idx[0] < r1 and c0 <= idx[1] < c1 and rep.end[g.gid] > best_end:
            best, best_end = g.gid, rep.end[g.gid]
    return best


def diff(ix: ProgramIndex, name: str, a: np.ndarray, b: np.ndarray, what: str) -> Finding | None:
    """A ``mismatch`` when two runs' tensors are not bit-identical (NaN equals NaN)."""
    if a.shape == b.shape and np.array_equal(a, b, equal_nan=is_float(a.dtype)):
        return None
    if a.shape != b.shape:
        return Finding("jitter", "mismatch", f"tensor '{name}' changes shape {what}")
    eq = a == b
    if is_float(a.dtype):
        eq |= np.isnan(a) & np.isnan(b)
    ne = ~eq
    idx = [tuple(int(x) for x in i) for i in np.argwhere(ne)[:SHOW]]
    shown = "; ".join(f"[{', '.join(map(str, i))}] = {_num(b[i])} instead of {_num(a[i])}" for i in idx)
    return Finding(
        "jitter",
        "mismatch",
        f"tensor '{name}': {int(ne.sum())} of {a.size} elements differ {what}: {shown}",
    )
