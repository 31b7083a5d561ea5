"""Reading a ``matmul`` task from TaskGraph JSON and writing it back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from staticsched._fields import Problems, check_keys, get_bool, get_int, get_list, get_mapping, get_str
from staticsched.model.vecops import VECOPS
from staticsched.tasks.base import (
    ReadContext,
    TensorDecl,
    fmt_shape,
)
from staticsched.tasks.matmul.task import (
    ENGINES,
    EPILOGUE_OPS,
    REDUCTION_OPS,
    EpilogueStep,
    MatmulTask,
    Tiling,
)
from staticsched.tasks.rowops import ROWOPS

_KEYS = ("id", "type", "a", "b", "out", "transpose_a", "transpose_b", "epilogue", "tiling", "engine")
_STEP_KEYS = ("op", "tensor", "value", "gamma", "beta", "eps")
#: the most workspace slots per AIC a tiling may ask for
MAX_STAGES = 8
#: the most K chunks a tiling may split a block's K loop into
MAX_SPLIT_K = 64
_TILING_KEYS = ("base_m", "base_n", "base_k", "double_buffer", "step_m", "step_n", "workspace_stages",
                "split_k", "resident_a")


def read_step(raw: Any, sw: str, ctx: ReadContext, ops: Sequence[str]) -> EpilogueStep | None:
    """One epilogue step: an op of ``ops``, its ``tensor`` when its table entry takes one, its
    ``value`` (required by ops that use a scalar, accepted and ignored by the others)."""
    pr = ctx.pr
    if not isinstance(raw, Mapping):
        pr.add(f"{sw}: must be an object, got {type(raw).__name__}")
        return None
    check_keys(raw, _STEP_KEYS, sw, pr)
    op = get_str(raw, "op", sw, pr, choices=ops)
    if op not in ops:
        return None
    sctx = attrs.evolve(ctx, where=sw)
    if op in ROWOPS:
        return _read_reduction_step(raw, op, sctx)
    for key in ("gamma", "beta", "eps"):
        if key in raw:
            pr.add(f"{sw}: op '{op}' takes no '{key}'")
    vop = VECOPS[op]
    tensor = ""
    if vop.arity > 1:
        t = sctx.tensor(raw, "tensor")
        tensor = t.name if t is not None else ""
    elif "tensor" in raw:
        pr.add(f"{sw}: op '{op}' takes no 'tensor'")
    value = None
    if "value" in raw:
        value = sctx.number(raw, "value")
    elif vop.scalar == "required":
        pr.add(f"{sw}: op '{op}' needs a 'value'")
    if tensor or vop.arity == 1:
        return EpilogueStep(op, tensor, value)
    return None


def _read_reduction_step(raw: Mapping[str, Any], op: str, ctx: ReadContext) -> EpilogueStep | None:
    rop = ROWOPS[op]
    if "tensor" in raw:
        ctx.pr.add(f"{ctx.where}: op '{op}' takes no 'tensor'")
    params = {}
    for key in ("gamma", "beta"):
        if key in raw and key not in rop.params:
            ctx.pr.add(f"{ctx.where}: op '{op}' takes no '{key}'")
        elif key in raw:
            t = ctx.tensor(raw, key)
            params[key] = t.name if t is not None else ""
    eps = None
    if "eps" in raw:
        if not rop.eps:
            ctx.pr.add(f"{ctx.where}: op '{op}' takes no 'eps'")
        else:
            eps = ctx.number(raw, "eps")
    value = ctx.number(raw, "value")
    return EpilogueStep(op, "", value, params.get("gamma", ""), params.get("beta", ""), eps)


def operand_shape(form: str, out: TensorDecl) -> tuple[int, ...]:
    """The shape an operand of ``form`` must have next to the ``[..., M, N]`` tile ``out``."""
    m, n = out.matrix
    if form == "col":
        return (n,)
    if form == "row":
        return (*out.lead, m, 1)
    return tuple(out.shape)


def operand_fits(form: str, t: TensorDecl, out: TensorDecl) -> bool:
    """Whether ``t`` can be an operand of ``form`` for ``out`` (a column may also be ``[1, N]``,
    and a 2-D output accepts any equal 2-D shape, as version 1 did)."""
    if form == "col":
        return t.shape2d == (1, out.matrix[1]) and t.rank <= 2
    if form == "row":
        return tuple(t.shape) == operand_shape("row", out) or (
            out.rank <= 2 and t.rank <= 2 and t.shape2d == (out.shape2d[0], 1))
    return t.shape2d == out.shape2d and t.lead == out.lead


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def read(body: Mapping[str, Any], ctx: ReadContext) -> MatmulTask | None:
    w, pr = ctx.where, ctx.pr
    check_keys(body, _KEYS, w, pr)
    a = ctx.tensor(body, "a")
    b = ctx.tensor(body, "b")
    out = ctx.tensor(body, "out")
    transpose_a = get_bool(body, "transpose_a", w, pr, default=False)
    transpose_b = get_bool(body, "transpose_b", w, pr, default=False)
    steps = [
        read_step(raw, f"{w}: epilogue[{i}]", ctx, EPILOGUE_OPS + REDUCTION_OPS)
        for i, raw in enumerate(get_list(body, "epilogue", w, pr, default=[]))
    ]
    steps = [s for s in steps if s is not None]
    engine = get_str(body, "engine", w, pr, choices=ENGINES) if "engine" in body else ""
    engine = engine if engine in ENGINES else ""
    if engine == "vector":
        _vector_refusals(steps, ctx, "tiling" in body)
        tiling = None
    else:
        tiling = read_tiling(body, w, ctx.tiling_pr) if "tiling" in body else None
    if a is None or b is None or out is None:
        return None
    if transpose_a:
        k, m = a.matrix
        a_form = "[K, M] (transpose_a)"
    else:
        m, k = a.matrix
        a_form = "[M, K]"
    if transpose_b:
        n, kb = b.matrix
        b_form = "[N, K] (transpose_b)"
    else:
        kb, n = b.matrix
        b_form = "[K, N]"
    a_show = fmt_shape(a.shape if a.rank > 2 else a.shape2d)
    b_show = fmt_shape(b.shape if b.rank > 2 else b.shape2d)
    if k != kb:
        a_read = "" if not transpose_a else f", read as {a_form}"
        ctx.add(
            f"K mismatch: a '{a.name}' is {a_show}{a_read} (K = {k}) but b '{b.name}' "
            f"is {b_show}, read as {b_form} (K = {kb})"
        )
    batch = _broadcast(a.lead, b.lead)
    if batch is None:
        ctx.add(f"batch dims of a '{a.name}' {fmt_shape(a.lead)} and b '{b.name}' {fmt_shape(b.lead)} do not "
                f"broadcast (each dim must be equal or 1)")
        batch = a.lead
    want = (*batch, m, n)
    if (out.shape2d if not batch and out.rank <= 2 else tuple(out.shape)) != want:
        src = f"M = {m} from a '{a.name}', N = {n} from b '{b.name}'"
        if batch:
            src = f"batch {fmt_shape(batch)}, " + src
        ctx.add(f"out '{out.name}' is {fmt_shape(out.shape2d if out.rank <= 2 else out.shape)}, expected "
                f"{fmt_shape(want)} ({src})")
    out_decl = TensorDecl(out.name, want, out.dtype)
    for i, step in enumerate(steps):
        for key in ("tensor", "gamma", "beta"):
            t = ctx.tensors.get(getattr(step, key))
            if t is None:
                continue
            form = "col" if key != "tensor" else VECOPS[step.op].operands[1]
            if not operand_fits(form, t, out_decl):
                ctx.add(
                    f"epilogue[{i}] '{step.op}' {key} '{t.name}' is {fmt_shape(t.shape)}, "
                    f"expected {fmt_shape(operand_shape(form, out_decl))} (M = {m}, N = {n})"
                )
    ctx.not_own_output([a.name, b.name, *(t for s in steps for t in s.tensors)], out.name)
    dtype = ctx.operand_dtype([("a", a), ("b", b), *((f"epilogue {s.op}", ctx.tensors.get(t))
                                                      for s in steps for t in s.tensors)])
    return MatmulTask(
        id=ctx.task_id,
        a=a.name,
        b=b.name,
        out=out.name,
        m=m,
        n=n,
        k=k,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        epilogue=steps,
        tiling=tiling,
        batch=batch,
        a_lead=a.lead,
        b_lead=b.lead,
        engine=engine,
        a_nz=a.layout == "NZ",
        b_nz=b.layout == "NZ",
        dtype=dtype,
        out_dtype=out.dtype,
    )


def _vector_refusals(steps: Sequence[EpilogueStep], ctx: ReadContext, tiling: bool) -> None:
    """What the Vector lowering (``engine: "vector"``) does not take, one line each: a row
    reduction in the epilogue (a row panel on one core), an explicit tiling (a tiling
    problem: the lowering derives its own tile)."""
    reductions = [s.op for s in steps if s.reduces]
    if reductions:
        ctx.add(f"engine 'vector': the row reduction ({', '.join(reductions)}) in the epilogue is not "
                f"lowered on the Vector engine; make it a separate rowwise task")
    if tiling:
        ctx.tiling_pr.add(f"{ctx.where}: engine 'vector' takes no 'tiling' (base_m/base_n/base_k, steps, "
                          f"split_k are the Cube lowering's); its tile is derived")


def read_tiling(body: Mapping[str, Any], w: str, pr: Problems) -> Tiling | None:
    raw = get_mapping(body, "tiling", w, pr)
    tw = f"{w}: tiling"
    check_keys(raw, _TILING_KEYS, tw, pr)
    before = len(pr.lines)
    sizes = [get_int(raw, key, tw, pr, minimum=1) for key in ("base_m", "base_n", "base_k")]
    double_buffer = get_bool(raw, "double_buffer", tw, pr, default=True)
    step_m, step_n = (get_int(raw, key, tw, pr, minimum=1, default=1) for key in ("step_m", "step_n"))
    stages = get_int(raw, "workspace_stages", tw, pr, minimum=1, maximum=MAX_STAGES, default=2)
    split_k = get_int(raw, "split_k", tw, pr, minimum=1, maximum=MAX_SPLIT_K, default=1)
    resident_a = get_bool(raw, "resident_a", tw, pr, default=False)
    if len(pr.lines) > before:
        return None
    return Tiling(*sizes, double_buffer=double_buffer, step_m=step_m, step_n=step_n, workspace_stages=stages,
                  split_k=split_k, resident_a=resident_a)


def step_to_dict(step: EpilogueStep) -> dict[str, Any]:
    out: dict[str, Any] = {"op": step.op}
    for key in ("tensor", "gamma", "beta"):
        if getattr(step, key):
            out[key] = getattr(step, key)
    for key in ("value", "eps"):
        if getattr(step, key) is not None:
            out[key] = getattr(step, key)
    return out


def to_dict(task: MatmulTask) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": task.id,
        "type": task.type,
        "a": task.a,
        "b": task.b,
        "out": task.out,
        "transpose_b": task.transpose_b,
        "epilogue": [step_to_dict(s) for s in task.epilogue],
    }
    if task.transpose_a:
        out["transpose_a"] = True
    if task.tiling is not None:
        out["tiling"] = {
            "base_m": task.tiling.base_m,
            "base_n": task.tiling.base_n,
            "base_k": task.tiling.base_k,
            "double_buffer": task.tiling.double_buffer,
        }
        for key in ("step_m", "step_n"):  # 1 (no L1 reuse) stays out, as before steps existed
            if getattr(task.tiling, key) != 1:
                out["tiling"][key] = getattr(task.tiling, key)
        if task.tiling.workspace_stages != 2:  # the default stays out, as before split chips
            out["tiling"]["workspace_stages"] = task.tiling.workspace_stages
        if task.tiling.split_k != 1:
            out["tiling"]["split_k"] = task.tiling.split_k
        if task.tiling.resident_a:
            out["tiling"]["resident_a"] = True
    if task.engine:  # only when given: a graph without it keeps its text
        out["engine"] = task.engine
    return out
