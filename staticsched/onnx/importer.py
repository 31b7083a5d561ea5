"""``import_model``: an ONNX model as a fused TaskGraph (re-exported by :mod:`staticsched.onnx`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from staticsched.frontend.fusion import fuse
from staticsched.frontend.mapping import choose_engines
from staticsched.frontend.onnx_import import Imported, import_unfused
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware


def import_model(model: Any, hw: Hardware | str | Path | None = None, *, fusion: str = "rules",
                 mapping: str = "rules", dtype: str = "float16") -> Imported:
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
        ``"none"`` or ``"rules"`` (``"search"`` needs schedules: ``staticsched schedule
        --fusion search``).
    mapping
        ``"rules"``: a matmul the arithmetic-intensity rule sends to the Vector unit gets
        ``"engine": "vector"`` (:func:`staticsched.frontend.mapping.choose_engines`);
        ``"none"`` keeps every matmul on the Cube.
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
    imported = import_unfused(model, dtype)
    if hw is None or fusion == "none":
        return imported
    hw = load_hardware(hw)
    fused = fuse(imported.graph, hw, mode=fusion, keep=[b.tensor for b in imported.outputs])
    graph = fused.graph
    if mapping != "none":
        graph, _ = choose_engines(graph, hw, mode=mapping)
    return attrs.evolve(imported, graph=graph, fusion=fused)
