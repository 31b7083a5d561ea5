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
from staticsched.tasks.builder import FP16

_KEYS = ("id", "type", "q", "k", "v", "out", "causal", "heads", "mask", "scale", "tiling")
_TILING_KEYS = ("block_q", "block_kv")


def read(body: Mapping[str, Any], ctx: ReadContext) -> AttentionTask | None:
    w, pr = ctx.where, ctx.pr
    check_keys(body, _KEYS, w, pr)
    q, k, v, out = (ctx.tensor(body, key) for key in ("q", "k", "v", "out"))
    causal = get_bool(body, "causal", w, pr, default=False)
    scale = ctx.number(body, "scale")
    packed = get_int(body, "heads", w, pr, default=1, minimum=1)
    has_mask, mask = ctx.optional_tensor(body, "mask")
    tiling = _read_tiling(body, w, ctx.tiling_pr) if "tiling" in body else None
    if q is None or k is None or v is None or out is None or (has_mask and mask is None):
        return None
    bad = [t for t in (q, k, v) if t.rank < 2]
    for t in bad:
        ctx.add(f"'{t.name}' is {fmt_shape(t.shape)}: attention operands are [..., seq, dim] (2 to 4 dims)")
    if bad:
        return None
    indivisible = [t for t in (q, k, v, out) if t.shape[-1] % packed]
    if indivisible:
        dims = ", ".join(f"{t.name!r} {fmt_shape(t.shape)}" for t in indivisible)
        ctx.add(f"heads = {packed} must divide the last dim of q, k, v and out (P heads packed side by "
                f"side, [..., seq, P*dim]); it does not divide {dims}")
        return None
    sq, d = q.matrix[0], q.matrix[1] // packed
    sk, dk = k.matrix[0], k.matrix[1] // packed
    skv, dv = v.matrix[0], v.matrix[1] // packed
    per_head = " per head" if packed > 1 else ""
    if dk != d:
        ctx.add(f"mismatched head dimensions: q '{q.name}' {fmt_shape(q.shape)} has d = {d}{per_head} but k "
                f"'{k.name}' {fmt_shape(k.shape)} has d = {dk}")
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
    want = (*q.lead, sq, packed * dv)
    if tuple(out.shape) != want:
        ctx.add(f"out '{out.name}' is {fmt_shape(out.shape)}, expected {fmt_shape(want)} "
                f"(queries of q '{q.name}', dim of v '{v.name}')")
    batch = math.prod(q.lead)
    mask_rows = 0
    if mask is not None:
        mask_rows = mask.shape2d[0]
        if mask.shape2d not in ((batch, sk), (1, sk)):
            ctx.add(f"mask '{mask.name}' is {fmt_shape(mask.shape)}: expected one row of Sk = {sk} keys per "
                    f"batch element ({batch} rows: a 2-D view [{batch}, {sk}]) or one shared row ([1, {sk}])")
    ctx.not_own_output([q.name, k.name, v.name] + ([mask.name] if mask is not None else []), out.name)
    named = (("q", q), ("k", k), ("v", v), ("mask", mask), ("out", out))
    others = [f"{key} '{t.name}' is {t.dtype}" for key, t in named if t is not None and t.dtype != FP16]
    if others:
        ctx.add(f"attention runs in float16 only ({', '.join(others)})")
    return AttentionTask(id=ctx.task_id, q=q.name, k=k.name, v=v.name, out=out.name,
                         heads=batch * packed, sq=sq, sk=sk, d=d, dv=dv, causal=causal, scale=scale,
                         tiling=tiling, packed=packed, mask=mask.name if mask is not None else "",
                         mask_rows=mask_rows)


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
    if task.packed > 1:
        out["heads"] = task.packed
    if task.mask:
        out["mask"] = task.mask
    if task.scale is not None:
        out["scale"] = task.scale
    if task.tiling is not None:
        out["tiling"] = {"block_q": task.tiling.block_q, "block_kv": task.tiling.block_kv}
    return out
