"""An ONNX model as the importer reads it: upgraded, shape-inferred, its constants folded.

:func:`load_net` turns a ``ModelProto`` (or a path) into a :class:`Net`: the graph's inputs,
outputs and nodes in topological order, every value's static shape and element type, and the
value of every tensor that does not depend on a graph input. Initializers are such values, and
so is every node whose inputs all are (``Shape`` of a tensor with a static shape too): each is
evaluated once with ONNX's own reference implementation (``onnx.reference``), so the folder
agrees with the standard by construction. ``onnx`` has no constant folder of its own; this is
the smallest one that serves the importer.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from staticsched.errors import ModelError

#: the opset the importer reads natively; older models are upgraded to it
OPSET = 17
#: the oldest default-domain opset the importer reads without upgrading
NATIVE_MIN = 13


def _strs(xs: Iterable[str]) -> tuple[str, ...]:
    return tuple(xs)


@attrs.frozen
class Node:
    """One ONNX node: ``op`` of ``inputs`` (``""`` for an omitted optional one) to ``outputs``."""

    name: str
    op: str
    inputs: tuple[str, ...] = attrs.field(converter=_strs)
    outputs: tuple[str, ...] = attrs.field(converter=_strs)
    attrs: dict[str, Any] = attrs.field(eq=False)

    def where(self, opset: int) -> str:
        return f"node '{self.name}' ({self.op}, opset {opset})"


@attrs.frozen
class Net:
    """A model's graph as the importer reads it (see the module docstring)."""

    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    shapes: dict[str, tuple[int, ...]] = attrs.field(eq=False)
    dtypes: dict[str, np.dtype] = attrs.field(eq=False)
    consts: dict[str, np.ndarray] = attrs.field(eq=False)
    opset: int
    consumers: dict[str, list[int]] = attrs.field(eq=False)

    def where(self, node: Node) -> str:
        return node.where(self.opset)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - the extra is part of [test]
        raise ModelError("ONNX import needs the 'onnx' package: pip install 'staticsched[onnx]'") from exc
    return onnx


def read_model(model: Any) -> Any:
    """A ``ModelProto`` from a path or a ``ModelProto``; one line if it cannot be read."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    try:
        return onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError and others for a file that is not a model
        raise ModelError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None


def _default_opset(proto: Any) -> int:
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    raise ModelError("model: it imports no default-domain ('ai.onnx') opset")


def load_net(model: Any) -> Net:
    """Read, upgrade (opsets below 13), shape-infer and constant-fold ``model``.

    Raises
    ------
    ModelError
        The model cannot be read, upgraded or shape-inferred, or a value has no static shape.
    """
    onnx = _onnx()
    from onnx import numpy_helper, shape_inference, version_converter

    proto = read_model(model)
    _check_names(proto)
    _check_initializers(proto.graph)
    opset = _default_opset(proto)
    if opset < NATIVE_MIN:
        try:
            proto = version_converter.convert_version(proto, OPSET)
        except Exception as exc:
            raise ModelError(f"model: cannot upgrade opset {opset} to {OPSET} with onnx.version_converter "
                             f"({type(exc).__name__}: {exc})") from None
        opset = _default_opset(proto)
    _check_cycles(proto.graph)
    try:
        proto = shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:
        raise ModelError(f"model: ONNX shape inference failed ({type(exc).__name__}: {exc})") from None
    g = proto.graph
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, np.dtype] = {}
    problems: list[str] = []
    for vi in (*g.input, *g.value_info, *g.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            problems.append(f"value '{vi.name}': not a tensor (sequences, maps and optionals are not "
                            f"supported)")
            continue
        if tt.elem_type:
            dtypes[vi.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            shapes[vi.name] = tuple(dims)
    for t in g.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
        dtypes[t.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
    # before anything is allocated: folding a ConstantOfShape, or the replay, would take it all
    problems += _too_large(shapes, dtypes)
    if problems:
        raise ModelError(problems)
    consts: dict[str, np.ndarray] = {}
    for t in g.initializer:
        try:
            consts[t.name] = numpy_helper.to_array(t)
        except Exception as exc:  # what the count above cannot see (packed types, bad strings)
            raise ModelError(f"initializer '{t.name}': onnx cannot read its values ({type(exc).__name__}: "
                             f"{exc})") from None
    inputs = tuple(vi.name for vi in g.input if vi.name not in consts)
    wide = [name for name in (*inputs, *(vi.name for vi in g.output)) if dtypes.get(name) == np.float64]
    if wide:
        raise ModelError(f"model: {', '.join(repr(n) for n in wide)} {'is' if len(wide) == 1 else 'are'} "
                         f"float64, which staticsched does not compute (it takes float32 and float16 models "
                         f"and computes them in float16, bfloat16 or float32): cast the model to float32 "
                         f"first")
    for name in inputs:
        shape = shapes.get(name)
        if shape is None or any(d < 0 for d in shape):
            problems.append(f"input '{name}': shape {_fmt(shape)} is not static; give every dim a value "
                            f"(e.g. onnx.tools.update_model_dims) before importing")
    if problems:
        raise ModelError(problems)
    nodes = []
    for i, n in enumerate(g.node):
        if n.domain not in ("", "ai.onnx"):
            raise ModelError(f"node '{n.name or i}' ({n.op_type}, domain '{n.domain}'): only the default "
                             f"domain is supported")
        attrs_ = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        nodes.append(Node(n.name or f"{n.op_type}_{i}", n.op_type, list(n.input), list(n.output), attrs_))
    nodes = _fold(nodes, consts, shapes, dtypes, opset)
    for _ in range(REINFER_ROUNDS):
        # a shape computed from other shapes (Shape -> Concat -> Expand) is known only once
        # folded: shape inference again, with the folded values as initializers
        if not _dynamic(nodes, shapes):
            break
        grown = _reinfer(proto, nodes, consts, shapes, dtypes)
        nodes = _fold(nodes, consts, shapes, dtypes, opset)
        if not grown:
            break
    for node in nodes:
        for out in node.outputs:
            shape = shapes.get(out)
            if out and (shape is None or any(d < 0 for d in shape)):
                problems.append(f"{node.where(opset)}: output '{out}' has no static shape after shape "
                                f"inference ({_fmt(shape)}): a dynamic shape without a value")
    if problems:
        raise ModelError(problems)
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in node.inputs:
            if name:
                consumers.setdefault(name, []).append(i)
    outputs = tuple(vi.name for vi in g.output)
    return Net(tuple(nodes), inputs, outputs, shapes, dtypes, consts, opset, consumers)


#: how many times shape inference reruns on the folded graph (each can fold a further level)
REINFER_ROUNDS = 4


def _dynamic(nodes: list[Node], shapes: dict[str, tuple[int, ...]]) -> bool:
    return any(out and (shapes.get(out) is None or any(d < 0 for d in shapes[out]))
               for node in nodes for out in node.outputs)


def _reinfer(proto: Any, nodes: list[Node], consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
             dtypes: dict[str, np.dtype]) -> bool:
    """Shape inference on the nodes left after folding, the values they read from folded nodes
    given as initializers; the static shapes it adds to ``shapes`` (whether there are any)."""
    from onnx import helper, numpy_helper, shape_inference

    g = proto.graph
    read = {x for node in nodes for x in node.inputs if x in consts}
    inits = [numpy_helper.from_array(np.asarray(consts[x]), x) for x in sorted(read)]
    graph = helper.make_graph(
        [helper.make_node(n.op, list(n.inputs), list(n.outputs), name=n.name, **n.attrs) for n in nodes],
        g.name, [vi for vi in g.input if vi.name not in read], list(g.output), inits)
    model = helper.make_model(graph, opset_imports=list(proto.opset_import), ir_version=proto.ir_version)
    try:
        model = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception:  # the first inference passed: what is still unknown is reported below
        return False
    grown = False
    for vi in model.graph.value_info:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        old = shapes.get(vi.name)
        if all(d >= 0 for d in dims) and (old is None or any(d < 0 for d in old)):
            shapes[vi.name] = dims
            grown = True
        if tt.elem_type and vi.name not in dtypes:
            dtypes[vi.name] = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return grown


def _check_names(proto: Any) -> None:
    """One line per name given twice: a graph input or initializer listed twice, a value
    written by two nodes (or by a node and as an input), and an initializer that shadows an
    input from IR version 4 on (there it is the input's default value; the importer folds
    initializers as constants, so the caller's value would be ignored without a word)."""
    g = proto.graph
    problems = []
    for what, names in (("graph input", [v.name for v in g.input]),
                        ("initializer", [t.name for t in g.initializer])):
        for name, count in sorted(Counter(names).items()):
            if count > 1:
                problems.append(f"{what} '{name}': listed {count} times; each name is given once")
    written: dict[str, str] = {v.name: "the graph's input" for v in g.input}
    written.update((t.name, "an initializer") for t in g.initializer)
    for i, n in enumerate(g.node):
        where = f"node '{n.name or f'{n.op_type}_{i}'}' ({n.op_type})"
        for out in n.output:
            if out and out in written:
                problems.append(f"{where}: writes '{out}', already written by {written[out]}; "
                                f"every value has one producer")
            elif out:
                written[out] = where
    if proto.ir_version >= 4:
        inits = {t.name for t in g.initializer}
        problems += [f"input '{v.name}': an initializer of the same name shadows it (its default value "
                     f"in IR {proto.ir_version}); staticsched folds initializers as constants, so a value "
                     f"given for '{v.name}' would be ignored: drop it from the inputs or the initializers"
                     for v in g.input if v.name in inits]
    if problems:
        raise ModelError(problems)


def _check_initializers(g: Any) -> None:
    """One line per initializer whose stored values do not fill its declared dims (checked
    before anything is reshaped or allocated)."""
    from onnx import TensorProto, helper

    problems = []
    for t in g.initializer:
        dims = [int(d) for d in t.dims]
        if any(d < 0 for d in dims):
            problems.append(f"initializer '{t.name}': dims {dims} are negative")
            continue
        declared = math.prod(dims)
        if t.data_location == TensorProto.EXTERNAL:  # not loaded: onnx.load refused it or was told not to
            continue
        try:
            np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        except Exception:  # an unknown or undefined element type
            problems.append(f"initializer '{t.name}': element type {t.data_type} is not a tensor type "
                            f"numpy holds")
            continue
        name = TensorProto.DataType.Name(t.data_type)
        if name.startswith(("INT4", "UINT4", "FLOAT4", "INT2", "UINT2")):
            continue  # packed below a byte: numpy_helper's own check stands (to_array below)
        if t.HasField("raw_data"):
            stored = len(t.raw_data) // np_dtype.itemsize
        else:
            stored = len(getattr(t, helper.tensor_dtype_to_field(t.data_type)))
            stored //= 2 if name.startswith("COMPLEX") else 1
        if stored != declared:
            problems.append(f"initializer '{t.name}': dims {dims} declare {declared:,} values, it holds "
                            f"{stored:,}")
    if problems:
        raise ModelError(problems)


def _too_large(shapes: dict[str, tuple[int, ...]], dtypes: dict[str, np.dtype]) -> list[str]:
    """One line per value whose declared shape needs more bytes than this machine has."""
    limit = physical_memory()
    lines = []
    for name in sorted(shapes):
        shape = shapes[name]
        if any(d < 0 for d in shape):
            continue
        need = math.prod(shape) * dtypes.get(name, np.dtype(np.float32)).itemsize
        if need > limit:
            lines.append(f"value '{name}': shape {_fmt(shape)} of {dtypes.get(name, 'float32')} needs "
                         f"{_bytes(need)}, more than this machine's {_bytes(limit)}")
    return lines


def physical_memory() -> int:
    """This machine's memory in bytes (a large figure where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX: no better figure than 1 TiB
        return 1 << 40


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _check_cycles(g: Any) -> None:
    """One line naming the nodes of a dependency cycle (shape inference would only say that
    some input has no type)."""
    import networkx as nx

    dg = nx.DiGraph()
    producer = {}
    for i, n in enumerate(g.node):
        dg.add_node(i)
        for o in n.output:
            producer[o] = i
    for i, n in enumerate(g.node):
        for x in n.input:
            if x in producer:
                dg.add_edge(producer[x], i, value=x)
    if nx.is_directed_acyclic_graph(dg):  # linear; find_cycle's edge DFS costs ~10x on 10^5 nodes
        return
    try:
        cycle = nx.find_cycle(dg)
    except nx.NetworkXNoCycle:
        return
    names = [g.node[u].name or f"{g.node[u].op_type}_{u}" for u, _ in cycle]
    through = ", ".join(f"'{dg[u][v]['value']}'" for u, v in cycle)
    path = " -> ".join(f"'{n}'" for n in [*names, names[0]])
    raise ModelError(f"node '{names[0]}' ({g.node[cycle[0][0]].op_type}): nodes {path} form a cycle "
                     f"(through {through})")


def _fmt(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return "unknown"
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _fold(nodes: list[Node], consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
          dtypes: dict[str, np.dtype], opset: int) -> list[Node]:
    """Evaluate every node whose inputs are all known; the others stay, in order."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    kept = []
    for node in nodes:
        known = all(not x or x in consts for x in node.inputs)
        if node.op == "Shape" and node.inputs[0] not in consts:
            shape = shapes.get(node.inputs[0])
            if shape is not None and all(d >= 0 for d in shape):
                start, end = node.attrs.get("start", 0), node.attrs.get("end", None)
                consts[node.outputs[0]] = np.array(shape[start:end], dtype=np.int64)
                continue
        if not known or node.op in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                                    "RandomUniformLike", "Multinomial", "Bernoulli"):
            kept.append(node)
            continue
        proto = helper.make_node(node.op, list(node.inputs), list(node.outputs), **node.attrs)
        try:
            results = ReferenceEvaluator(proto, opsets={"": opset}).run(
                None, {x: consts[x] for x in node.inputs if x})
        except Exception as exc:
            raise ModelError(f"{node.where(opset)}: constant folding with onnx.reference failed "
                             f"({type(exc).__name__}: {exc})") from None
        for name, value in zip(node.outputs, results, strict=False):
            if name:
                consts[name] = np.asarray(value)
                shapes[name] = tuple(np.shape(value))
                dtypes[name] = np.asarray(value).dtype
    return kept
