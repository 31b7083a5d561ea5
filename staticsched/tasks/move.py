"""The ``move`` task kind: a tensor assembled from rectangles of its inputs, moved by DMA.

Every data-movement op of a model that is not a view of the same bytes (a general transpose,
a reshape that changes the row length, a concat, a split, a slice, a pad, a tile, an expand)
is a gather: each element of the output is one element of an input. In the 2-D views of the
tensors (leading dims flattened into rows) the gather is a list of **blocks**, each a
rectangle of the output taken whole from one input:

- ``copy``: ``out[r:r+h, c:c+w] = in[sr:sr+h, sc:sc+w]``;
- ``transpose``: ``out[r:r+h, c:c+w] = in[sr:sr+w, sc:sc+h].T``;
- ``broadcast``: ``out[r:r+h, c:c+w] = in[sr:sr+h, sc]``, each row's value along the row.

The blocks cover the output exactly once (the reader checks it). :func:`blocks_of` finds them
for any gather given as the source index of every output element, which is how the ONNX
import describes an op without naming it.

Lowering: each block is cut into pieces that fit the vector buffer double buffered; a piece
is a load (GM -> vector buffer) of its source rectangle, the Vector unit's ``transpose`` or
``broadcast`` for those blocks, and a store of its output rectangle. Pieces go to the vector
cores by their bytes (:meth:`~staticsched.tasks.builder.Builder.balance`). No data is
converted: the inputs and the output share one dtype.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from staticsched._fields import check_keys, get_list, is_int
from staticsched.errors import TilingError
from staticsched.model.dtypes import itemsize, numpy_dtype
from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks.base import ReadContext, TaskKind, TilingInfo, hardware_needs, largest, per_core
from staticsched.tasks.builder import FP16, Builder
from staticsched.tasks.elementwise import vector_capacity

#: how a block takes its rectangle from its input
HOWS = ("copy", "transpose", "broadcast")
_KEYS = ("id", "type", "inputs", "out", "blocks")


@attrs.frozen
class Block:
    """Output rows ``[row, row + rows)`` and columns ``[col, col + cols)`` from input number
    ``src`` at ``(src_row, src_col)``, taken as ``how`` says (see the module docstring)."""

    src: int
    src_row: int
    src_col: int
    row: int
    col: int
    rows: int
    cols: int
    how: str = "copy"

    @property
    def src_shape(self) -> tuple[int, int]:
        """The ``(rows, cols)`` of the input rectangle it reads."""
        if self.how == "transpose":
            return (self.cols, self.rows)
        if self.how == "broadcast":
            return (self.rows, 1)
        return (self.rows, self.cols)

    def as_list(self) -> list[Any]:
        return [self.src, self.src_row, self.src_col, self.row, self.col, self.rows, self.cols, self.how]


@attrs.frozen(kw_only=True)
class MoveTask:
    """``out`` (``rows x cols`` in 2-D) assembled from ``blocks`` of ``inputs``."""

    type: ClassVar[str] = "move"

    id: str
    inputs: tuple[str, ...] = attrs.field(converter=tuple)
    out: str
    rows: int
    cols: int
    blocks: tuple[Block, ...] = attrs.field(converter=tuple)
    dtype: str = FP16

    @property
    def reads(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.inputs))

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)


def _read_block(raw: Any, j: int, shapes: Sequence[tuple[int, int]], ctx: ReadContext) -> Block | None:
    where = f"'blocks'[{j}]"
    if not (isinstance(raw, list) and len(raw) in (7, 8) and all(is_int(x) for x in raw[:7])
            and (len(raw) == 7 or raw[7] in HOWS)):
        ctx.add(f"{where} must be [src, src_row, src_col, row, col, rows, cols, how] (ints; how one of "
                f"{', '.join(HOWS)}), got {raw!r}")
        return None
    b = Block(*raw)
    if not 0 <= b.src < len(shapes):
        ctx.add(f"{where}: src {b.src} is not an input (0..{len(shapes) - 1})")
        return None
    if min(b.rows, b.cols) < 1 or min(b.src_row, b.src_col, b.row, b.col) < 0:
        ctx.add(f"{where}: offsets must be >= 0 and rows, cols >= 1, got {raw!r}")
        return None
    h, w = b.src_shape
    sr, sc = shapes[b.src]
    if b.src_row + h > sr or b.src_col + w > sc:
        ctx.add(f"{where}: reads input {b.src} rows [{b.src_row}, {b.src_row + h}) and columns "
                f"[{b.src_col}, {b.src_col + w}), past its {sr} x {sc}")
        return None
    return b


def read(body: Mapping[str, Any], ctx: ReadContext) -> MoveTask | None:
    check_keys(body, _KEYS, ctx.where, ctx.pr)
    out = ctx.tensor(body, "out")
    inputs = ctx.tensor_list(body, "inputs")
    raw_blocks = get_list(body, "blocks", ctx.where, ctx.pr)
    if out is None or any(t is None for t in inputs) or not inputs:
        if not inputs and "inputs" in body:
            ctx.add("'inputs' is empty: a move takes at least one input")
        return None
    shapes = [t.shape2d for t in inputs if t is not None]
    rows, cols = out.shape2d
    blocks = [_read_block(raw, j, shapes, ctx) for j, raw in enumerate(raw_blocks)]
    good = [b for b in blocks if b is not None]
    if len(good) == len(blocks):
        cover = np.zeros((rows, cols), np.int32)
        for j, b in enumerate(good):
            if b.row + b.rows > rows or b.col + b.cols > cols:
                ctx.add(f"'blocks'[{j}]: writes rows [{b.row}, {b.row + b.rows}) and columns "
                        f"[{b.col}, {b.col + b.cols}), past out '{out.name}' {rows} x {cols}")
                continue
            cover[b.row:b.row + b.rows, b.col:b.col + b.cols] += 1
        for what, mask in (("no block writes", cover == 0), ("more than one block writes", cover > 1)):
            if mask.any():
                r, c = (int(x) for x in np.argwhere(mask)[0])
                ctx.add(f"{what} {int(mask.sum()):,} element(s) of out '{out.name}' (the first at row {r}, "
                        f"column {c}); the blocks cover it exactly once")
    dtype = ctx.operand_dtype([(f"input {j}", t) for j, t in enumerate(inputs)])
    if out.dtype != dtype:
        ctx.add(f"a move converts nothing: its inputs are {dtype} and out '{out.name}' {out.dtype}")
    ctx.not_own_output([t.name for t in inputs if t is not None], out.name)
    return MoveTask(id=ctx.task_id, inputs=[t.name for t in inputs if t is not None], out=out.name,
                    rows=rows, cols=cols, blocks=good, dtype=dtype)


def to_dict(task: MoveTask) -> dict[str, Any]:
    return {"id": task.id, "type": task.type, "inputs": list(task.inputs), "out": task.out,
            "blocks": [b.as_list() for b in task.blocks]}


# --------------------------------------------------------------------------- blocks of a gather


def blocks_of(source: np.ndarray, shapes: Sequence[tuple[int, int]]) -> list[Block]:
    """The blocks of the gather ``out[i, j] = input[source[i, j]]``.

    ``source`` is the output's 2-D view of global source indices: input ``k``'s element
    ``(r, c)`` is ``offset_k + r * cols_k + c``, the inputs' 2-D ``shapes`` laid end to end.
    Blocks are grown greedily in row-major order: the longest run along the output row that is
    a copy (consecutive elements of one source row), a transpose (one source column) or a
    broadcast (one source element), then as many rows down as continue it.
    """
    src = np.asarray(source, dtype=np.int64)
    rows, cols = src.shape
    offsets = np.cumsum([0] + [r * c for r, c in shapes])
    if src.size and (src.min() < 0 or src.max() >= offsets[-1]):
        raise ValueError("a source index is outside the inputs")
    which = np.searchsorted(offsets, src, side="right") - 1
    local = src - offsets[which]
    width = np.asarray([c for _, c in shapes], dtype=np.int64)[which]
    height = np.asarray([r for r, _ in shapes], dtype=np.int64)[which]
    srow, scol = local // width, local % width
    taken = np.zeros((rows, cols), bool)
    out: list[Block] = []
    for r in range(rows):
        c = 0
        while c < cols:
            if taken[r, c]:
                c += 1
                continue
            k, s, a, b, cw, rh = (int(which[r, c]), int(src[r, c]), int(srow[r, c]), int(scol[r, c]),
                                  int(width[r, c]), int(height[r, c]))
            free = cols - c if not taken[r, c:].any() else int(np.argmax(taken[r, c:]))
            row_ids = src[r, c:c + free]
            steps = np.arange(free, dtype=np.int64)
            runs = {"copy": _run(row_ids == s + steps, cw - b),
                    "transpose": _run(row_ids == s + steps * cw, rh - a),
                    "broadcast": _run(row_ids == s, free)}
            how = max(HOWS, key=lambda h: (runs[h], -HOWS.index(h)))
            w = runs[how]
            if w == 1:  # one column: down a source row (a transpose) or down a source column
                how = "transpose" if _down(src, taken, r, c, 1, 1, b, cw) > _down(
                    src, taken, r, c, 1, cw, a, rh) else "copy"
            down = {"copy": (cw, a, rh), "transpose": (1, b, cw), "broadcast": (cw, a, rh)}[how]
            h = _down(src, taken, r, c, w, *down)
            taken[r:r + h, c:c + w] = True
            out.append(Block(k, a, b, r, c, h, w, how))
            c += w
    return out


def _run(ok: np.ndarray, limit: int) -> int:
    """How many leading ``ok`` there are, at most ``limit`` (at least 1: the first cell)."""
    n = len(ok) if ok.all() else int(np.argmin(ok))
    return max(1, min(n, limit))


def _down(src: np.ndarray, taken: np.ndarray, r: int, c: int, w: int, step: int, at: int, limit: int) -> int:
    """How many rows from ``r`` continue the run ``src[r, c:c+w]``, each row's indices
    ``step`` past the one above, while the source has room (``at + h <= limit``)."""
    rows = src.shape[0]
    h = 1
    first = src[r, c:c + w]
    while r + h < rows and at + h < limit and not taken[r + h, c:c + w].any() \
            and np.array_equal(src[r + h, c:c + w], first + h * step):
        h += 1
    return h


# --------------------------------------------------------------------------- tiling


@attrs.frozen
class Piece:
    """A rectangle of a block that one load (and Vector op) and one store move."""

    block: Block
    row: int
    col: int
    rows: int
    cols: int

    @property
    def src_region(self) -> tuple[tuple[int, int], tuple[int, int]]:
        b = self.block
        dr, dc = self.row - b.row, self.col - b.col
        if b.how == "transpose":
            return ((b.src_row + dc, b.src_row + dc + self.cols),
                    (b.src_col + dr, b.src_col + dr + self.rows))
        if b.how == "broadcast":
            return ((b.src_row + dr, b.src_row + dr + self.rows), (b.src_col, b.src_col + 1))
        return ((b.src_row + dr, b.src_row + dr + self.rows), (b.src_col + dc, b.src_col + dc + self.cols))

    @property
    def region(self) -> tuple[tuple[int, int], tuple[int, int]]:
        return ((self.row, self.row + self.rows), (self.col, self.col + self.cols))


def _pieces(block: Block, fits: Any) -> list[Piece]:
    """``block`` cut into row bands (and column spans, when a row does not fit) that fit."""
    if fits(block.how, 1, block.cols):
        step_r = largest(1, block.rows, lambda h: fits(block.how, h, block.cols))
        step_c = block.cols
    else:
        step_r = 1
        step_c = largest(1, block.cols, lambda w: fits(block.how, 1, w))
    end_r, end_c = block.row + block.rows, block.col + block.cols
    return [Piece(block, r, c, min(step_r, end_r - r), min(step_c, end_c - c))
            for r in range(block.row, block.row + block.rows, step_r)
            for c in range(block.col, block.col + block.cols, step_c)]


def derive_pieces(task: MoveTask, hw: Hardware) -> tuple[Piece, ...]:
    """Every block cut into pieces whose tiles (the loaded rectangle, and the Vector op's result
    for a transpose or broadcast), rounded up to the buffer's alignment, fit the vector buffer
    twice (double buffering).

    Raises
    ------
    TilingError
        When not even one element of a block fits.
    """
    cap, align = vector_capacity(hw)
    elem = itemsize(task.dtype)

    def fits(how: str, rows: int, cols: int) -> bool:
        if cap == 0:
            return True
        shape = {"transpose": (cols, rows), "broadcast": (rows, 1)}.get(how, (rows, cols))
        need = round_up(shape[0] * shape[1] * elem, align)
        if how != "copy":
            need += round_up(rows * cols * elem, align)
        return 2 * need <= cap

    if not fits("transpose", 1, 1):
        raise TilingError(f"task '{task.id}': {hw.role('vector')} {cap} B cannot hold two tiles of one "
                          f"element twice (double buffering)")
    return tuple(p for b in task.blocks for p in _pieces(b, fits))


@attrs.frozen
class MovePlan:
    """How a move task's blocks are cut into vector-buffer pieces."""

    task: MoveTask
    pieces: tuple[Piece, ...] = attrs.field(converter=tuple)

    @property
    def blocks(self) -> int:
        return len(self.pieces)

    @property
    def op_count(self) -> int:
        return sum(2 if p.block.how == "copy" else 3 for p in self.pieces)

    def info(self, hw: Hardware) -> TilingInfo:
        biggest = max(self.pieces, key=lambda p: (p.rows * p.cols, p.rows))
        return TilingInfo(self.task.id, "move", (biggest.rows, biggest.cols), 2, True, self.blocks,
                          per_core(self.blocks, len(hw.engine_cores("vector"))))

    def lower(self, em: Builder) -> None:
        task = self.task
        rows = sorted({0, task.rows, *(x for p in self.pieces for x in (p.row, p.row + p.rows))})
        cols = sorted({0, task.cols, *(x for p in self.pieces for x in (p.col, p.col + p.cols))})
        em.output(task.out, list(itertools.pairwise(rows)), list(itertools.pairwise(cols)))
        cores = em.balance([p.rows * p.cols for p in self.pieces], engine="vector")
        for t, (p, core) in enumerate(zip(self.pieces, cores, strict=True)):
            name = f"{task.id}.t{t}"
            (r0, r1), (c0, c1) = p.src_region
            tile = em.item(f"{name}.in", "vector", task.dtype, (r1 - r0, c1 - c0))
            em.load(f"{name}.load", core, tile, task.inputs[p.block.src], p.src_region)
            if p.block.how != "copy":
                out = em.item(f"{name}.out", "vector", task.dtype, (p.rows, p.cols))
                extent = (r1 - r0, c1 - c0) if p.block.how == "transpose" else (p.rows, p.cols)
                em.vec(f"{name}.{p.block.how}", core, p.block.how, [tile], out, extent)
                tile = out
            em.store(f"{name}.store", core, tile, task.out, p.region)


def plan(task: MoveTask, hw: Hardware) -> MovePlan:
    return MovePlan(task, derive_pieces(task, hw))


def needs(task: MoveTask, hw: Hardware) -> list[str]:
    return hardware_needs(task.id, hw, roles=("vector",), paths=[("global", "vector"), ("vector", "global")],
                          vector=any(b.how != "copy" for b in task.blocks))


# --------------------------------------------------------------------------- reference


def reference(task: MoveTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The output assembled from its blocks, in its dtype (nothing is computed)."""
    out = np.zeros((task.rows, task.cols), numpy_dtype(task.dtype))
    for b in task.blocks:
        x = env[task.inputs[b.src]]
        h, w = b.src_shape
        part = x[b.src_row:b.src_row + h, b.src_col:b.src_col + w]
        if b.how == "transpose":
            part = part.T
        elif b.how == "broadcast":
            part = np.broadcast_to(part, (b.rows, b.cols))
        out[b.row:b.row + b.rows, b.col:b.col + b.cols] = part
    return {task.out: out}


def gather_source(shapes: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """Each input's global source indices (see :func:`blocks_of`), in its 2-D shape."""
    offsets = np.cumsum([0] + [r * c for r, c in shapes])
    return [np.arange(offsets[k], offsets[k + 1], dtype=np.int64).reshape(shape)
            for k, shape in enumerate(shapes)]


KIND = TaskKind(
    name="move",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
)
