"""Data-movement nodes as ``move`` tasks: what each output element is a copy of, found by
running the node itself on indices.

A transpose, a reshape that changes the row length, a concat, split, slice, pad, tile, expand,
depth/space rearrangement, a gather by constant indices, a triangle: each output element is
one input element (or, for a pad or a triangle, a fill value). Rather than a rule per op,
:func:`move_node` runs the node with ONNX's own reference implementation on the **indices**
of its data inputs (``onnx.reference`` on int64 arrays; the node's constant parameters as
given), so what the output holds agrees with the standard by construction, for every
attribute and opset. The indices it returns become the blocks of a ``move`` task
(:func:`staticsched.tasks.move.blocks_of`): DMA copies, Vector transposes and broadcasts. An
output that is its input's bytes in their order, seen with the same row length, stays a view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from staticsched.frontend.onnx_import.load import Node
from staticsched.frontend.onnx_import.writer import GM, GraphWriter, declared, rows_cols
from staticsched.tasks.move import blocks_of

#: op type -> the positions of its data inputs (None: all of them); the others are parameters
#: (axes, shapes, pads, indices), which must be constants
DATA_INPUTS: dict[str, tuple[int, ...] | None] = {
    "Transpose": (0,), "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,),
    "Concat": None, "Split": (0,), "Slice": (0,), "Pad": (0,), "Tile": (0,), "Expand": (0,),
    "DepthToSpace": (0,), "SpaceToDepth": (0,), "Gather": (0,), "GatherElements": (0,),
    "GatherND": (0,), "Trilu": (0,), "ReverseSequence": (0,), "Compress": (0,), "Identity": (0,),
    # a constant condition selects, element by element, from the two data inputs
    "Where": (1, 2),
}
#: op type -> (input position of its fill value, the value when absent): what an output
#: element that copies no input holds
FILLS: dict[str, tuple[int, float]] = {"Pad": (2, 0.0), "Trilu": (-1, 0.0)}


def source_ids(tr: GraphWriter, v: GM, base: int) -> np.ndarray:
    """The value ``v`` as indices: ``base`` + each element's row-major position in the GM
    tensor holding it, in ``v``'s ONNX shape (a transposed view's indices are transposed)."""
    held = tr.tensors[v.tensor]
    n = int(np.prod(held))
    ids = np.arange(base, base + n, dtype=np.int64)
    if v.transposed:
        shape = (*v.shape[:-2], v.shape[-1], v.shape[-2])
        return ids.reshape(shape).swapaxes(-1, -2)
    return ids.reshape(v.shape)


class Sources:
    """The GM tensors a move reads, each once, and the index range each one's elements take."""

    def __init__(self, tr: GraphWriter) -> None:
        self.tr = tr
        self.tensors: list[str] = []
        self.bases: list[int] = []
        self.total = 0

    def ids(self, v: GM) -> np.ndarray:
        if v.tensor not in self.tensors:
            self.tensors.append(v.tensor)
            self.bases.append(self.total)
            self.total += int(np.prod(self.tr.tensors[v.tensor]))
        return source_ids(self.tr, v, self.bases[self.tensors.index(v.tensor)])

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [rows_cols(self.tr.tensors[t]) for t in self.tensors]


def emit_move(tr: GraphWriter, sources: Sources, ids: np.ndarray, out_name: str, fill: float = 0.0) -> None:
    """``out_name`` (ONNX shape ``ids.shape``) as the gather ``ids`` of ``sources``' elements
    (-1: ``fill``): a view when it is one source's bytes in order with the same row length,
    else a ``move`` task."""
    shape = tuple(ids.shape)
    if any(d <= 0 for d in shape):
        raise tr.fail(f"output '{out_name}' has shape {list(shape)}: an empty tensor is not supported")
    r2, c2 = rows_cols(declared(shape))
    flat = ids.reshape(r2, c2)
    in_order = flat.size == sources.total and bool((flat.reshape(-1) == np.arange(flat.size)).all())
    if len(sources.tensors) == 1 and in_order and sources.shapes[0] == (r2, c2):
        tr.env[out_name] = GM(sources.tensors[0], shape)
        return
    if (flat < 0).any():
        const = tr.const_tensor(np.full((r2, c2), fill, np.float32), f"{out_name}/fill")
        base = sources.total
        sources.ids(const)
        pos = np.arange(r2 * c2, dtype=np.int64).reshape(r2, c2) + base
        flat = np.where(flat < 0, pos, flat)
    t = tr.out_tensor(out_name, shape)
    blocks = blocks_of(flat, sources.shapes)
    # the inputs this output reads (a split's other parts, another output's fill, are not)
    used = sorted({b.src for b in blocks})
    renumber = {k: j for j, k in enumerate(used)}
    tr.task({"id": tr.node.name if tr.node is not None else out_name, "type": "move",
             "inputs": [sources.tensors[k] for k in used], "out": t,
             "blocks": [attrs.evolve(b, src=renumber[b.src]).as_list() for b in blocks]})
    tr.env[out_name] = GM(t, shape)


def relayout(tr: GraphWriter, name: str, fn: Callable[[np.ndarray], np.ndarray], out_name: str) -> GM:
    """Value ``name`` rearranged by ``fn`` (a NumPy function of its index array: a transpose, a
    reshape) as ``out_name``: a view or a move task; the GM value."""
    v = tr.env[name]
    src = v if isinstance(v, GM) else tr.const_tensor(np.asarray(v), name)
    sources = Sources(tr)
    ids = fn(sources.ids(src))
    tr.net.shapes[out_name] = tuple(ids.shape)
    emit_move(tr, sources, ids, out_name)
    out = tr.env[out_name]
    assert isinstance(out, GM)
    return out


def plain(tr: GraphWriter, name: str) -> GM:
    """Value ``name`` in a GM tensor of its own row-major order: a transposed view becomes a
    move (the elementwise and row tasks read tiles as they lie)."""
    v = tr.gm(name)
    if not v.transposed:
        return v
    moved = f"{name}/moved"
    if moved not in tr.env:  # one move however many tasks read it
        relayout(tr, name, lambda a: a, moved)
    out = tr.env[moved]
    assert isinstance(out, GM)
    return out


def move_node(tr: GraphWriter, node: Node) -> None:
    """A data-movement node (:data:`DATA_INPUTS`) as views or move tasks, one per output."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    data = DATA_INPUTS[node.op]
    positions = range(len(node.inputs)) if data is None else data
    fill_at, fill = FILLS.get(node.op, (-1, 0.0))
    sources = Sources(tr)
    feeds: dict[str, np.ndarray] = {}
    for j, x in enumerate(node.inputs):
        if not x:
            continue
        v = tr.env[x]
        if j in positions:
            src = v if isinstance(v, GM) else tr.const_tensor(np.asarray(v), x)
            # +1: the fill value an op writes (a pad's 0, a triangle's 0) is told from index 0
            feeds[x] = sources.ids(src) + 1
        elif isinstance(v, GM):
            raise tr.fail(f"input {j} '{x}' is computed: a {node.op}'s {_role(node.op, j)} must be a "
                          f"constant (its outputs' shapes and sources follow from it)")
        elif j == fill_at:
            fill = _fill_value(tr, x, np.asarray(v))
            feeds[x] = np.zeros((), np.int64)
        else:
            feeds[x] = np.asarray(v)
    proto = helper.make_node(node.op, list(node.inputs), list(node.outputs), **node.attrs)
    try:
        results = ReferenceEvaluator(proto, opsets={"": tr.net.opset}).run(None, feeds)
    except Exception as exc:  # an attribute or parameter the standard itself refuses
        raise tr.fail(f"onnx.reference cannot evaluate it ({type(exc).__name__}: {exc})") from None
    for out_name, value in zip(node.outputs, results, strict=False):
        if not out_name:
            continue
        ids = np.asarray(value).astype(np.int64) - 1
        if tuple(ids.shape) != tr.shape(out_name):
            raise tr.fail(f"output '{out_name}': shape inference says {list(tr.shape(out_name))}, the "
                          f"reference gives {list(ids.shape)}")
        emit_move(tr, sources, ids, out_name, fill)


def _fill_value(tr: GraphWriter, name: str, v: np.ndarray) -> float:
    if v.size != 1:
        raise tr.fail(f"fill value '{name}' has {v.size} elements, not one")
    return float(v.reshape(-1)[0])


_ROLES = {"Reshape": "shape", "Unsqueeze": "axes", "Squeeze": "axes", "Split": "split", "Slice": "range",
          "Pad": "pads", "Tile": "repeats", "Expand": "shape", "Gather": "indices",
          "GatherElements": "indices", "GatherND": "indices", "Trilu": "k",
          "ReverseSequence": "sequence lengths", "Compress": "condition", "Where": "condition"}


def _role(op: str, j: int) -> str:
    return _ROLES.get(op, f"input {j}")


def handlers(names: Sequence[str]) -> dict[str, Any]:
    """:func:`move_node` as the handler of each of ``names``."""
    return dict.fromkeys(names, move_node)
