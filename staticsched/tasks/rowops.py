"""Row reductions built from Vector ops: softmax, log_softmax, layernorm, rmsnorm, rowmax,
rowsum.

Each is a sequence of ops of the vec-op table over the column blocks that one row spans,
with per-row statistics (``[rows, 1]`` fp32 items in the vector buffer). How a row spanning
several blocks is combined depends on where the blocks are:

- **resident** — every block of the rows is in the vector buffer (a matmul epilogue keeps its
  row panel on chip; a row that fits one tile). The statistics are a sweep over the blocks,
  then the blocks are normalised in place: ``two-pass`` (``single`` when there is one block).
  softmax: row max over the blocks; ``exp(x - max)`` and its row sum; divide (log_softmax:
  ``x - (max + log(sum))``, its exps in the work tiles so that the tiles keep ``x``). layernorm: row
  sum -> mean; centre; sum of squares -> ``rsqrt(var + eps)``; scale and shift.
- **streamed** — the row does not fit the buffer, so a statistics pass loads each block and
  a second pass loads it again to normalise and store it. softmax keeps a running maximum
  and a running sum rescaled by ``exp(m_old - m_new)`` (``online``); layernorm and rmsnorm
  accumulate the sum and the sum of squares (``two-pass``; variance ``E[x²] - mean²`` in
  fp32); rowmax/rowsum accumulate in one sweep (``online``).

With ``work`` tiles (standalone tasks) the normalising chain computes in fp32 and only its
last op writes the fp16 output; in place (matmul epilogues) every op rounds to the tile's
dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from staticsched.tasks.builder import FP16, FP32, Builder

_F32 = np.float32


@attrs.frozen
class Block:
    """One column block of the rows: its tile, width, and its gamma/beta tiles if any."""

    tile: str
    cols: int
    gamma: str = ""
    beta: str = ""
    work: str = ""


class Ctx:
    """Where a row reduction emits: ``rows`` real rows (items padded to ``padded``) of ``n``
    columns on ``core``, op ids and items prefixed by ``prefix``."""

    def __init__(self, em: Builder, core: int, prefix: str, rows: int, padded: int, n: int) -> None:
        self.em, self.core, self.prefix = em, core, prefix
        self.rows, self.padded, self.n = rows, padded, n
        self.count = 0

    def stat(self, name: str) -> str:
        return self.em.item(f"{self.prefix}.{name}", "vector", FP32, (self.padded, 1))

    def work_item(self, name: str, cols: int) -> None:
        """Create the fp32 work tile ``name`` (``cols`` wide) unless it exists."""
        if name not in self.em.shapes:
            self.em.item(name, "vector", FP32, (self.padded, cols))

    def vec(self, tag: str, op: str, reads: Sequence[str], out: str, cols: int = 1,
            scalar: float | None = None) -> None:
        self.count += 1
        self.em.vec(f"{self.prefix}.{tag}", self.core, op, reads, out, (self.rows, cols), scalar=scalar)


class CountCtx(Ctx):
    """Counts the ops a reduction emits without building anything (for op budgets)."""

    def __init__(self, n: int) -> None:
        self.rows, self.padded, self.n, self.count = 1, 1, n, 0
        self.prefix = ""

    def stat(self, name: str) -> str:
        return name

    def work_item(self, name: str, cols: int) -> None:
        pass

    def vec(self, tag, op, reads, out, cols=1, scalar=None) -> None:
        self.count += 1


class Chain:
    """The normalising ops of one block: the first reads the block's tile and writes its work
    tile (or the tile itself, in place), the others continue in place, the last writes the
    tile (the fp16 result that is stored)."""

    def __init__(self, ctx: Ctx, j: int, blk: Block) -> None:
        self.ctx, self.j, self.blk = ctx, j, blk
        self.cur = blk.tile

    def __call__(self, tag: str, op: str, operand: str = "", *, last: bool = False) -> None:
        target = self.blk.tile if last or not self.blk.work else self.blk.work
        if target == self.blk.work:
            self.ctx.work_item(target, self.blk.cols)
        reads = (self.cur, operand) if operand else (self.cur,)
        self.ctx.vec(f"j{self.j}.{tag}", op, reads, target, self.blk.cols)
        self.cur = target


def _reduce(ctx: Ctx, tag: str, op: str, src: str, acc: str | None, out: str, cols: int) -> None:
    ctx.vec(tag, op, (src,) if acc is None else (src, acc), out, cols)


def _affine(chain: Chain, blk: Block, ops: list[tuple[str, str, str]]) -> None:
    """Run ``ops`` (tag, op, operand) on a chain, the last one writing the tile."""
    for i, (tag, op, operand) in enumerate(ops):
        chain(tag, op, operand, last=i == len(ops) - 1)


def _scale_ops(blk: Block) -> list[tuple[str, str, str]]:
    out = []
    if blk.gamma:
        out.append(("gamma", "mul_col", blk.gamma))
    if blk.beta:
        out.append(("beta", "bias", blk.beta))
    return out


# --------------------------------------------------------------------------- resident


def softmax_resident(ctx: Ctx, blocks: Sequence[Block], eps: float, out: str) -> None:
    m = ctx.stat("max")
    for j, b in enumerate(blocks):
        _reduce(ctx, f"j{j}.rowmax", "rowmax", b.tile, m if j else None, m, b.cols)
    s = ctx.stat("sum")
    chains = [Chain(ctx, j, b) for j, b in enumerate(blocks)]
    for j, (b, c) in enumerate(zip(blocks, chains, strict=True)):
        c("sub", "sub_row", m)
        c("exp", "exp")
        _reduce(ctx, f"j{j}.rowsum", "rowsum", c.cur, s if j else None, s, b.cols)
    for c in chains:
        c("div", "div_row", s, last=True)


def _log_sum(ctx: Ctx, m: str, s: str) -> None:
    """``s = m + log(s)``: the row's log-sum-exp from its max and its sum of ``exp(x - m)``."""
    ctx.vec("log", "log", (s,), s)
    ctx.vec("lse", "add", (s, m), s)


def log_softmax_resident(ctx: Ctx, blocks: Sequence[Block], eps: float, out: str) -> None:
    # exp(x - max) goes to the work tiles, so the tiles keep x for the last step: x - lse, not
    # log(exp(x - max)) - log(sum), which an exp that underflows would make -inf
    m = ctx.stat("max")
    for j, b in enumerate(blocks):
        _reduce(ctx, f"j{j}.rowmax", "rowmax", b.tile, m if j else None, m, b.cols)
    s = ctx.stat("sum")
    for j, b in enumerate(blocks):
        c = Chain(ctx, j, b)
        c("sub", "sub_row", m)
        c("exp", "exp")
        _reduce(ctx, f"j{j}.rowsum", "rowsum", c.cur, s if j else None, s, b.cols)
    _log_sum(ctx, m, s)
    for j, b in enumerate(blocks):
        ctx.vec(f"j{j}.out", "sub_row", (b.tile, s), b.tile, b.cols)


def _norm_finish(ctx: Ctx, q: str, eps: float) -> None:
    ctx.vec("var", "scale", (q,), q, scalar=1.0 / ctx.n)
    ctx.vec("eps", "adds", (q,), q, scalar=eps)
    ctx.vec("rstd", "rsqrt", (q,), q)


def layernorm_resident(ctx: Ctx, blocks: Sequence[Block], eps: float, out: str) -> None:
    s = ctx.stat("mean")
    for j, b in enumerate(blocks):
        _reduce(ctx, f"j{j}.rowsum", "rowsum", b.tile, s if j else None, s, b.cols)
    ctx.vec("mean", "scale", (s,), s, scalar=1.0 / ctx.n)
    q = ctx.stat("rstd")
    chains = [Chain(ctx, j, b) for j, b in enumerate(blocks)]
    for j, (b, c) in enumerate(zip(blocks, chains, strict=True)):
        c("centre", "sub_row", s)
        _reduce(ctx, f"j{j}.rowsumsq", "rowsumsq", c.cur, q if j else None, q, b.cols)
    _norm_finish(ctx, q, eps)
    for b, c in zip(blocks, chains, strict=True):
        _affine(c, b, [("norm", "mul_row", q), *_scale_ops(b)])


def rmsnorm_resident(ctx: Ctx, blocks: Sequence[Block], eps: float, out: str) -> None:
    q = ctx.stat("rstd")
    for j, b in enumerate(blocks):
        _reduce(ctx, f"j{j}.rowsumsq", "rowsumsq", b.tile, q if j else None, q, b.cols)
    _norm_finish(ctx, q, eps)
    for j, b in enumerate(blocks):
        _affine(Chain(ctx, j, b), b, [("norm", "mul_row", q), *_scale_ops(b)])


def _accumulate_resident(op: str) -> Callable[[Ctx, Sequence[Block], float, str], None]:
    def run(ctx: Ctx, blocks: Sequence[Block], eps: float, out: str) -> None:
        if len(blocks) == 1:
            _reduce(ctx, f"j0.{op}", op, blocks[0].tile, None, out, blocks[0].cols)
            return
        acc = ctx.stat("acc")
        for j, b in enumerate(blocks):
            last = j == len(blocks) - 1
            _reduce(ctx, f"j{j}.{op}", op, b.tile, acc if j else None, out if last else acc, b.cols)

    return run


# --------------------------------------------------------------------------- streamed

#: ``load(j, pass) -> Block`` loads block j again for a pass; ``store(j, block)`` stores it
Load = Callable[[int, int], Block]
Store = Callable[[int, Block], None]


def _online_sum(ctx: Ctx, nblocks: int, load: Load) -> tuple[str, str]:
    """Pass 1 of a streamed softmax: the running max and the sum of ``exp(x - max)``, rescaled
    by ``exp(m_old - m_new)`` as the max grows; the last max and the sum."""
    s = ctx.stat("sum")
    m_prev = ""
    for j in range(nblocks):
        b = load(j, 1)
        m = ctx.stat(f"max{j}")
        _reduce(ctx, f"j{j}.rowmax", "rowmax", b.tile, m_prev or None, m, b.cols)
        if m_prev:
            a = ctx.stat(f"alpha{j}")
            ctx.vec(f"j{j}.dmax", "sub", (m_prev, m), a)
            ctx.vec(f"j{j}.alpha", "exp", (a,), a)
            ctx.vec(f"j{j}.rescale", "mul", (s, a), s)
        c = Chain(ctx, j, b)
        c("sub", "sub_row", m)
        c("exp", "exp")
        _reduce(ctx, f"j{j}.rowsum", "rowsum", c.cur, s if j else None, s, b.cols)
        m_prev = m
    return m_prev, s


def softmax_streamed(ctx: Ctx, nblocks: int, load: Load, store: Store, eps: float, out: str) -> None:
    m, s = _online_sum(ctx, nblocks, load)
    for j in range(nblocks):
        b = load(j, 2)
        c = Chain(ctx, j, b)
        c("sub2", "sub_row", m)
        c("exp2", "exp")
        c("div", "div_row", s, last=True)
        store(j, b)


def log_softmax_streamed(ctx: Ctx, nblocks: int, load: Load, store: Store, eps: float, out: str) -> None:
    m, s = _online_sum(ctx, nblocks, load)
    _log_sum(ctx, m, s)
    for j in range(nblocks):
        b = load(j, 2)
        Chain(ctx, j, b)("out", "sub_row", s, last=True)
        store(j, b)


def _sums(ctx: Ctx, nblocks: int, load: Load, *, mean: bool) -> tuple[str, str]:
    s = ctx.stat("mean") if mean else ""
    q = ctx.stat("rstd")
    for j in range(nblocks):
        b = load(j, 1)
        if mean:
            _reduce(ctx, f"j{j}.rowsum", "rowsum", b.tile, s if j else None, s, b.cols)
        _reduce(ctx, f"j{j}.rowsumsq", "rowsumsq", b.tile, q if j else None, q, b.cols)
    return s, q


def layernorm_streamed(ctx: Ctx, nblocks: int, load: Load, store: Store, eps: float, out: str) -> None:
    s, q = _sums(ctx, nblocks, load, mean=True)
    t = ctx.stat("sqmean")
    ctx.vec("mean", "scale", (s,), s, scalar=1.0 / ctx.n)
    ctx.vec("meansq", "mul", (s, s), t)
    ctx.vec("msq", "scale", (q,), q, scalar=1.0 / ctx.n)
    ctx.vec("var", "sub", (q, t), q)
    ctx.vec("eps", "adds", (q,), q, scalar=eps)
    ctx.vec("rstd", "rsqrt", (q,), q)
    for j in range(nblocks):
        b = load(j, 2)
        _affine(Chain(ctx, j, b), b, [("centre", "sub_row", s), ("norm", "mul_row", q), *_scale_ops(b)])
        store(j, b)


def rmsnorm_streamed(ctx: Ctx, nblocks: int, load: Load, store: Store, eps: float, out: str) -> None:
    _, q = _sums(ctx, nblocks, load, mean=False)
    _norm_finish(ctx, q, eps)
    for j in range(nblocks):
        b = load(j, 2)
        _affine(Chain(ctx, j, b), b, [("norm", "mul_row", q), *_scale_ops(b)])
        store(j, b)


def _accumulate_streamed(op: str):
    def run(ctx: Ctx, nblocks: int, load: Load, store: Store, eps: float, out: str) -> None:
        acc = ctx.stat("acc")
        for j in range(nblocks):
            b = load(j, 1)
            last = j == nblocks - 1
            _reduce(ctx, f"j{j}.{op}", op, b.tile, acc if j else None, out if last else acc, b.cols)

    return run


# --------------------------------------------------------------------------- references


def _softmax_ref(x: np.ndarray, g, b, eps: float) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True, dtype=_F32)


def _log_softmax_ref(x: np.ndarray, g, b, eps: float) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True, dtype=_F32)))


def _layernorm_ref(x: np.ndarray, g, b, eps: float) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True, dtype=_F32)
    xc = x - mean
    var = (xc * xc).mean(axis=1, keepdims=True, dtype=_F32)
    y = xc / np.sqrt(var + _F32(eps))
    return _affine_ref(y, g, b)


def _rmsnorm_ref(x: np.ndarray, g, b, eps: float) -> np.ndarray:
    ms = (x * x).mean(axis=1, keepdims=True, dtype=_F32)
    return _affine_ref(x / np.sqrt(ms + _F32(eps)), g, b)


def _affine_ref(y: np.ndarray, g, b) -> np.ndarray:
    if g is not None:
        y = y * g
    if b is not None:
        y = y + b
    return y


@attrs.frozen
class RowOp:
    """One row reduction (see the module docstring).

    ``out`` is ``full`` (same shape as the input) or ``row`` (``[..., M, 1]``); ``params`` the
    optional ``[N]`` tensors it takes (``gamma`` scales, ``beta`` shifts); ``eps`` whether it
    takes an epsilon; ``streamed_combine`` how the streamed form combines blocks.
    """

    name: str
    out: str
    params: tuple[str, ...] = attrs.field(converter=tuple)
    eps: bool
    streamed_combine: str
    resident: Callable[..., None] = attrs.field(eq=False, repr=False)
    streamed: Callable[..., None] = attrs.field(eq=False, repr=False)
    ref: Callable[..., np.ndarray] = attrs.field(eq=False, repr=False)
    formula: str = ""
    #: whether a matmul epilogue may end with it: its resident form works in place on the
    #: tiles (log_softmax needs the tiles' x after the sum, so it runs as a task of its own)
    epilogue: bool = True

    def reference(self, x: np.ndarray, gamma: np.ndarray | None = None, beta: np.ndarray | None = None,
                  eps: float = 0.0) -> np.ndarray:
        """float32 result of the rows of the 2-D ``x`` (gamma/beta ``[1, N]``)."""
        return self.ref(x.astype(_F32), None if gamma is None else gamma.astype(_F32),
                        None if beta is None else beta.astype(_F32), eps)

    def uses_work(self, gamma: bool) -> bool:
        """Whether the standalone form needs an fp32 work tile per block (its normalising
        chain has more than one op)."""
        return self.name in ("softmax", "log_softmax", "layernorm") or (self.name == "rmsnorm" and gamma)

    def resident_combine(self, nblocks: int) -> str:
        return "single" if nblocks == 1 else "two-pass"

    def count_resident(self, nblocks: int, params: Mapping[str, Any]) -> int:
        """Vector ops of the resident form over ``nblocks`` blocks."""
        ctx = CountCtx(1)
        self.resident(ctx, [_counting_block(params)] * nblocks, 0.0, "out")
        return ctx.count

    def count_streamed(self, nblocks: int, params: Mapping[str, Any]) -> int:
        """Vector ops of the streamed form (loads and stores are the caller's)."""
        ctx = CountCtx(1)
        blk = attrs.evolve(_counting_block(params), work="w")
        self.streamed(ctx, nblocks, lambda j, p: blk, lambda j, b: None, 0.0, "out")
        return ctx.count


def _counting_block(params: Mapping[str, Any]) -> Block:
    return Block("x", 1, gamma="g" if params.get("gamma") else "", beta="b" if params.get("beta") else "")


ROWOPS: dict[str, RowOp] = {
    op.name: op
    for op in (
        RowOp("softmax", "full", (), False, "online", softmax_resident, softmax_streamed, _softmax_ref,
              "exp(x - max) / sum(exp(x - max)) per row"),
        RowOp("log_softmax", "full", (), False, "online", log_softmax_resident, log_softmax_streamed,
              _log_softmax_ref, "x - max - log(sum(exp(x - max))) per row", epilogue=False),
        RowOp("layernorm", "full", ("gamma", "beta"), True, "two-pass", layernorm_resident,
              layernorm_streamed, _layernorm_ref, "(x - mean) / sqrt(var + eps) * gamma + beta per row"),
        RowOp("rmsnorm", "full", ("gamma",), True, "two-pass", rmsnorm_resident, rmsnorm_streamed,
              _rmsnorm_ref, "x / sqrt(mean(x²) + eps) * gamma per row"),
        RowOp("rowmax", "row", (), False, "online", _accumulate_resident("rowmax"),
              _accumulate_streamed("rowmax"), lambda x, g, b, eps: x.max(axis=1, keepdims=True),
              "max over the row, [..., M, 1]"),
        RowOp("rowsum", "row", (), False, "online", _accumulate_resident("rowsum"),
              _accumulate_streamed("rowsum"), lambda x, g, b, eps: x.sum(axis=1, keepdims=True, dtype=_F32),
              "sum over the row, [..., M, 1]"),
    )
}

#: the default epsilon of layernorm and rmsnorm
DEFAULT_EPS = 1e-5

__all__ = ["DEFAULT_EPS", "FP16", "ROWOPS", "Block", "Ctx", "RowOp"]
