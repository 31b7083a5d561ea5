"""The ``elementwise`` task kind: ``out = op(*inputs[, value])`` on the Vector unit.

Any Vector op of the table (:mod:`staticsched.model.vecops`) that keeps the tile's shape; its
inputs follow the op's operand forms: ``full`` inputs have the output's shape, a ``col`` input
is ``[N]`` (one value per column), a ``row`` input is ``[..., M, 1]`` (one value per row).

Lowering: the output is cut into row tiles that fit the vector buffer double buffered (or,
when one row does not fit, into column spans of one row); each tile loads its inputs
(GM -> vector buffer), runs the op in place on the first input's tile and stores it. The
inputs share one dtype; an output of another dtype gets a tile of its own, which the op
writes (a ``cast`` task converts between dtypes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np

from staticsched._fields import check_keys
from staticsched.errors import TilingError
from staticsched.model.dtypes import itemsize, numpy_dtype
from staticsched.model.hardware import Hardware, round_up
from staticsched.model.vecops import USER_OPS, VECOPS, extent
from staticsched.tasks.base import (
    ReadContext,
    RowGrid,
    RowTiling,
    TaskKind,
    TilingInfo,
    fmt_shape,
    hardware_needs,
    largest,
    per_core,
    read_op,
)
from staticsched.tasks.builder import FP16, Builder

#: ops an elementwise task may name: every user op that keeps the tile's shape
OPS = tuple(name for name in USER_OPS if not VECOPS[name].reduces)

_KEYS = ("id", "type", "op", "inputs", "out", "value")


@attrs.frozen(kw_only=True)
class ElementwiseTask:
    """``out = op(*inputs[, value])`` on the Vector unit; ``rows, cols`` is the 2-D output shape."""

    type: ClassVar[str] = "elementwise"

    id: str
    op: str
    inputs: tuple[str, ...] = attrs.field(converter=tuple)
    out: str
    rows: int
    cols: int
    value: float | None = None
    #: the inputs' dtype and the output's (another: the op writes a tile of its own)
    dtype: str = FP16
    out_dtype: str = FP16

    @property
    def reads(self) -> tuple[str, ...]:
        return self.inputs

    @property
    def converts(self) -> bool:
        """Whether the output's dtype differs from the inputs' (its own tile)."""
        return self.out_dtype != self.dtype

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)


def read(body: Mapping[str, Any], ctx: ReadContext) -> ElementwiseTask | None:
    from staticsched.tasks.matmul import operand_fits, operand_shape

    w, pr = ctx.where, ctx.pr
    check_keys(body, _KEYS, w, pr)
    op = read_op(body, ctx, OPS)
    vop = VECOPS.get(op) if op in OPS else None
    value = ctx.number(body, "value")
    if "value" not in body and vop is not None and vop.scalar == "required":
        ctx.add(f"op '{op}' needs a 'value'")
    out = ctx.tensor(body, "out")
    inputs = ctx.tensor_list(body, "inputs")
    if vop is None:
        return None
    if len(inputs) != vop.arity:
        ctx.add(f"op '{op}' takes {vop.arity} input(s), got {len(inputs)}")
        return None
    if out is None or any(t is None for t in inputs):
        return None
    rows, cols = out.shape2d
    for t, form in zip(inputs, vop.operands, strict=True):
        assert t is not None  # checked just above
        if not operand_fits(form, t, out):
            want = operand_shape(form, out)
            if form == "full" and out.rank <= 2:
                want = (rows, cols)
            ctx.add(f"input '{t.name}' is {fmt_shape(t.shape)}, expected {fmt_shape(want)} "
                    f"(from out '{out.name}' {fmt_shape(out.shape)})")
    ctx.not_own_output([t.name for t in inputs if t is not None], out.name)
    dtype = ctx.operand_dtype([(f"input {j}", t) for j, t in enumerate(inputs)])
    if op == "copy" and out.dtype != dtype:
        ctx.add(f"op 'copy' moves data only: its input is {dtype} and out '{out.name}' {out.dtype} "
                f"(a 'cast' converts)")
    return ElementwiseTask(
        id=ctx.task_id,
        op=op,
        inputs=[t.name for t in inputs if t is not None],
        out=out.name,
        rows=rows,
        cols=cols,
        value=value,
        dtype=dtype,
        out_dtype=out.dtype,
    )


def to_dict(task: ElementwiseTask) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task.id, "type": task.type, "op": task.op, "inputs": list(task.inputs),
                           "out": task.out}
    if task.value is not None:
        out["value"] = task.value
    return out


# --------------------------------------------------------------------------- tiling


def vector_capacity(hw: Hardware) -> tuple[int, int]:
    """(capacity, alignment) of the vector buffer; capacity 0 when unbounded."""
    ub = hw.space(hw.role("vector"))
    return ub.capacity, ub.alignment


def derive_row_tiling(task: ElementwiseTask, hw: Hardware) -> RowTiling:
    """Tiles of an elementwise task, double buffered in the vector buffer.

    The op runs in place on its first input's tile, so the working set is one tile per input
    of the op's operand form (a ``col`` operand is one row of the tile's width, a ``row``
    operand one column of its height) in the inputs' dtype, and the output's own tile when
    its dtype differs, each rounded up to the buffer's alignment, times two buffers. Tiles take
    full rows when a row fits, as many rows as fit but at most ``ceil(rows / (2 * cores))`` so
    that every core gets work and has a second tile to overlap with; when a single row does
    not fit, tiles are one row of the widest column span (a multiple of the alignment in
    elements) that does.

    Raises
    ------
    TilingError
        When not even one row of one alignment unit fits.
    """
    cap, align = vector_capacity(hw)
    elem = itemsize(task.dtype)
    # the op's working set: a tile per operand of its form, and its scratch tiles
    forms = VECOPS[task.op].operands + ("full",) * VECOPS[task.op].scratch

    def fits(rows: int, cols: int) -> bool:
        if cap == 0:
            return True
        need = sum(round_up(math.prod(extent(f, rows, cols)) * elem, align) for f in forms)
        if task.converts:
            need += round_up(rows * cols * itemsize(task.out_dtype), align)
        return 2 * need <= cap

    if fits(1, task.cols):
        rows_fit = largest(1, task.rows, lambda r: fits(r, task.cols))
        spread = math.ceil(task.rows / (2 * len(hw.engine_cores("vector"))))
        return RowTiling(max(1, min(rows_fit, spread)), task.cols)
    granule = max(1, align // elem)
    if not fits(1, granule):
        raise TilingError(
            f"task '{task.id}': {hw.role('vector')} {cap} B cannot hold {len(task.inputs)} input tile(s) of "
            f"one "
            f"row of {granule} columns twice (double buffering)"
        )
    units = largest(1, task.cols // granule, lambda u: fits(1, u * granule))
    return RowTiling(1, units * granule)


@attrs.frozen
class ElementwisePlan(RowGrid):
    """How an elementwise task is cut into vector-buffer tiles."""

    task: ElementwiseTask
    tiling: RowTiling

    @property
    def blocks(self) -> int:
        return math.ceil(self.task.rows / self.tiling.rows) * math.ceil(self.task.cols / self.tiling.cols)

    @property
    def ops_per_block(self) -> int:
        # a load per input, the op (none for a copy) and the store
        return len(self.task.inputs) + (1 if self.task.op == "copy" else 2)

    @property
    def op_count(self) -> int:
        return self.blocks * self.ops_per_block

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        return TilingInfo(self.task.id, "elementwise", (t.rows, t.cols), 2, True, self.blocks,
                          per_core(self.blocks, len(hw.engine_cores("vector"))))

    def lower(self, em: Builder) -> None:
        task = self.task
        col_spans = self.col_spans
        em.output(task.out, self.row_spans, col_spans)
        first_core = em.start_task(self.blocks)
        forms = VECOPS[task.op].operands
        for ti, (r0, r1) in enumerate(self.row_spans):
            for tj, (c0, c1) in enumerate(col_spans):
                t = ti * len(col_spans) + tj
                core = em.core_of(t, first_core)
                p = f"{task.id}.t{t}"
                tiles = []
                for j, (name, form) in enumerate(zip(task.inputs, forms, strict=True)):
                    shape = extent(form, r1 - r0, c1 - c0)
                    rows = (0, 1) if form == "col" else (r0, r1)
                    region = (rows, (0, 1) if form == "row" else (c0, c1))
                    tile = em.item(f"{p}.in{j}", "vector", task.dtype, shape)
                    em.load(f"{p}.load{j}", core, tile, name, region)
                    tiles.append(tile)
                extent_ = (r1 - r0, c1 - c0)
                out = em.item(f"{p}.out", "vector", task.out_dtype, extent_) if task.converts else tiles[0]
                if task.op != "copy":  # a copy moves data only: the store takes the loaded tile
                    em.vec(f"{p}.{task.op}", core, task.op, tiles, out, extent_, scalar=task.value)
                em.store(f"{p}.store", core, out, task.out, ((r0, r1), (c0, c1)))


def plan(task: ElementwiseTask, hw: Hardware) -> ElementwisePlan:
    return ElementwisePlan(task, derive_row_tiling(task, hw))


def needs(task: ElementwiseTask, hw: Hardware) -> list[str]:
    return hardware_needs(task.id, hw, roles=("vector",), paths=[("global", "vector"), ("vector", "global")],
                          vector=True)


# --------------------------------------------------------------------------- reference


def reference(task: ElementwiseTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """fp32 from the inputs, rounded to the output's dtype (the vector buffer's tile)."""
    args = [env[name].astype(np.float32) for name in task.inputs]
    value = task.value if task.value is not None else 0.0
    return {task.out: VECOPS[task.op].apply(args, {"scalar": value}).astype(numpy_dtype(task.out_dtype))}


def positive_inputs(task: ElementwiseTask) -> dict[str, float]:
    """The inputs the op needs positive (:attr:`VecOp.positive`), each with the lower end of
    its drawn values (:attr:`VecOp.least`)."""
    vop = VECOPS[task.op]
    return {task.inputs[i]: vop.least for i in vop.positive if i < len(task.inputs)}


KIND = TaskKind(
    name="elementwise",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
    positive_inputs=positive_inputs,
    ops=OPS,
)
