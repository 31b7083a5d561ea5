"""The TaskGraph document an ONNX import writes, and the values it reads while writing it.

A value of the net is a constant (a NumPy array, folded by :mod:`.load`) or a :class:`GM`
tensor seen through an ONNX shape. :class:`GraphWriter` holds the document under construction
-- its tensors (declared at most 4-D, in the import's dtype), its constants (rounded to it),
its tasks and where each came from -- and binds the graph's inputs and outputs to GM tensors.
What each ONNX node becomes is :mod:`.translate`'s.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import numpy as np

from staticsched.errors import ModelError
from staticsched.frontend.onnx_import.load import Net, Node
from staticsched.model.dtypes import COMPUTE_DTYPES, as_dtype

MAX_RANK = 4
#: ONNX element types of a model's inputs and outputs: computed in the import's dtype
#: (``float16`` unless asked otherwise), returned in their own
FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))
#: the dtypes an import may compute in (every tensor of the TaskGraph is declared with it)
IMPORT_DTYPES = tuple(COMPUTE_DTYPES)

_NAME_OK = re.compile(r"[^A-Za-z0-9_:/+\-\[\]#@]")


@attrs.frozen
class GM:
    """A value held in a GM tensor: ``tensor`` as declared, seen with the ONNX ``shape``."""

    tensor: str
    shape: tuple[int, ...]
    transposed: bool = False


@attrs.frozen
class Binding:
    """A graph input or output: its ONNX name, shape and dtype, and the GM tensor holding it."""

    name: str
    tensor: str
    shape: tuple[int, ...]
    dtype: str


def rows_cols(shape: tuple[int, ...]) -> tuple[int, int]:
    """The 2-D view of a row-major shape: leading dims flattened into rows."""
    if not shape:
        return (1, 1)
    return (math.prod(shape[:-1]), shape[-1])


def declared(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The TaskGraph shape of an ONNX shape: at most 4-D, a scalar as ``[1]``."""
    if not shape:
        return (1,)
    if len(shape) > MAX_RANK:
        return (math.prod(shape[: len(shape) - MAX_RANK + 1]), *shape[len(shape) - MAX_RANK + 1:])
    return tuple(shape)


class GraphWriter:
    """The TaskGraph document of ``net`` being written: every tensor is declared with
    ``dtype`` and every constant rounded to it; ``node`` is the ONNX node being translated
    (what :meth:`fail` names)."""

    def __init__(self, net: Net, dtype: str = "float16") -> None:
        self.net = net
        self.dtype = dtype
        self.env: dict[str, GM | np.ndarray] = dict(net.consts)
        self.tensors: dict[str, tuple[int, ...]] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.tasks: list[dict[str, Any]] = []
        self.origin: dict[str, str] = {}  # task id -> the ONNX node it came from
        self._names: set[str] = set()
        self._const_names: dict[tuple[str, tuple[int, ...]], str] = {}
        self.node: Node | None = None

    # ----------------------------------------------------------------- names and values

    def fresh(self, base: str, *, task: bool = False) -> str:
        """A name made from ``base`` that no tensor or task has yet (characters a TaskGraph
        name may not hold become ``_``, a number suffix tells it from earlier ones)."""
        name = _NAME_OK.sub("_", base.replace(".", "_") if task else base) or "t"
        if name[0] in "-+":
            name = "_" + name
        out, i = name, 1
        while out in self._names:
            i += 1
            out = f"{name}_{i}"
        self._names.add(out)
        return out

    def fail(self, why: str) -> ModelError:
        """The error to raise for the node being translated: one line naming it, then ``why``."""
        assert self.node is not None
        return ModelError(f"{self.net.where(self.node)}: {why}")

    def gm(self, name: str) -> GM:
        """The GM value ``name`` (a constant becomes a constant tensor)."""
        v = self.env[name]
        if isinstance(v, GM):
            return v
        return self.const_tensor(v, name)

    def const_tensor(self, value: np.ndarray, base: str, shape: tuple[int, ...] | None = None) -> GM:
        """``value`` as a constant tensor named after ``base``, seen with ``shape`` (default its
        own); a second call with the same base and declared shape returns the first tensor."""
        value = np.asarray(value)
        if value.dtype.kind not in "fiub":
            raise self.fail(f"constant '{base}' has dtype {value.dtype}, not a number")
        shape = tuple(value.shape) if shape is None else shape
        key = (base, declared(shape))
        if key in self._const_names:
            return GM(self._const_names[key], shape)
        name = self.fresh(base)
        self.tensors[name] = declared(shape)
        held = rows_cols(declared(shape))
        self.constants[name] = as_dtype(value.reshape(held), self.dtype)
        self._const_names[key] = name
        return GM(name, shape)

    def out_tensor(self, onnx_name: str, shape: tuple[int, ...]) -> str:
        """A new tensor for ONNX value ``onnx_name`` of ``shape``; its name."""
        name = self.fresh(onnx_name)
        self.tensors[name] = declared(shape)
        return name

    def task(self, body: dict[str, Any]) -> None:
        """Add the task ``body`` (its ``id`` made fresh), from the node being translated."""
        assert self.node is not None
        tid = self.fresh(body.pop("id"), task=True)
        self.tasks.append({"id": tid, **body})
        self.origin[tid] = self.node.name

    def shape(self, name: str) -> tuple[int, ...]:
        """The ONNX shape of value ``name``, as shape inference gave it."""
        return tuple(self.net.shapes[name])

    # ----------------------------------------------------------------- inputs and outputs

    def bind_inputs(self) -> list[Binding]:
        """Declare a tensor for every graph input (float32 and float16 only); their bindings."""
        out = []
        for name in self.net.inputs:
            dtype = self.net.dtypes.get(name)
            if dtype not in FLOAT_TYPES:
                raise ModelError(f"input '{name}': dtype {dtype} is not supported (float32 and float16 "
                                 f"inputs are computed in {self.dtype})")
            shape = self.shape(name)
            t = self.fresh(name)
            self.tensors[t] = declared(shape)
            self.env[name] = GM(t, shape)
            out.append(Binding(name, t, shape, str(dtype)))
        return out

    def bind_outputs(self) -> list[Binding]:
        """The graph outputs' bindings, once every node is translated; an output no task of
        its own writes (an input, a constant, another output) gets a copy task."""
        out = []
        written = {t["out"] for t in self.tasks}
        inputs = {self.env[n].tensor for n in self.net.inputs if isinstance(self.env[n], GM)}  # type: ignore[union-attr]
        seen: set[str] = set()
        for name in self.net.outputs:
            dtype = self.net.dtypes.get(name)
            if dtype not in FLOAT_TYPES:
                raise ModelError(f"output '{name}': dtype {dtype} is not supported (float32 and float16)")
            v = self.env[name]
            shape = self.shape(name)
            if isinstance(v, GM) and v.transposed:
                raise ModelError(f"output '{name}': a transposed view is a real move, not supported")
            if not isinstance(v, GM) or v.tensor in inputs or v.tensor in seen or v.tensor not in written:
                # an output that is an input, a constant or another output: a real copy
                self.node = Node(f"{name}/copy", "Identity", [name], [name], {})
                src = self.gm(name)
                t = self.out_tensor(f"{name}_copy", src.shape)
                self.task({"id": f"{name}/copy", "type": "elementwise", "op": "cast",
                           "inputs": [src.tensor], "out": t})
                self.tensors[t] = self.tensors[src.tensor]
                v = GM(t, shape)
            seen.add(v.tensor)
            out.append(Binding(name, v.tensor, shape, str(dtype)))
        return out
