"""NumPy reference of a TaskGraph: seeded inputs and the expected outputs.

Each task kind computes its outputs whole, independently of tiling, following the same
precision contract as its micro-ops (operands in their tensors' dtype, fp32 accumulation,
fp32 -> the output's dtype where the hardware converts, Vector steps in fp32 from the tiles'
values rounded back to the tile's dtype);
the Vector semantics come from the one vec-op table. Attention's reference is plain float32
(``softmax(scale * Q Kᵀ [+ mask]) V``). This module draws the inputs and runs the kinds'
references in dependency order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from staticsched._fields import Problems
from staticsched.errors import InputError
from staticsched.frontend.taskgraph import TaskGraph
from staticsched.model.dtypes import as_dtype
from staticsched.tasks import kind_of


def _input_scales(tg: TaskGraph) -> dict[str, float]:
    """Per input tensor, the factor its kinds ask for (the smallest if several do)."""
    scales: dict[str, float] = {}
    for task in tg.tasks:
        for name, s in kind_of(task).input_scales(task).items():
            scales[name] = min(s, scales.get(name, s))
    return scales


def make_inputs(tg: TaskGraph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded values for every tensor no task writes, all 2-D, each rounded to its tensor's
    dtype; constants (a model's weights, :attr:`TaskGraph.constants`) keep their values.

    One ``np.random.default_rng(seed)`` draws the tensors in name order, uniform in
    ``[-1, 1)``, scaled as the tasks reading them ask (a matmul's ``b`` operand by
    ``1/sqrt(K)``, so that a K-long dot product has a standard deviation of about ``1/3``
    whatever K is — fp16 stays well scaled and gelu sees both of its regimes), and in
    ``[0.5, 1.5)`` for operands an op needs positive (a square root's, a divisor's; ``[1, 2)``
    for ``acosh``'s).

    Parameters
    ----------
    tg
        The task graph.
    seed
        Seed of the generator; equal seeds give identical arrays.

    Returns
    -------
    dict
        Tensor name -> C-contiguous array of the tensor's dtype (``float16``, ``float32``, or
        ``ml_dtypes``' ``bfloat16``) and 2-D shape. The draws do not depend on the dtypes: a
        graph's fp32 inputs are its fp16 inputs' values before rounding.
    """
    rng = np.random.default_rng(seed)
    scales = _input_scales(tg)
    positive: dict[str, float] = {}
    for task in tg.tasks:
        for name, least in kind_of(task).positive_inputs(task).items():
            positive[name] = max(least, positive.get(name, least))
    out = {}
    for name in tg.input_names:
        decl = tg.tensor_map[name]
        shape = decl.shape2d
        if name in tg.constants:  # drawn all the same, so the other inputs' values do not move
            rng.uniform(-1.0, 1.0, size=shape)
            out[name] = as_dtype(tg.constants[name], decl.dtype)
            continue
        values = rng.uniform(-1.0, 1.0, size=shape)
        if name in positive:  # a square root's operand, a divisor: [0.5, 1.5); acosh's [1, 2)
            values = np.abs(values) + positive[name]
        values = values * scales.get(name, 1.0)
        out[name] = as_dtype(values, decl.dtype)
    return out


def reference(tg: TaskGraph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``tg`` on ``inputs`` in dependency order.

    Parameters
    ----------
    tg
        The task graph.
    inputs
        A value for every tensor no task writes (as :func:`make_inputs` returns), of its
        2-D shape (or its declared shape).

    Returns
    -------
    dict
        Every tensor some task writes -> its 2-D value (in its tensor's dtype; ``float32`` for
        attention, whose reference is float32).

    Raises
    ------
    InputError
        If an input is missing or has the wrong shape, naming the tensor and the shapes.
    """
    pr = Problems()
    env: dict[str, np.ndarray] = {}
    for name in tg.input_names:
        shape = tg.tensor_map[name].shape2d
        if name not in inputs:
            pr.add(f"reference: no value for input tensor '{name}' {list(shape)}")
            continue
        value = np.asarray(inputs[name])
        if value.shape not in (shape, tg.tensor_map[name].shape):
            pr.add(f"reference: input '{name}' has shape {list(value.shape)}, expected {list(shape)}")
            continue
        env[name] = as_dtype(value.reshape(shape), tg.tensor_map[name].dtype)
    pr.raise_if_any(InputError)
    for task in tg.ordered_tasks:
        env.update(kind_of(task).reference(task, env))
    return {name: env[name] for name in tg.output_names}
