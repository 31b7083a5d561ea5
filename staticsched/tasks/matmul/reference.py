"""The ``matmul`` kind's NumPy reference and input scales."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from staticsched.model.dtypes import numpy_dtype
from staticsched.model.vecops import VECOPS
from staticsched.tasks.matmul.task import MatmulTask
from staticsched.tasks.rowops import ROWOPS


def apply_step(op: str, x: np.ndarray, y: np.ndarray | None, value: float | None) -> np.ndarray:
    """One Vector step as the epilogue runs it: fp32 from its operands, rounded back to the
    tile's dtype (``x``'s)."""
    vop = VECOPS[op]
    args = [x.astype(np.float32)] if y is None else [x.astype(np.float32), y.astype(np.float32)]
    return vop.apply(args, {"scalar": value if value is not None else 0.0}).astype(x.dtype)


def matrices(value: np.ndarray, lead: tuple[int, ...], transpose: bool) -> np.ndarray:
    """A 2-D GM value as its stack of matrices ``[*lead, r, c]``, transposed when asked."""
    rows = value.shape[0] // max(1, math.prod(lead))
    x = value.reshape(*lead, rows, value.shape[1])
    return np.swapaxes(x, -1, -2) if transpose else x


def reference(task: MatmulTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    a = matrices(env[task.a].astype(np.float32), task.a_lead, task.transpose_a)
    b = matrices(env[task.b].astype(np.float32), task.b_lead, task.transpose_b)
    # fp32 accumulation, then one rounding to the output's dtype: FixPipe's on the Cube, the cast
    # after the Vector lowering's fp32 column sums (engine "vector"); only the order of the fp32
    # sums differs
    out = numpy_dtype(task.out_dtype)
    y = np.matmul(a, b).reshape(task.batches * task.m, task.n).astype(out)
    for step in task.epilogue:
        if step.reduces:
            g = env[step.gamma] if step.gamma else None
            beta = env[step.beta] if step.beta else None
            y = ROWOPS[step.op].reference(y, g, beta, step.epsilon).astype(out)
        else:
            y = apply_step(step.op, y, env[step.tensor] if step.tensor else None, step.value)
    return {task.out: y}


def input_scales(task: MatmulTask) -> dict[str, float]:
    """``1 / sqrt(K)`` for ``b``: a K-long dot product of uniform [-1, 1) values then has a
    standard deviation of about 1/3 whatever K is."""
    return {task.b: 1.0 / math.sqrt(task.k)}
