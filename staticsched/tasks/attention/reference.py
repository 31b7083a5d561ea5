"""The ``attention`` kind's NumPy reference."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from staticsched.tasks.attention.task import AttentionTask


def _heads(x: np.ndarray, p: int, seq: int, width: int) -> np.ndarray:
    """The ``[batch * seq, p * width]`` 2-D view as ``[batch * p, seq, width]`` matrices, head
    ``h`` of batch element ``b`` at ``b * p + h``."""
    return x.reshape(-1, seq, p, width).transpose(0, 2, 1, 3).reshape(-1, seq, width)


def reference(task: AttentionTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``softmax(scale * q kᵀ [+ mask] [+ causal mask]) v`` in float32 (the fp16 inputs, exactly
    widened), per (batch, head) matrix; packed heads are the column blocks of q, k, v and out."""
    p = task.packed
    q = _heads(env[task.q].astype(np.float32), p, task.sq, task.d)
    k = _heads(env[task.k].astype(np.float32), p, task.sk, task.d)
    v = _heads(env[task.v].astype(np.float32), p, task.sk, task.dv)
    s = np.matmul(q, np.swapaxes(k, 1, 2)) * np.float32(task.softmax_scale)
    if task.mask:
        mask = env[task.mask].astype(np.float32).reshape(task.mask_rows, task.sk)
        rows = np.zeros(task.heads, dtype=np.intp) if task.mask_rows == 1 else np.arange(task.heads) // p
        s = s + mask[rows][:, None, :]
    if task.causal:
        s = np.where(np.triu(np.ones((task.sq, task.sk), dtype=bool), 1), np.float32(-np.inf), s)
    e = np.exp(s - s.max(axis=2, keepdims=True))
    p_ = e / e.sum(axis=2, keepdims=True, dtype=np.float32)
    o = np.matmul(p_, v)  # [batch * p, sq, dv]
    o = o.reshape(-1, p, task.sq, task.dv).transpose(0, 2, 1, 3).reshape(-1, p * task.dv)
    return {task.out: np.ascontiguousarray(o, dtype=np.float32)}
