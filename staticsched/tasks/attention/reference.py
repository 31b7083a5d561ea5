"""The ``attention`` kind's NumPy reference."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from staticsched.tasks.attention.task import AttentionTask


def reference(task: AttentionTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``softmax(scale * q kᵀ [+ mask]) v`` in float32 (the fp16 inputs, exactly widened)."""
    h = task.heads
    q = env[task.q].astype(np.float32).reshape(h, task.sq, task.d)
    k = env[task.k].astype(np.float32).reshape(h, task.sk, task.d)
    v = env[task.v].astype(np.float32).reshape(h, task.sk, task.dv)
    s = np.matmul(q, np.swapaxes(k, 1, 2)) * np.float32(task.softmax_scale)
    if task.causal:
        s = np.where(np.triu(np.ones((task.sq, task.sk), dtype=bool), 1), np.float32(-np.inf), s)
    e = np.exp(s - s.max(axis=2, keepdims=True))
    p = e / e.sum(axis=2, keepdims=True, dtype=np.float32)
    return {task.out: np.matmul(p, v).reshape(h * task.sq, task.dv).astype(np.float32)}
