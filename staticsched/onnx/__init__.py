"""ONNX models in staticsched: :func:`import_model` and the backend (:mod:`.backend`).

``onnx`` (the ``staticsched[onnx]`` extra) is imported when a model is, not with this module.
"""

from __future__ import annotations

import importlib
from typing import Any

from staticsched.frontend.fusion import FUSION_MODES
from staticsched.frontend.onnx_import import Binding, Imported
from staticsched.onnx.importer import import_model

__all__ = ["FUSION_MODES", "Binding", "Imported", "import_model"]


def __getattr__(name: str) -> Any:
    # ``staticsched.onnx.backend`` on first use: it needs ``onnx`` itself, this module does not.
    # ``from staticsched.onnx import backend`` asks this hook before it imports the submodule,
    # so the hook imports it by its full name: a from-import here would ask the hook again.
    if name == "backend":
        return importlib.import_module(f"{__name__}.backend")
    raise AttributeError(f"module 'staticsched.onnx' has no attribute {name!r}")
