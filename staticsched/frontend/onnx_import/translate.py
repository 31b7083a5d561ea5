"""ONNX nodes to an unfused TaskGraph: one task per computing node, views as aliases.

Every value of the :class:`~staticsched.frontend.onnx_import.load.Net` is a constant (folded),
or a GM tensor seen through an ONNX shape. A GM tensor is declared with the shape of what
writes it (a graph input's own shape, a task's output), at most 4-D (leading dims beyond that
are merged). Layout nodes cost nothing where they are views of the same row-major bytes:

- ``Identity``, ``Cast`` to a float type, ``Dropout`` (inference), and ``Reshape``/``Flatten``/
  ``Squeeze``/``Unsqueeze`` that keep the row length (the last dim) alias their input;
- ``Transpose`` of the last two dims is a transposed view a ``MatMul`` reads (``transpose_a``/
  ``transpose_b``);
- any other layout change is a real move this version does not make: one line, the node named.

Computing nodes become tasks of the existing kinds: ``MatMul``/``Gemm`` a ``matmul`` (Gemm's
``alpha`` and ``C`` as further tasks), elementwise ops an ``elementwise`` task whose op follows
from how the other operand broadcasts (a full tensor, one value per column, per row, or a
scalar constant), ``Softmax``/``LayerNormalization`` and last-axis reductions a ``rowwise``
task. Fusing them is the next pass's decision (:mod:`staticsched.frontend.fusion`).

The document the handlers write (names, GM values, constants, tasks, the graph's bindings) is
:mod:`.writer`'s; this module holds what each op type becomes (:data:`HANDLERS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from staticsched.frontend.onnx_import.load import Node
from staticsched.frontend.onnx_import.moves import handlers as move_handlers
from staticsched.frontend.onnx_import.moves import plain, relayout
from staticsched.frontend.onnx_import.patterns import ATTENTION
from staticsched.frontend.onnx_import.writer import (
    FLOAT_TYPES,
    GM,
    IMPORT_DTYPES,
    MAX_RANK,
    Binding,
    GraphWriter,
    rows_cols,
)
from staticsched.tasks.rowops import ROWOPS

# Binding and IMPORT_DTYPES: the package's face imports them from here with Translator
__all__ = ["HANDLERS", "IMPORT_DTYPES", "Binding", "Translator"]


class Translator(GraphWriter):
    """Walks the net's nodes in order and writes the TaskGraph document (:class:`GraphWriter`),
    each node by its op type's handler (:data:`HANDLERS`)."""

    def run(self) -> tuple[list[Binding], list[Binding]]:
        """Translate every node of the net, in order.

        Returns
        -------
        inputs, outputs
            The graph's inputs and outputs, each bound to the GM tensor holding it.

        Raises
        ------
        ModelError
            One line naming the node, for an op type or a use of one outside the supported set.
        """
        ins = self.bind_inputs()
        for node in self.net.nodes:
            self.node = node
            handler = HANDLERS.get(node.op)
            if handler is None:
                raise self.fail(f"op type '{node.op}' is not supported (supported: "
                                f"{', '.join(sorted(h for h in HANDLERS if '.' not in h))})")
            for x in node.inputs:
                if x and x not in self.env:
                    raise self.fail(f"input '{x}' is not computed by any earlier node")
            handler(self, node)
        for name in self.net.outputs:  # an output seen transposed: its bytes in order, a move
            v = self.env.get(name)
            if isinstance(v, GM) and v.transposed:
                self.node = Node(f"{name}/move", "Transpose", [name], [name], {})
                self.env[name] = plain(self, name)
        return ins, self.bind_outputs()


# --------------------------------------------------------------------------- layout


def _alias(tr: Translator, node: Node) -> None:
    src = tr.env[node.inputs[0]]
    out_shape = tr.shape(node.outputs[0])
    if not isinstance(src, GM):
        tr.env[node.outputs[0]] = np.asarray(src).reshape(out_shape)
        return
    if src.transposed and node.op == "Identity":
        tr.env[node.outputs[0]] = src
        return
    if src.transposed or rows_cols(out_shape) != rows_cols(tr.tensors[src.tensor]):
        # the bytes in another order, or rows of another length: a move
        relayout(tr, node.inputs[0], lambda a: a.reshape(out_shape), node.outputs[0])
        return
    tr.env[node.outputs[0]] = GM(src.tensor, out_shape)


def _cast(tr: Translator, node: Node) -> None:
    to = int(node.attrs.get("to", 0))
    from onnx import helper

    if np.dtype(helper.tensor_dtype_to_np_dtype(to)) not in FLOAT_TYPES:
        raise tr.fail(f"cast to {helper.tensor_dtype_to_np_dtype(to)}: integer and other dtypes are not "
                      f"supported")
    _alias(tr, node)


def _cast_like(tr: Translator, node: Node) -> None:
    target = tr.net.dtypes.get(node.inputs[1])
    if target not in FLOAT_TYPES:
        raise tr.fail(f"cast like '{node.inputs[1]}' ({target}): integer and other dtypes are not supported")
    _alias(tr, Node(node.name, "Identity", node.inputs[:1], node.outputs, {}))


def _dropout(tr: Translator, node: Node) -> None:
    if len([o for o in node.outputs if o]) > 1:
        raise tr.fail("the mask output is not supported (inference only)")
    if len(node.inputs) > 2 and node.inputs[2] and bool(np.asarray(tr.env[node.inputs[2]]).item()):
        raise tr.fail("training_mode=true is not supported")
    _alias(tr, node)


def _transpose(tr: Translator, node: Node) -> None:
    src = tr.gm(node.inputs[0])
    rank = len(src.shape)
    perm = list(node.attrs.get("perm", list(range(rank))[::-1]))
    swap = [*range(rank - 2), rank - 1, rank - 2]
    if perm == list(range(rank)):
        tr.env[node.outputs[0]] = src
    elif rank >= 2 and perm == swap and not src.transposed:
        tr.env[node.outputs[0]] = GM(src.tensor, tr.shape(node.outputs[0]), transposed=True)
    elif rank >= 2 and perm == swap and src.transposed:
        tr.env[node.outputs[0]] = GM(src.tensor, tr.shape(node.outputs[0]))
    else:  # a real transpose: a move task
        relayout(tr, node.inputs[0], lambda a: a.transpose(perm), node.outputs[0])


# --------------------------------------------------------------------------- elementwise


def _scalar(v: np.ndarray) -> float | None:
    return float(np.asarray(v).reshape(-1)[0]) if np.asarray(v).size == 1 else None


def _form(tr: Translator, name: str, out: tuple[int, ...]) -> str:
    """How operand ``name`` broadcasts to the output shape ``out``."""
    v = tr.env[name]
    shape = tuple(np.shape(v)) if not isinstance(v, GM) else v.shape
    if isinstance(v, GM) and v.transposed:  # the elementwise task reads it as it lies: moved
        tr.env[name] = v = plain(tr, name)
    if not isinstance(v, GM) and np.asarray(v).size == 1:
        return "scalar"
    padded = (1,) * (len(out) - len(shape)) + shape
    if padded == out:
        return "full"
    if out and all(d == 1 for d in padded[:-1]) and padded[-1] == out[-1]:
        return "col"
    if out and padded[:-1] == out[:-1] and padded[-1] == 1:
        return "row"
    return "other"


#: (onnx op, form of the broadcast operand, whether it is the left one) -> Vector op
_BINARY = {
    ("Add", "full"): "add", ("Sub", "full"): "sub", ("Mul", "full"): "mul", ("Div", "full"): "div",
    ("Max", "full"): "max", ("Min", "full"): "min", ("PRelu", "full"): "prelu", ("PRelu", "col"): "prelu_col",
    ("Add", "col"): "bias", ("Sub", "col"): "sub_col", ("Mul", "col"): "mul_col", ("Div", "col"): "div_col",
    ("Add", "row"): "add_row", ("Sub", "row"): "sub_row", ("Mul", "row"): "mul_row", ("Div",
                                                                                      "row"): "div_row",
    ("Sub", "col", "left"): "rsub_col", ("Div", "col", "left"): "rdiv_col",
    ("Sub", "row", "left"): "rsub_row", ("Div", "row", "left"): "rdiv_row",
}
_COMMUTES = ("Add", "Mul", "Max", "Min")


def _scalar_op(op: str, value: float, left: bool) -> tuple[str, float] | None:
    if op == "Add":
        return ("adds", value)
    if op == "Mul":
        return ("scale", value)
    if op == "Sub":
        return ("rsubs", value) if left else ("adds", -value)
    if op == "Div":
        return ("rdivs", value) if left else ("scale", 1.0 / value)
    if op in ("Max", "Min"):
        return ("maxs" if op == "Max" else "mins", value)
    if op == "PRelu" and not left:
        return ("leaky_relu", value)
    return None


def _binary(tr: Translator, node: Node) -> None:
    if len(node.inputs) != 2:
        raise tr.fail(f"{len(node.inputs)} inputs: only two are supported")
    a, b = node.inputs
    out = tr.shape(node.outputs[0])
    fa, fb = _form(tr, a, out), _form(tr, b, out)
    for name, f in ((a, fa), (b, fb)):
        if f == "other" and not isinstance(tr.env[name], GM):
            const = np.asarray(tr.env[name])
            try:
                tr.env[name] = np.broadcast_to(const, out)
            except ValueError:
                raise tr.fail(f"operand '{name}' {list(const.shape)} does not broadcast to the output "
                              f"{list(out)} (NumPy's rules)") from None
    fa, fb = _form(tr, a, out), _form(tr, b, out)
    if (fa != "full" and fb != "full") or fa == "other":  # no operand has the output's shape:
        a, fa = _expanded(tr, a, out), "full"  # the first one is broadcast to it by a move
    if fb == "other":
        b, fb = _expanded(tr, b, out), "full"
    left = False
    if fa != "full" and fb == "full":
        if node.op in _COMMUTES:
            a, b, fa, fb = b, a, fb, fa
        else:
            left = True
    if (fa if not left else fb) != "full":
        raise tr.fail(f"operands {list(_shape_of(tr, a))} and {list(_shape_of(tr, b))} -> {list(out)}: "
                      f"one operand must have the output's shape (the other one value per column, per row, "
                      f"or a scalar constant)")
    x, y = (b, a) if left else (a, b)
    fy = fa if left else fb
    xv = tr.gm(x)
    body: dict[str, Any] = {"id": node.name, "type": "elementwise"}
    if fy == "scalar":
        made = _scalar_op(node.op, float(_scalar(tr.env[y])), left)  # type: ignore[arg-type]
        if made is None:
            raise tr.fail(f"a scalar operand of {node.op} is not supported")
        body.update(op=made[0], inputs=[xv.tensor], value=made[1])
    else:
        key = (node.op, fy, "left") if left else (node.op, fy)
        op = _BINARY.get(key)  # type: ignore[arg-type]
        if op is None:
            side = "left" if left else "right"
            raise tr.fail(f"{node.op} with a {fy} operand on the {side} is not supported")
        yv = _second_operand(tr, y, fy, tr.tensors[xv.tensor])
        body.update(op=op, inputs=[xv.tensor, yv.tensor])
    _emit_elementwise(tr, node, body, xv)


def _expanded(tr: Translator, name: str, out: tuple[int, ...]) -> str:
    """Operand ``name`` broadcast to the output shape ``out`` (NumPy's rules), by a move task;
    the name of the broadcast value."""
    shape = _shape_of(tr, name)
    try:
        np.broadcast_shapes(shape, out)
    except ValueError:
        raise tr.fail(f"operand '{name}' {list(shape)} does not broadcast to the output {list(out)} "
                      f"(NumPy's rules)") from None
    wide = f"{name}/{'x'.join(map(str, out))}"
    if wide not in tr.env:
        relayout(tr, name, lambda ids: np.broadcast_to(ids, out), wide)
    return wide


def _second_operand(tr: Translator, y: str, form: str, xdecl: tuple[int, ...]) -> GM:
    """Operand ``y`` of ``form`` as the tensor the elementwise task reads beside a tile held as
    ``xdecl``: a column ``[N]``, a row ``[..., M, 1]`` or a full tensor of the tile's shape."""
    want = {"col": (xdecl[-1],), "row": (*xdecl[:-1], 1)}.get(form, xdecl)
    v = tr.env[y]
    if not isinstance(v, GM):
        return tr.const_tensor(np.asarray(v), y, want)
    held = tr.tensors[v.tensor]
    ok = rows_cols(held) == rows_cols(want) and (form == "col" or len(held) == len(want) or len(want) <= 2)
    if not ok:
        raise tr.fail(f"operand '{y}' is held as {list(held)}, the task needs {list(want)} beside a tile "
                      f"held as {list(xdecl)}")
    return v


def _shape_of(tr: Translator, name: str) -> tuple[int, ...]:
    v = tr.env[name]
    return v.shape if isinstance(v, GM) else tuple(np.shape(v))


def _emit_elementwise(tr: Translator, node: Node, body: dict[str, Any], x: GM) -> None:
    out_shape = tr.shape(node.outputs[0])
    t = tr.out_tensor(node.outputs[0], out_shape)
    tr.tensors[t] = tr.tensors[x.tensor]  # the output is held like the tile it is computed on
    body["out"] = t
    tr.task(body)
    tr.env[node.outputs[0]] = GM(t, out_shape)


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Sqrt": "sqrt",
          "Reciprocal": "reciprocal", "Neg": "neg", "Abs": "abs", "Sign": "sign", "Floor": "floor",
          "Ceil": "ceil", "Round": "round", "Log": "log", "Sin": "sin", "Cos": "cos", "Tan": "tan",
          "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh",
          "Acosh": "acosh", "Atanh": "atanh", "Softplus": "softplus", "Softsign": "softsign", "Mish": "mish",
          "HardSwish": "hard_swish"}

#: op type -> (Vector op, its ONNX attribute read as the op's ``value``, that attribute's default)
_UNARY_ALPHA = {"LeakyRelu": ("leaky_relu", "alpha", 0.01), "Elu": ("elu", "alpha", 1.0),
                "Celu": ("celu", "alpha", 1.0), "ThresholdedRelu": ("thresholded_relu", "alpha", 1.0),
                "Swish": ("swish", "alpha", 1.0)}


def _unary(tr: Translator, node: Node, op: str | None = None, value: float | None = None) -> None:
    x = plain(tr, node.inputs[0])
    body: dict[str, Any] = {"id": node.name, "type": "elementwise", "op": op or _UNARY[node.op],
                            "inputs": [x.tensor]}
    if value is not None:
        body["value"] = value
    _emit_elementwise(tr, node, body, x)


def _unary_alpha(tr: Translator, node: Node) -> None:
    op, key, default = _UNARY_ALPHA[node.op]
    _unary(tr, node, op, float(node.attrs.get(key, default)))


def _chain(tr: Translator, node: Node, steps: list[tuple[str, float]]) -> None:
    """``node``'s one input through the ``(op, value)`` steps, one elementwise task each; the
    steps between write values named after the node's output."""
    out = node.outputs[0]
    shape = tr.shape(out)
    cur = node.inputs[0]
    for j, (op, value) in enumerate(steps):
        nxt = out if j == len(steps) - 1 else f"{out}/{op}"
        tr.net.shapes[nxt] = shape
        _unary(tr, Node(f"{node.name}/{op}" if len(steps) > 1 else node.name, node.op, [cur], [nxt], {}),
               op, value)
        cur = nxt


def _selu(tr: Translator, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(node.attrs.get("gamma", 1.05070102214813232421875))
    _chain(tr, node, [("elu", alpha), ("scale", gamma)])


def _hard_sigmoid(tr: Translator, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 0.2))
    beta = float(node.attrs.get("beta", 0.5))
    _chain(tr, node, [("scale", alpha), ("adds", beta), ("maxs", 0.0), ("mins", 1.0)])


def _clip(tr: Translator, node: Node) -> None:
    bounds: list[float | None] = [None, None]
    if "min" in node.attrs or "max" in node.attrs:  # opset 6 and before: attributes
        bounds = [node.attrs.get("min"), node.attrs.get("max")]
    for j, name in enumerate(node.inputs[1:3]):
        if not name:
            continue
        v = tr.env[name]
        if isinstance(v, GM) or _scalar(v) is None:
            raise tr.fail(f"bound '{name}' is computed: only constant bounds are supported")
        bounds[j] = _scalar(v)
    steps = [(op, float(b)) for op, b in (("maxs", bounds[0]), ("mins", bounds[1])) if b is not None]
    if not steps:
        _alias(tr, Node(node.name, "Identity", node.inputs[:1], node.outputs, {}))
        return
    _chain(tr, node, steps)


#: N-ary op type -> the binary op type its inputs are folded by
_NARY = {"Sum": "Add", "Mean": "Add", "Max": "Max", "Min": "Min"}


def _nary(tr: Translator, node: Node) -> None:
    """``Sum``/``Mean``/``Max``/``Min`` of N inputs: a left fold of binary tasks (a Mean then
    scaled by 1/N); one input is a view of it."""
    ins = [x for x in node.inputs if x]
    out = node.outputs[0]
    if len(ins) == 1 and node.op != "Mean":
        _alias(tr, Node(node.name, "Identity", ins, node.outputs, {}))
        return
    scaled = node.op == "Mean"
    cur = ins[0]
    for j, x in enumerate(ins[1:]):
        last = j == len(ins) - 2 and not scaled
        nxt = out if last else f"{out}/{j}"
        if not last:
            tr.net.shapes[nxt] = tuple(np.broadcast_shapes(_shape_of(tr, cur), _shape_of(tr, x)))
        _binary(tr, Node(f"{node.name}/{j}" if len(ins) > 2 or scaled else node.name, _NARY[node.op],
                         [cur, x], [nxt], {}))
        cur = nxt
    if scaled:
        _unary(tr, Node(f"{node.name}/mean", "Mul", [cur], [out], {}), "scale", 1.0 / len(ins))


def _gelu(tr: Translator, node: Node) -> None:
    approx = node.attrs.get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    _unary(tr, node, "gelu" if approx == "tanh" else "gelu_erf")


def _pow(tr: Translator, node: Node) -> None:
    e = tr.env[node.inputs[1]]
    p = _scalar(e) if not isinstance(e, GM) else None
    ops = {2.0: "square", 0.5: "sqrt", -1.0: "reciprocal", -0.5: "rsqrt"}
    if p == 1.0:
        _alias(tr, Node(node.name, "Identity", node.inputs[:1], node.outputs, {}))
    elif p in ops:
        _unary(tr, node, ops[p])
    else:
        raise tr.fail(f"exponent {p if p is not None else 'from a tensor input'}: only constant exponents "
                      f"2, 0.5, 1, -1 and -0.5 are supported")


# --------------------------------------------------------------------------- matmul


def _matmul_operand(tr: Translator, name: str, side: str) -> GM:
    v = tr.env[name]
    if not isinstance(v, GM):
        arr = np.asarray(v)
        if arr.ndim == 1:  # ONNX promotes a vector: [K] is [1, K] on the left, [K, 1] on the right
            arr = arr.reshape((1, -1) if side == "a" else (-1, 1))
        return tr.const_tensor(arr, name)
    if len(v.shape) == 1:
        if side == "a" and not v.transposed:
            return GM(v.tensor, (1, v.shape[0]))
        raise tr.fail(f"a 1-D tensor '{name}' as the right operand of a MatMul is not supported")
    return v


def _matmul(tr: Translator, node: Node) -> None:
    a = _matmul_operand(tr, node.inputs[0], "a")
    b = _matmul_operand(tr, node.inputs[1], "b")
    out_shape = tr.shape(node.outputs[0])
    _emit_matmul(tr, node, a, b, out_shape, node.outputs[0])


def _emit_matmul(tr: Translator, node: Node, a: GM, b: GM, out_shape: tuple[int, ...], out_name: str,
                 trans: tuple[bool, bool] = (False, False)) -> str:
    da, db = tr.tensors[a.tensor], tr.tensors[b.tensor]
    ta, tb = a.transposed != trans[0], b.transposed != trans[1]
    for d, side in ((da, "a"), (db, "b")):
        if len(d) < 2 and not (side == "a" and len(d) == 1):
            raise tr.fail(f"operand {side} is held as {list(d)}, not a matrix")
    m = (da[-1] if ta else da[-2]) if len(da) >= 2 else 1
    n = db[-2] if tb else db[-1]
    lead_a, lead_b = tuple(da[:-2]), tuple(db[:-2])
    try:
        lead = tuple(np.broadcast_shapes(lead_a, lead_b))
    except ValueError:
        raise tr.fail(f"batch dims {list(lead_a)} and {list(lead_b)} do not broadcast") from None
    shape = (*lead, m, n)
    if len(shape) > MAX_RANK:
        raise tr.fail(f"a matmul with {len(lead)} batch dims is not supported (at most {MAX_RANK - 2})")
    if math.prod(shape) != math.prod(out_shape) or shape[-1] != (out_shape[-1] if out_shape else 1):
        raise tr.fail(f"operands held as {list(da)} and {list(db)} give {list(shape)}, not the ONNX output "
                      f"{list(out_shape)}")
    t = tr.fresh(out_name)
    tr.tensors[t] = shape
    body: dict[str, Any] = {"id": node.name, "type": "matmul", "a": a.tensor, "b": b.tensor, "out": t}
    if ta:
        body["transpose_a"] = True
    if tb:
        body["transpose_b"] = True
    tr.task(body)
    tr.env[out_name] = GM(t, out_shape)
    return t


def _gemm(tr: Translator, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 1.0))
    beta = float(node.attrs.get("beta", 1.0))
    trans = (bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)))
    a = _matmul_operand(tr, node.inputs[0], "a")
    b = _matmul_operand(tr, node.inputs[1], "b")
    out_name = node.outputs[0]
    out_shape = tr.shape(out_name)
    has_c = len(node.inputs) > 2 and bool(node.inputs[2])
    steps = [s for s in (alpha != 1.0, has_c and beta != 0.0) if s]
    mm_out = out_name if not steps else f"{out_name}/mm"
    if steps:
        tr.net.shapes[mm_out] = out_shape
    _emit_matmul(tr, node, a, b, out_shape, mm_out, trans)
    cur = mm_out
    if alpha != 1.0:
        nxt = out_name if not (has_c and beta != 0.0) else f"{out_name}/alpha"
        tr.net.shapes[nxt] = out_shape
        _unary(tr, Node(f"{node.name}/alpha", "Mul", [cur], [nxt], {}), "scale", alpha)
        cur = nxt
    if has_c and beta != 0.0:
        c_in = str(list(node.inputs)[2])
        c = tr.env[c_in]
        cname = f"{c_in}/C"
        if not isinstance(c, GM):
            c = np.asarray(c) * np.float32(beta)
        elif beta != 1.0:  # a computed C is scaled by a task of its own
            tr.net.shapes[cname] = c.shape
            _unary(tr, Node(f"{node.name}/beta", "Mul", [c_in], [cname], {}), "scale", beta)
            c = tr.env[cname]
        tr.env[cname] = c
        tr.net.shapes[out_name] = out_shape
        _binary(tr, Node(f"{node.name}/C", "Add", [cur, cname], [out_name], {}))


# --------------------------------------------------------------------------- rows


def _axis(tr: Translator, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise tr.fail(f"axis {axis} of a rank-{rank} input: no such axis")
    return axis % max(rank, 1)


def _named(tr: Translator, base: str, shape: tuple[int, ...]) -> str:
    """A name for a value the import makes between a node's input and its output."""
    tr.net.shapes[base] = shape
    return base


def _softmax(tr: Translator, node: Node) -> None:
    """Over the last axis a row task; over another one, the axis moved last, the row task, and
    moved back (two move tasks)."""
    x = plain(tr, node.inputs[0])
    rank = len(x.shape)
    axis = _axis(tr, int(node.attrs.get("axis", -1)), rank)
    op = "softmax" if node.op == "Softmax" else "log_softmax"
    if axis == rank - 1:
        _rowwise(tr, node, op, x)
        return
    perm = [i for i in range(rank) if i != axis] + [axis]
    back = [int(i) for i in np.argsort(perm)]
    out = node.outputs[0]
    xt = relayout(tr, node.inputs[0], lambda ids: ids.transpose(perm), f"{out}/axis_last")
    mid = _named(tr, f"{out}/{op}", xt.shape)
    _rowwise(tr, node, op, xt, out_name=mid)
    relayout(tr, mid, lambda ids: ids.transpose(back), out)


def _rowwise(tr: Translator, node: Node, op: str, x: GM, extra: dict[str, Any] | None = None,
             out_name: str | None = None) -> str:
    assert not x.transposed, "callers read their operand with plain()"
    out_name = out_name or node.outputs[0]
    d = tr.tensors[x.tensor]
    t = tr.fresh(out_name)
    tr.tensors[t] = d if ROWOPS[op].out == "full" else (*d[:-1], 1)
    tr.task({"id": node.name, "type": "rowwise", "op": op, "input": x.tensor, "out": t, **(extra or {})})
    tr.env[out_name] = GM(t, tr.shape(out_name))
    return t


def _layernorm(tr: Translator, node: Node) -> None:
    """Over the axes from ``axis`` on: the row task on the input seen as ``[K, N]`` (a view when
    ``axis`` is the last one, else a move there and back), gamma and beta flattened to ``N``."""
    x = plain(tr, node.inputs[0])
    rank = len(x.shape)
    axis = _axis(tr, int(node.attrs.get("axis", -1)), rank)
    if any(node.outputs[1:]):
        raise tr.fail("the Mean and InvStdDev outputs are not supported")
    inner = tuple(x.shape[axis:])
    n, k = math.prod(inner), math.prod(x.shape[:axis])
    out = node.outputs[0]
    rows = x
    if axis < rank - 1:
        rows = relayout(tr, node.inputs[0], lambda ids: ids.reshape(k, n), f"{out}/rows")
    extra: dict[str, Any] = {"eps": float(node.attrs.get("epsilon", 1e-5))}
    for key, idx, default in (("gamma", 1, 1.0), ("beta", 2, 0.0)):
        name = node.inputs[idx] if len(node.inputs) > idx else ""
        v = tr.env[name] if name else np.full(inner, default, np.float32)
        if isinstance(v, GM):
            if rows_cols(tr.tensors[v.tensor]) != (1, n) or v.transposed:
                v = relayout(tr, name, lambda ids: np.broadcast_to(ids, inner).reshape(n), f"{name}/{n}")
            extra[key] = v.tensor
        else:
            extra[key] = tr.const_tensor(np.broadcast_to(np.asarray(v), inner).reshape(n).copy(),
                                         name or f"{node.name}/{key}").tensor
    if axis == rank - 1:
        _rowwise(tr, node, "layernorm", rows, extra)
        return
    mid = _named(tr, f"{out}/normed", rows.shape)
    _rowwise(tr, node, "layernorm", rows, extra, out_name=mid)
    relayout(tr, mid, lambda ids: ids.reshape(x.shape), out)


#: reduction -> (elementwise ops before the row reduction, the row op, elementwise ops after);
#: ``mean``: a ``scale`` by 1 / (the reduced count)
_REDUCE: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    "ReduceSum": ((), "rowsum", ()), "ReduceMean": ((), "rowsum", ("mean",)),
    "ReduceMax": ((), "rowmax", ()), "ReduceMin": (("neg",), "rowmax", ("neg",)),
    "ReduceSumSquare": (("square",), "rowsum", ()), "ReduceL1": (("abs",), "rowsum", ()),
    "ReduceL2": (("square",), "rowsum", ("sqrt",)), "ReduceLogSum": ((), "rowsum", ("log",)),
    "ReduceLogSumExp": ((), "logsumexp", ()),
}


def _reduce(tr: Translator, node: Node) -> None:
    """Any reduction of :data:`_REDUCE` over any axes: the reduced axes moved last and merged
    (a view when they already are the trailing ones), a row task, the ``[K, 1]`` result seen
    with the output's shape (``keepdims`` or not), with elementwise tasks before and after."""
    src = node.inputs[0]
    x = plain(tr, src)
    rank = len(x.shape)
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes_v = tr.env[node.inputs[1]]
        if isinstance(axes_v, GM):
            raise tr.fail("axes given by a computed tensor are not supported")
        axes = [int(a) for a in np.asarray(axes_v).reshape(-1)]
    out = node.outputs[0]
    if not axes:
        if node.attrs.get("noop_with_empty_axes", 0):
            _alias(tr, Node(node.name, "Identity", node.inputs[:1], node.outputs, {}))
            return
        axes = list(range(rank))
    red = sorted({_axis(tr, int(a), rank) for a in axes})
    keep = [i for i in range(rank) if i not in red]
    k, r = math.prod(x.shape[i] for i in keep), math.prod(x.shape[i] for i in red)
    before, row_op, after = _REDUCE[node.op]
    cur = src
    for op in before:
        nxt = _named(tr, f"{out}/{op}", x.shape)
        _unary(tr, Node(f"{node.name}/{op}", node.op, [cur], [nxt], {}), op)
        cur = nxt
    rows = f"{out}/rows"
    relayout(tr, cur, lambda ids: ids.transpose(keep + red).reshape(k, r), rows)
    cur = _named(tr, f"{out}/{row_op}", (k, 1))
    if row_op == "logsumexp":
        _logsumexp(tr, node, rows, cur)
    else:
        _rowwise(tr, node, row_op, plain(tr, rows), out_name=cur)
    for op in after:
        nxt = _named(tr, f"{out}/{op}", (k, 1))
        if op == "mean":
            _unary(tr, Node(f"{node.name}/mean", "Mul", [cur], [nxt], {}), "scale", 1.0 / r)
        else:
            _unary(tr, Node(f"{node.name}/{op}", node.op, [cur], [nxt], {}), op)
        cur = nxt
    relayout(tr, cur, lambda ids: ids.reshape(tr.shape(out)), out)


def _logsumexp(tr: Translator, node: Node, rows: str, out: str) -> None:
    """``max + log(sum(exp(x - max)))`` over each row of ``rows`` ``[K, R]`` into ``out``: no
    exp overflows."""
    k, r = _shape_of(tr, rows)
    m = _named(tr, f"{out}/max", (k, 1))
    x = plain(tr, rows)
    _rowwise(tr, Node(f"{node.name}/max", "ReduceMax", [rows], [m], {}), "rowmax", x, out_name=m)
    d = _named(tr, f"{out}/shifted", (k, r))
    _binary(tr, Node(f"{node.name}/shift", "Sub", [rows, m], [d], {}))
    e = _named(tr, f"{out}/exp", (k, r))
    _unary(tr, Node(f"{node.name}/exp", "Exp", [d], [e], {}), "exp")
    s_ = _named(tr, f"{out}/sum", (k, 1))
    _rowwise(tr, Node(f"{node.name}/sum", "ReduceSum", [e], [s_], {}), "rowsum", plain(tr, e), out_name=s_)
    lg = _named(tr, f"{out}/log", (k, 1))
    _unary(tr, Node(f"{node.name}/log", "Log", [s_], [lg], {}), "log")
    _binary(tr, Node(f"{node.name}/add_max", "Add", [lg, m], [out], {}))


def _attention(tr: Translator, node: Node) -> None:
    """The recovered attention (:mod:`.patterns`): q, k, v as the projections wrote them,
    ``heads`` packed in their rows, and a per-key mask or the causal one."""
    q, k, v = (tr.gm(x) for x in node.inputs[:3])
    heads = int(node.attrs["heads"])
    for t in (q, k, v):
        if t.transposed:
            raise tr.fail("attention operands must not be transposed views")
    dq = tr.tensors[q.tensor]
    dv = tr.tensors[v.tensor][-1]
    t = tr.fresh(node.outputs[0])
    tr.tensors[t] = (*dq[:-1], dv)
    body: dict[str, Any] = {"id": node.name, "type": "attention", "q": q.tensor, "k": k.tensor, "v": v.tensor,
                            "out": t, "causal": bool(node.attrs["causal"]),
                            "scale": float(node.attrs["scale"])}
    if heads > 1:
        body["heads"] = heads
    if node.inputs[3]:
        mv = tr.env[node.inputs[3]]
        if isinstance(mv, GM):
            body["mask"] = mv.tensor
        else:
            arr = np.asarray(mv)
            body["mask"] = tr.const_tensor(arr.reshape(-1, arr.shape[-1]), node.inputs[3]).tensor
    tr.task(body)
    tr.env[node.outputs[0]] = GM(t, tr.shape(node.outputs[0]))


HANDLERS: dict[str, Callable[[Translator, Node], None]] = {
    "Identity": _alias, "Reshape": _alias, "Flatten": _alias, "Squeeze": _alias, "Unsqueeze": _alias,
    "Cast": _cast, "CastLike": _cast_like, "Dropout": _dropout, "Transpose": _transpose,
    "Add": _binary, "Sub": _binary, "Mul": _binary, "Div": _binary, "PRelu": _binary,
    "Sum": _nary, "Mean": _nary, "Max": _nary, "Min": _nary,
    **dict.fromkeys(_UNARY, _unary), **dict.fromkeys(_UNARY_ALPHA, _unary_alpha),
    "Selu": _selu, "HardSigmoid": _hard_sigmoid, "Clip": _clip, "Gelu": _gelu, "Pow": _pow,
    "MatMul": _matmul, "Gemm": _gemm,
    "Softmax": _softmax, "LogSoftmax": _softmax, "LayerNormalization": _layernorm,
    **dict.fromkeys(_REDUCE, _reduce),
    ATTENTION: _attention,
    **move_handlers(["Concat", "Split", "Slice", "Pad", "Tile", "Expand", "DepthToSpace", "SpaceToDepth",
                     "Gather", "GatherElements", "GatherND", "Trilu", "ReverseSequence", "Compress",
                     "Where"]),
}
