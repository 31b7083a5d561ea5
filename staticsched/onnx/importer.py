"""``import_model``: an ONNX model as a fused TaskGraph (re-exported by :mod:`staticsched.onnx`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from staticsched.frontend.fusion import fuse, search_fusion
from staticsched.frontend.layouts import assign_layouts
from staticsched.frontend.mapping import choose_engines
from staticsched.frontend.onnx_import import Imported, import_unfused
from staticsched.frontend.taskgraph import TaskGraph
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.options import DEFAULT_OP_BUDGET


def import_model(model: Any, hw: Hardware | str | Path | None = None, *, fusion: str = "rules",
                 mapping: str = "rules", op_budget: int | None = DEFAULT_OP_BUDGET,
                 weights_nz: bool = True, dtype: str = "float16", layouts: str = "rules") -> Imported:
    """Import an ONNX model (a path or an ``onnx.ModelProto``) as a TaskGraph.

    The model is upgraded to opset 17 when older than 13, shape-inferred and constant-folded;
    its initializers become the graph's constants (:attr:`TaskGraph.constants`). Exporters'
    decompositions (LayerNorm, GELU, attention) are recovered; then the fusion pass decides,
    with ``hw``'s cost model, which tasks become one (:func:`staticsched.frontend.fusion.fuse`).

    Parameters
    ----------
    model
        The model file's path, or the ``ModelProto``.
    hw
        The hardware whose costs the fusion rules weigh; None keeps one task per node.
    fusion
        ``"none"``, ``"rules"`` or ``"search"`` (each matmul's candidate epilogues scheduled
        with the list method, the fastest kept: :func:`staticsched.frontend.fusion.search_fusion`).
    mapping
        ``"rules"``: a matmul the arithmetic-intensity rule sends to the Vector unit gets
        ``"engine": "vector"``; ``"search"``: both engines scheduled, the faster kept
        (:func:`staticsched.frontend.mapping.choose_engines`); ``"none"`` keeps every matmul
        on the Cube.
    op_budget
        The searches' lowering budget.
    weights_nz
        Declare the constant weights Cube matmuls read as ``b`` in the Cube's fractal format
        (``"layout": "NZ"``), as frameworks convert them once at load time: their loads then
        need no ND -> NZ conversion (the hardware's ``nd2nz_derate``). False keeps every
        tensor ND. The values stay row-major either way.
    layouts
        ``"rules"``: each tensor's layout (ND or the Cube's NZ) by the cycles its accesses cost
        with ``hw``'s ND2NZ model, and an AIV reformat task where an input's NZ copy is cheaper
        than its conversions; ``"search"``: the rules checked by the list method; ``"given"``:
        the import's own (constant weights NZ unless ``weights_nz`` is false)
        (:func:`staticsched.frontend.layouts.assign_layouts`).
    dtype
        What the graph computes in: ``"float16"`` (default), ``"bfloat16"`` or ``"float32"``.
        Every tensor is declared with it, the weights are rounded to it, and the model's
        float16/float32 inputs are rounded to it on the way in (its outputs come back in their
        own dtype).

    Returns
    -------
    Imported
        The TaskGraph, the GM tensor of each model input and output, the fusion decisions.

    Raises
    ------
    staticsched.errors.ModelError
        One line per problem: the node, its op type and opset, and what is unsupported.
    """
    imported = import_unfused(model, dtype, weights_nz=weights_nz)
    if hw is None:
        return imported
    hw = load_hardware(hw)
    keep = [b.tensor for b in imported.outputs]

    def measure(g: TaskGraph) -> int:
        from staticsched.pipeline import compile_graph

        return compile_graph(g, hw, method="list", op_budget=op_budget).schedule.makespan

    search: list[str] = []
    if fusion == "search":
        fused, search = search_fusion(imported.graph, hw, measure, keep=keep)
    else:
        fused = fuse(imported.graph, hw, mode=fusion, keep=keep)
    graph, engines = fused.graph, []
    if mapping != "none":
        graph, engines = choose_engines(graph, hw, mode=mapping, measure=measure)
    fixed = [b.tensor for b in (*imported.inputs, *imported.outputs)]
    decided = assign_layouts(graph, hw, mode=layouts, fixed=fixed, weights_nz=weights_nz, measure=measure)
    return attrs.evolve(imported, graph=decided.graph, fusion=fused, search=search, engines=engines,
                        mapping=mapping, layouts=decided)
