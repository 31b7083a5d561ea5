"""ONNX models to TaskGraphs (:func:`import_model`); the public face is :mod:`staticsched.onnx`.

:mod:`.load` reads, upgrades, shape-infers and constant-folds the model; :mod:`.translate`
turns its nodes into an unfused TaskGraph whose weights are constants. ``onnx`` is imported
only when a model is, so the rest of the package works without it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from staticsched.errors import InputError, ModelError, StaticschedError
from staticsched.frontend.onnx_import.load import load_net
from staticsched.frontend.onnx_import.patterns import recover
from staticsched.frontend.onnx_import.translate import IMPORT_DTYPES, Binding, Translator
from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict

__all__ = ["IMPORT_DTYPES", "Binding", "Imported", "import_unfused"]


@attrs.frozen
class Imported:
    """A model as a TaskGraph: the graph, and where the model's inputs and outputs live in it.

    ``origin`` maps every task id to the ONNX node it came from.
    """

    graph: TaskGraph
    inputs: tuple[Binding, ...] = attrs.field(converter=tuple)
    outputs: tuple[Binding, ...] = attrs.field(converter=tuple)
    origin: dict[str, str] = attrs.field(eq=False)
    nodes: int = 0
    #: the fusion pass's result (:class:`staticsched.frontend.fusion.Fused`), None if not run
    fusion: Any = attrs.field(default=None, eq=False)
    #: exporters' decompositions recovered as one node: op -> count
    recovered: dict[str, int] = attrs.field(factory=dict, eq=False)
    opset: int = 0
    #: the fusion search's makespans, and the mapping's decisions, one line each
    search: tuple[str, ...] = attrs.field(default=(), converter=tuple, eq=False)
    engines: tuple[str, ...] = attrs.field(default=(), converter=tuple, eq=False)
    mapping: str = ""
    #: the layout pass's result (:class:`staticsched.frontend.layouts.Layouts`), None if not run
    layouts: Any = attrs.field(default=None, eq=False)


def import_unfused(model: Any, dtype: str = "float16", *, weights_nz: bool = True) -> Imported:
    """One task per computing node of ``model`` (a path or an ``onnx.ModelProto``), every tensor
    declared with ``dtype`` (one of :data:`IMPORT_DTYPES`) and every weight rounded to it.

    With ``weights_nz`` the constant weights a Cube matmul reads as its ``b`` are declared in
    the Cube's fractal format (``"layout": "NZ"``, :func:`nz_weights`), as frameworks convert
    weights once at load time; their values stay row-major.

    Raises
    ------
    ModelError
        One line naming the node, its op type and opset for what is outside the supported set.
    InputError
        An unknown ``dtype``.
    """
    if dtype not in IMPORT_DTYPES:
        raise InputError(f"import: dtype {dtype!r} is not one of {', '.join(IMPORT_DTYPES)}")
    loaded = load_net(model)
    net = recover(loaded)
    before = Counter(n.op for n in loaded.nodes)
    recovered = {op: c - before.get(op, 0) for op, c in sorted(Counter(n.op for n in net.nodes).items())
                 if c > before.get(op, 0)}
    tr = Translator(net, dtype)
    ins, outs = tr.run()
    doc = {"format": "staticsched.taskgraph", "version": 1,
           "tensors": {name: {"shape": list(shape), "dtype": dtype}
                       for name, shape in sorted(tr.tensors.items())},
           "tasks": tr.tasks}
    if not tr.tasks:
        raise ModelError("model: nothing to compute (every output is a constant)")
    try:
        tg = taskgraph_from_dict(doc, "<imported model>")
    except StaticschedError as exc:
        raise ModelError([f"model: {line}" for line in exc.problems]) from None
    nz = nz_weights(tg, set(tr.constants)) if weights_nz else set()
    if nz:
        for name in nz:
            doc["tensors"][name]["layout"] = "NZ"
        tg = taskgraph_from_dict(doc, "<imported model>")
    tg = TaskGraph(tg.tensors, tg.tasks, {n: v for n, v in sorted(tr.constants.items())})
    return Imported(tg, ins, outs, dict(tr.origin), len(loaded.nodes), recovered=recovered, opset=net.opset)


def nz_weights(tg: TaskGraph, constants: set[str]) -> set[str]:
    """The constants to store in the Cube's fractal format: each is the ``b`` of a matmul on
    the Cube, and every task reading it reads it as a Cube operand (a Vector task reads
    row-major tiles, so a weight it also reads stays ND)."""
    from staticsched.tasks import kind_of
    from staticsched.tasks.matmul import MatmulTask

    weights = {t.b for t in tg.tasks if isinstance(t, MatmulTask) and not t.on_vector} & constants
    for task in tg.tasks:
        weights -= set(task.reads) - set(kind_of(task).cube_operands(task))
    return weights
