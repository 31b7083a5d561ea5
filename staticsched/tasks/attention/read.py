"""Reading an ``attention`` task from TaskGraph JSON and writing it back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from staticsched._fields import Problems, check_keys, get_bool, get_int, get_mapping
from staticsched.tasks.attention.task import AttentionTask, AttentionTiling
from staticsched.tasks.base import (
    ReadContext,
    fmt_shape,
)

_KEYS = ("id", "type", "q", "k", "v", "out", "causal", "scale", "tiling")
_TILING_KEYS = ("block_q", "block_kv")


def read(body: Mapping[str, Any], ctx: ReadContext) -> AttentionTask | None:
    w, pr = ctx.where, ctx.pr
    check_keys(body, _KEYS, w, pr)
    q, k, v, out = (ctx.tensor(body, key) for key in ("q", "k", "v", "out"))
    causal = get_bool(body, "causal", w, pr, default=False)
    scale = ctx.number(body, "scale")
    tiling = _read_tiling(body, w, ctx.tiling_pr) if "tiling" in body else None
    if q is None or k is None or v is None or out is None:
        return None
    bad = [t for t in (q, k, v) if t.rank < 2]
    for t in bad:
        ctx.add(f"'{t.name}' is {fmt_shape(t.shape)}: attention operands are [..., seq, dim] (2 to 4 dims)")
    if bad:
        return None
    sq, d = q.matrix
    sk, dk = k.matrix
    skv, dv = v.matrix
    if dk != d:
        ctx.add(f"mismatched head dimensions: q '{q.name}' {fmt_shape(q.shape)} has d = {d} but k '{k.name}' "
                f"{fmt_shape(k.shape)} has d = {dk}")
    if skv != sk:
        ctx.add(f"k '{k.name}' {fmt_shape(k.shape)} has {sk} keys but v '{v.name}' {fmt_shape(v.shape)} "
                f"has {skv}")
    for t in (k, v):
        if t.lead != q.lead:
            ctx.add(f"leading (batch, head) dims of {t.name!r} {fmt_shape(t.lead)} differ from q '{q.name}' "
                    f"{fmt_shape(q.lead)}")
    if causal and sq != sk:
        ctx.add(f"a causal mask needs a square attention (as many queries as keys); q '{q.name}' has {sq} "
                f"and k '{k.name}' has {sk}")
    want = (*q.lead, sq, dv)
    if tuple(out.shape) != want:
        ctx.add(f"out '{out.name}' is {fmt_shape(out.shape)}, expected {fmt_shape(want)} "
                f"(queries of q '{q.name}', dim of v '{v.name}')")
    ctx.not_own_output([q.name, k.name, v.name], out.name)
    return AttentionTask(id=ctx.task_id, q=q.name, k=k.name, v=v.name, out=out.name,
                         heads=math.prod(q.lead), sq=sq, sk=sk, d=d, dv=dv, causal=causal, scale=scale,
                         tiling=tiling)


def _read_tiling(body: Mapping[str, Any], w: str, pr: Problems) -> AttentionTiling | None:
    raw = get_mapping(body, "tiling", w, pr)
    tw = f"{w}: tiling"
    check_keys(raw, _TILING_KEYS, tw, pr)
    before = len(pr.lines)
    sizes = [get_int(raw, key, tw, pr, minimum=1) for key in _TILING_KEYS]
    return AttentionTiling(*sizes) if len(pr.lines) == before else None


def to_dict(task: AttentionTask) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task.id, "type": task.type, "q": task.q, "k": task.k, "v": task.v,
                           "out": task.out, "causal": task.causal}
    if task.scale is not None:
        out["scale"] = task.scale
    if task.tiling is not None:
        out["tiling"] = {"block_q": task.tiling.block_q, "block_kv": task.tiling.block_kv}
    return out
