"""The ``rowwise`` task kind: a row reduction on the Vector unit — softmax, layernorm, rmsnorm
over the last axis, or a row maximum or sum (``[..., M, N] -> [..., M, 1]``).

Reductions are where the seed article cuts fusion (000, §2.2): they change the tensor's shape
and make the downstream tiling irregular. So they are tasks of their own, between GM tensors,
built from the vec-op table's ops (:mod:`staticsched.tasks.rowops`).

Tiling: tiles of ``rows x cols`` in the vector buffer, double buffered, with fp32 work tiles
and per-row statistics. When a whole row fits (``cols = N``) every tile is one block
(``single``); otherwise each row tile streams over column blocks twice, a statistics pass
and a normalising pass (``online`` for softmax, ``two-pass`` for the norms). A row tile and
all its column blocks run on one core; row tiles go to cores round-robin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np

from staticsched._fields import check_keys, get_int, get_mapping
from staticsched.errors import TilingError
from staticsched.model.dtypes import itemsize, numpy_dtype
from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.base import (
    ReadContext,
    RowGrid,
    RowTiling,
    TaskKind,
    TilingInfo,
    checked_or_derived,
    fmt_shape,
    hardware_needs,
    per_core,
    read_op,
)
from staticsched.tasks.builder import FP16, Builder
from staticsched.tasks.rowops import DEFAULT_EPS, ROWOPS, Block, Ctx, RowOp

OPS = tuple(ROWOPS)
_KEYS = ("id", "type", "op", "input", "out", "axis", "gamma", "beta", "eps", "tiling")
_TILING_KEYS = ("rows", "cols")

#: statistics items ([rows, 1] fp32) a tile keeps live at once
STATS = 4


@attrs.frozen(kw_only=True)
class RowwiseTask:
    """``out = op(input)`` over each row of the 2-D ``rows x cols`` input."""

    type: ClassVar[str] = "rowwise"

    id: str
    op: str
    input: str
    out: str
    rows: int
    cols: int
    gamma: str = ""
    beta: str = ""
    eps: float | None = None
    axis: int = -1
    tiling: RowTiling | None = None
    #: the dtype of the input, gamma, beta and output (the statistics and work tiles are fp32)
    dtype: str = FP16

    @property
    def rowop(self) -> RowOp:
        return ROWOPS[self.op]

    @property
    def reads(self) -> tuple[str, ...]:
        return tuple(x for x in (self.input, self.gamma, self.beta) if x)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)

    @property
    def epsilon(self) -> float:
        return DEFAULT_EPS if self.eps is None else self.eps


# --------------------------------------------------------------------------- reading


def read(body: Mapping[str, Any], ctx: ReadContext) -> RowwiseTask | None:
    w, pr = ctx.where, ctx.pr
    check_keys(body, _KEYS, w, pr)
    op = read_op(body, ctx, OPS)
    x = ctx.tensor(body, "input")
    out = ctx.tensor(body, "out")
    rop = ROWOPS.get(op)
    axis = get_int(body, "axis", w, pr, default=-1)
    params: dict[str, str] = {}
    for key in ("gamma", "beta"):
        given, t = ctx.optional_tensor(body, key)
        if given and rop is not None and key not in rop.params:
            takes = f" (it takes {', '.join(rop.params)})" if rop.params else ""
            ctx.add(f"op '{op}' takes no '{key}'{takes}")
        elif t is not None:
            params[key] = t.name
            if x is not None and (t.shape2d != (1, x.matrix[1]) or t.rank > 2):
                ctx.add(f"'{key}' tensor '{t.name}' is {fmt_shape(t.shape)}, expected [{x.matrix[1]}] "
                        f"(one value per column of input '{x.name}')")
    eps = None
    if "eps" in body:
        eps = ctx.number(body, "eps")
        if rop is not None and not rop.eps:
            ctx.add(f"op '{op}' takes no 'eps'")
        elif eps is not None and eps < 0:
            ctx.add(f"'eps' must be >= 0, got {eps!r}")
    tiling = None
    if "tiling" in body:
        raw = get_mapping(body, "tiling", w, ctx.tiling_pr)
        tw = f"{w}: tiling"
        check_keys(raw, _TILING_KEYS, tw, ctx.tiling_pr)
        before = len(ctx.tiling_pr.lines)
        r, c = (get_int(raw, k, tw, ctx.tiling_pr, minimum=1) for k in _TILING_KEYS)
        if len(ctx.tiling_pr.lines) == before:
            tiling = RowTiling(r, c)
    if rop is None or x is None or out is None:
        return None
    if not -x.rank <= axis < x.rank:
        ctx.add(f"reduction over axis {axis} of input '{x.name}' {fmt_shape(x.shape)}, which has no such "
                f"dimension (axes {-x.rank}..{x.rank - 1})")
        return None
    if axis % x.rank != x.rank - 1:
        ctx.add(f"reduction over axis {axis} of input '{x.name}' {fmt_shape(x.shape)}: only the last axis "
                f"(-1) is reduced; transpose the tensor first")
        return None
    rows, cols = x.shape2d
    want = tuple(x.shape) if rop.out == "full" else (*x.shape[:-1], 1)
    one_row = rop.out == "row" and x.rank == 1 and tuple(out.shape) in ((1,), (1, 1))
    if tuple(out.shape) != want and not one_row:
        ctx.add(f"out '{out.name}' is {fmt_shape(out.shape)}, expected {fmt_shape(want)} "
                f"('{op}' of input '{x.name}' {fmt_shape(x.shape)})")
    ctx.not_own_output([x.name, *params.values()], out.name)
    dtype = ctx.operand_dtype([("input", x), *((key, ctx.tensors.get(name)) for key, name in params.items())])
    if out.dtype != dtype:
        ctx.add(f"out '{out.name}' is {out.dtype} but input '{x.name}' is {dtype}; a rowwise task writes "
                f"its input's dtype (convert with an elementwise 'cast' task)")
    return RowwiseTask(id=ctx.task_id, op=op, input=x.name, out=out.name, rows=rows, cols=cols,
                       gamma=params.get("gamma", ""), beta=params.get("beta", ""), eps=eps, axis=axis,
                       tiling=tiling, dtype=dtype)


def to_dict(task: RowwiseTask) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task.id, "type": task.type, "op": task.op, "input": task.input,
                           "out": task.out}
    if task.axis != -1:
        out["axis"] = task.axis
    if task.gamma:
        out["gamma"] = task.gamma
    if task.beta:
        out["beta"] = task.beta
    if task.eps is not None:
        out["eps"] = task.eps
    if task.tiling is not None:
        out["tiling"] = {"rows": task.tiling.rows, "cols": task.tiling.cols}
    return out


# --------------------------------------------------------------------------- tiling


def working_set(task: RowwiseTask, rows: int, cols: int, align: int) -> int:
    """Bytes one tile of ``rows x cols`` needs in the vector buffer (one buffer): the block (in
    the task's dtype), its fp32 work tile, gamma/beta blocks, the ``[rows, 1]`` output of a row
    reduction and :data:`STATS` fp32 statistics, each rounded up to the alignment."""

    def a(n: int) -> int:
        return round_up(n, align)

    e = itemsize(task.dtype)
    total = a(rows * cols * e)
    if task.rowop.uses_work(bool(task.gamma)):
        total += a(rows * cols * 4)
    total += sum(a(cols * e) for p in (task.gamma, task.beta) if p)
    if task.rowop.out == "row":
        total += a(rows * e)
    return total + STATS * a(rows * 4)


def _vector(hw: Hardware) -> tuple[str, int, int]:
    space = hw.role("vector")
    sp = hw.space(space)
    return space, sp.capacity, sp.alignment


def derive_tiling(task: RowwiseTask, hw: Hardware) -> RowTiling:
    """Rows per tile and columns per block, double buffered.

    When one whole row fits, tiles take whole rows: as many as fit, at most
    ``ceil(rows / (2 * cores))`` so every core gets work and a second tile to overlap with.
    Otherwise rows are streamed: up to 16 rows per tile (fewer when even one alignment unit of
    columns does not fit) and the widest block of whole alignment units that fits.

    Raises
    ------
    TilingError
        When not even one row of one alignment unit fits.
    """
    space, cap, align = _vector(hw)

    def fits(r: int, c: int) -> bool:
        return cap == 0 or 2 * working_set(task, r, c, align) <= cap

    spread = math.ceil(task.rows / (2 * len(hw.engine_cores("vector"))))
    if fits(1, task.cols):
        r = 1
        while r < min(task.rows, spread) and fits(r + 1, task.cols):
            r += 1
        return RowTiling(r, task.cols)
    granule = max(1, align // itemsize(task.dtype))
    r = min(task.rows, spread, 16)
    while r > 1 and not fits(r, granule):
        r = max(1, r // 2)
    if not fits(r, granule):
        need = 2 * working_set(task, 1, granule, align)
        raise TilingError(f"task '{task.id}': {space} {cap} B cannot hold one row of {granule} columns of a "
                          f"'{task.op}' tile twice ({need} B with its work tile and statistics)")
    c = granule
    while c + granule < task.cols and fits(r, c + granule):
        c += granule
    return RowTiling(r, c)


def check_tiling(task: RowwiseTask, tiling: RowTiling, hw: Hardware) -> None:
    space, cap, align = _vector(hw)
    need = 2 * working_set(task, tiling.rows, min(tiling.cols, task.cols), align)
    if cap and need > cap:
        raise TilingError(f"task '{task.id}': tiling {tiling.rows} rows x {tiling.cols} cols needs {need} B "
                          f"in {space} (double buffered, with work tile and statistics) > {space} {cap} B")


@attrs.frozen
class RowwisePlan(RowGrid):
    """How a row reduction is cut: row tiles, each streamed over column blocks when a row does
    not fit (``cols < N``)."""

    task: RowwiseTask
    tiling: RowTiling

    @property
    def streamed(self) -> bool:
        return len(self.col_spans) > 1

    @property
    def blocks(self) -> int:
        return len(self.row_spans)

    @property
    def combine(self) -> str:
        rop = self.task.rowop
        return rop.streamed_combine if self.streamed else rop.resident_combine(1)

    @property
    def op_count(self) -> int:
        task, rop = self.task, self.task.rowop
        params = {"gamma": task.gamma, "beta": task.beta}
        n_params = sum(1 for p in params.values() if p)
        nb = len(self.col_spans)
        if not self.streamed:
            per = 1 + n_params + rop.count_resident(1, params) + 1
        elif rop.out == "full":
            per = nb + nb * (1 + n_params) + rop.count_streamed(nb, params) + nb
        else:
            per = nb + rop.count_streamed(nb, params) + 1
        return self.blocks * per

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        base = (t.rows, min(t.cols, self.task.cols))
        return TilingInfo(self.task.id, "rowwise", base, 2, self.task.tiling is None, self.blocks,
                          per_core(self.blocks, len(hw.engine_cores("vector"))), combine=self.combine)

    def lower(self, em: Builder) -> None:
        task, rop = self.task, self.task.rowop
        col_spans = self.col_spans
        em.output(task.out, self.row_spans, col_spans if rop.out == "full" else [(0, 1)])
        first_core = em.start_task(self.blocks)
        work = rop.uses_work(bool(task.gamma))
        for t, (r0, r1) in enumerate(self.row_spans):
            core = em.core_of(t, first_core)
            p = f"{task.id}.t{t}"
            rows = r1 - r0
            ctx = Ctx(em, core, p, rows, rows, task.cols)
            out_tile = em.item(f"{p}.out", "vector", task.dtype, (rows, 1)) if rop.out == "row" else ""

            def load(j: int, pas: int, *, r0=r0, r1=r1, p=p, core=core) -> Block:
                c0, c1 = col_spans[j]
                q = f"{p}.j{j}" if self.streamed else p
                sfx = f"{pas}" if self.streamed else ""
                x = em.item(f"{q}.x{sfx}", "vector", task.dtype, (r1 - r0, c1 - c0))
                em.load(f"{q}.load{sfx}", core, x, task.input, ((r0, r1), (c0, c1)))
                params = {}
                if pas == 2 or not self.streamed:
                    for key in ("gamma", "beta"):
                        name = getattr(task, key)
                        if name:
                            params[key] = em.item(f"{q}.{key}", "vector", task.dtype, (1, c1 - c0))
                            em.load(f"{q}.load_{key}", core, params[key], name, ((0, 1), (c0, c1)))
                return Block(x, c1 - c0, gamma=params.get("gamma", ""), beta=params.get("beta", ""),
                             work=f"{q}.w{sfx}" if work or (self.streamed and task.op == "softmax") else "")

            def store(j: int, b: Block, *, r0=r0, r1=r1, p=p, core=core) -> None:
                c0, c1 = col_spans[j]
                q = f"{p}.j{j}" if self.streamed else p
                em.store(f"{q}.store", core, b.tile, task.out, ((r0, r1), (c0, c1)))

            if not self.streamed:
                b = load(0, 1)
                rop.resident(ctx, [b], task.epsilon, out_tile)
                if rop.out == "full":
                    store(0, b)
            else:
                rop.streamed(ctx, len(col_spans), load, store, task.epsilon, out_tile)
            if rop.out == "row":
                em.store(f"{p}.store", core, out_tile, task.out, ((r0, r1), (0, 1)))


def plan(task: RowwiseTask, hw: Hardware) -> RowwisePlan:
    return checked_or_derived(task, hw, check_tiling, derive_tiling, RowwisePlan)


def needs(task: RowwiseTask, hw: Hardware) -> list[str]:
    return hardware_needs(task.id, hw, roles=("vector",), paths=[("global", "vector"), ("vector", "global")],
                          vector=True)


# --------------------------------------------------------------------------- reference


def reference(task: RowwiseTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """fp32 from the input, rounded to the output's dtype."""
    g = env[task.gamma] if task.gamma else None
    b = env[task.beta] if task.beta else None
    y = task.rowop.reference(env[task.input], g, b, task.epsilon)
    return {task.out: y.astype(numpy_dtype(task.dtype))}


KIND = TaskKind(
    name="rowwise",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
    ops=OPS,
)
