"""NumPy reference of a TaskGraph: seeded inputs and the expected outputs.

The reference follows the same precision contract as the micro-ops, but
computes each task whole, independently of tiling: fp16 operands, one fp32
matmul (fp32 accumulation), fp32 -> fp16 where FixPipe converts, and every
epilogue or elementwise step computed in fp32 from fp16 values and rounded back
to fp16. The step functions are those of ``opkinds.VECTOR_OPS``, so the Vector
semantics are defined once. The only expected difference from a replay of the
lowered ops is the fp32 summation order over K (per K step there, one BLAS call
here), which tolerances absorb.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from staticsched._fields import Problems
from staticsched.errors import InputError
from staticsched.model.opkinds import VECTOR_OPS
from staticsched.model.taskgraph import ElementwiseTask, MatmulTask, TaskGraph

_F16 = np.float16
_F32 = np.float32


def _weight_scales(tg: TaskGraph) -> dict[str, float]:
    """``1 / sqrt(K)`` for tensors used as a matmul ``b`` operand (the smallest if several)."""
    scales: dict[str, float] = {}
    for task in tg.tasks:
        if isinstance(task, MatmulTask):
            s = 1.0 / math.sqrt(task.k)
            scales[task.b] = min(s, scales.get(task.b, s))
    return scales


def make_inputs(tg: TaskGraph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded fp16 values for every tensor no task writes, all 2-D.

    One ``np.random.default_rng(seed)`` draws the tensors in name order, uniform in
    ``[-1, 1)``; tensors used as a matmul ``b`` operand are scaled by ``1/sqrt(K)``, so a
    K-long dot product has a standard deviation of about ``1/3`` whatever K is (each of the
    K terms has variance ``1/3 * 1/(3K)``) — fp16 stays well scaled and gelu sees both of its
    regimes.

    Parameters
    ----------
    tg
        The task graph.
    seed
        Seed of the generator; equal seeds give identical arrays.

    Returns
    -------
    dict
        Tensor name -> C-contiguous ``float16`` array of the tensor's 2-D shape.
    """
    rng = np.random.default_rng(seed)
    scales = _weight_scales(tg)
    out = {}
    for name in tg.input_names:
        shape = tg.tensor_map[name].shape2d
        values = rng.uniform(-1.0, 1.0, size=shape) * scales.get(name, 1.0)
        out[name] = np.ascontiguousarray(values.astype(_F16))
    return out


def _step(op: str, x: np.ndarray, y: np.ndarray | None, value: float | None) -> np.ndarray:
    """One Vector step: fp32 from fp16 operands, rounded back to fp16."""
    arity, fn = VECTOR_OPS[op]
    args = [x.astype(_F32)] if arity == 1 else [x.astype(_F32), y.astype(_F32)]
    return fn(*args, value if value is not None else 0.0).astype(_F16)


def _matmul(task: MatmulTask, env: Mapping[str, np.ndarray]) -> np.ndarray:
    a = env[task.a].astype(_F32)
    b = env[task.b].astype(_F32)
    if task.transpose_b:
        b = b.T
    # fp32 accumulation, then FixPipe's fp32 -> fp16
    y = (a @ b).astype(_F16)
    for step in task.epilogue:
        y = _step(step.op, y, env[step.tensor] if step.tensor else None, step.value)
    return y


def _elementwise(task: ElementwiseTask, env: Mapping[str, np.ndarray]) -> np.ndarray:
    x = env[task.inputs[0]]
    y = env[task.inputs[1]] if len(task.inputs) > 1 else None
    return _step(task.op, x, y, task.value)


def reference(tg: TaskGraph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate ``tg`` on ``inputs`` in dependency order.

    Parameters
    ----------
    tg
        The task graph.
    inputs
        A value for every tensor no task writes (as :func:`make_inputs` returns), of its
        2-D shape (a 1-D ``[N]`` tensor may also be given as ``(N,)``).

    Returns
    -------
    dict
        Every tensor some task writes -> its ``float16`` 2-D value.

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
        env[name] = value.reshape(shape).astype(_F16)
    pr.raise_if_any(InputError)
    for task in tg.ordered_tasks:
        if isinstance(task, MatmulTask):
            env[task.out] = _matmul(task, env)
        else:
            env[task.out] = _elementwise(task, env)
    return {name: env[name] for name in tg.output_names}
