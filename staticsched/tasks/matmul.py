"""The ``matmul`` task kind: ``out = epilogue(a @ b)``, batched, on the Cube, with a fused
Vector epilogue.

``a`` is ``[..., M, K]`` (``[..., K, M]`` with ``transpose_a``), ``b`` is ``[..., K, N]``
(``[..., N, K]`` with ``transpose_b``); the leading batch dims broadcast as in NumPy (a 2-D
``b`` is shared by every batch element) and ``out`` is ``[batch..., M, N]``. fp16 operands,
fp32 accumulation in the accumulator, FixPipe converts back to fp16 into the vector buffer,
where the epilogue runs before the single write-back.

Tiling (seed article 000, §4.3): one block computes a ``base_m x base_n`` output tile with
``base_k`` of reduction per step. Per core and per buffer it needs an A tile in ``cube_a``, a
B tile in ``cube_b``, an fp32 block in the ``accumulator``, both input tiles again in the
``operand`` buffer, and in the ``vector`` buffer the fp16 output block plus each epilogue
operand's tile. With double buffering each of these is needed twice, so that the next tile
can be filled while the current one is used. :func:`matmul_requirements` states those
inequalities once; checking and deriving both read them.

Lowering: blocks in row-major order (batch, then M, then N) go to cores round-robin. A block
is, per K step, ``load`` of the A and B tiles into the operand buffer, ``move`` to the cube
inputs, ``mmad`` into the block's accumulator item (``init`` on the first step); then the
epilogue operands are loaded into the vector buffer, ``fixpipe`` drains the accumulator,
the epilogue ``vec`` ops run in place and ``store`` writes the block back.

An epilogue may also hold a row reduction over the output's rows (``softmax``, ``layernorm``,
``rmsnorm``: :mod:`staticsched.tasks.rowops`). Its statistics span every N-block of a row, so
then a whole row panel (one ``base_m`` span, all its N-blocks) is one unit of work on one
core and stays in the vector buffer until the reduction has swept it: statistics over the
blocks, then each block normalised in place (``two-pass``; ``single`` with one N-block). The
tiling must then fit the panel (``base_m * N``) in the vector buffer; when no tiling does, a
separate ``rowwise`` task is the way (the seed article's fusion boundary, §2.2).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from staticsched._fields import Problems, check_keys, get_bool, get_int, get_list, get_mapping, get_str
from staticsched.errors import TilingError
from staticsched.model.hardware import DTYPE_BYTES, ROLES, Hardware, round_up
from staticsched.model.vecops import USER_OPS, VECOPS
from staticsched.tasks.base import (
    ReadContext,
    TaskKind,
    TensorDecl,
    TilingInfo,
    checked_or_derived,
    fmt_shape,
    hardware_needs,
    spans,
)
from staticsched.tasks.builder import FP16, FP32, Builder, balance_cores
from staticsched.tasks.rowops import DEFAULT_EPS, ROWOPS, Block, Ctx

#: operand and output element bytes (fp16) and accumulator element bytes (fp32)
ELEM_BYTES = DTYPE_BYTES["float16"]
ACC_BYTES = DTYPE_BYTES["float32"]

#: epilogue ops: every Vector op a TaskGraph may name that keeps the tile's shape
EPILOGUE_OPS = tuple(name for name in USER_OPS if not VECOPS[name].reduces)
#: row reductions an epilogue may hold (those keeping the shape)
REDUCTION_OPS = tuple(name for name, rop in ROWOPS.items() if rop.out == "full")

_KEYS = ("id", "type", "a", "b", "out", "transpose_a", "transpose_b", "epilogue", "tiling")
_STEP_KEYS = ("op", "tensor", "value", "gamma", "beta", "eps")
_TILING_KEYS = ("base_m", "base_n", "base_k", "double_buffer", "step_m", "step_n")


@attrs.frozen
class Tiling:
    """Base tile sizes of a matmul; ``double_buffer`` reserves room for two of every tile.

    ``step_m x step_n`` output blocks form a group that one core computes together, K step by
    K step (Ascend's ``TCubeTiling`` ``stepM``/``stepN``): one A tile load in L1 serves the
    ``step_n`` blocks of its row, one B tile load the ``step_m`` blocks of its column, at the
    price of ``step_m * step_n`` accumulators and ``step_m + step_n`` operand tiles live at once.
    """

    base_m: int
    base_n: int
    base_k: int
    double_buffer: bool = True
    step_m: int = 1
    step_n: int = 1

    @property
    def buffers(self) -> int:
        return 2 if self.double_buffer else 1

    @property
    def reuses(self) -> bool:
        """Whether blocks are grouped (some step above 1)."""
        return self.step_m * self.step_n > 1


@attrs.frozen
class EpilogueStep:
    """One on-chip step after the matmul: ``op`` with an optional GM ``tensor`` or scalar
    ``value``; a row reduction's ``gamma``/``beta`` ``[N]`` tensors and ``eps``."""

    op: str
    tensor: str = ""
    value: float | None = None
    gamma: str = ""
    beta: str = ""
    eps: float | None = None

    @property
    def reduces(self) -> bool:
        return self.op in ROWOPS

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(x for x in (self.tensor, self.gamma, self.beta) if x)

    @property
    def epsilon(self) -> float:
        return DEFAULT_EPS if self.eps is None else self.eps


@attrs.frozen(kw_only=True)
class MatmulTask:
    """``out = epilogue(a @ b)``; ``m, n, k`` are the problem dims resolved from the tensors,
    ``batch`` the output's leading dims and ``a_lead``/``b_lead`` the operands' (broadcast)."""

    type: ClassVar[str] = "matmul"

    id: str
    a: str
    b: str
    out: str
    m: int
    n: int
    k: int
    transpose_a: bool = False
    transpose_b: bool = False
    epilogue: tuple[EpilogueStep, ...] = attrs.field(converter=tuple, default=())
    tiling: Tiling | None = None
    batch: tuple[int, ...] = attrs.field(converter=tuple, default=())
    a_lead: tuple[int, ...] = attrs.field(converter=tuple, default=())
    b_lead: tuple[int, ...] = attrs.field(converter=tuple, default=())

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.a, self.b, *(t for s in self.epilogue for t in s.tensors))

    @property
    def reduces(self) -> bool:
        """Whether the epilogue holds a row reduction (row panels stay in the vector buffer)."""
        return any(s.reduces for s in self.epilogue)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)

    @property
    def batches(self) -> int:
        return math.prod(self.batch)

    def operand_index(self, lead: tuple[int, ...], bi: int) -> int:
        """The matrix of an operand with leading dims ``lead`` that batch element ``bi`` reads
        (NumPy broadcasting: missing and size-1 dims repeat)."""
        if not lead:
            return 0
        idx = np.unravel_index(bi, self.batch)[len(self.batch) - len(lead):]
        picked = tuple(i if d > 1 else 0 for i, d in zip(idx, lead, strict=True))
        return int(np.ravel_multi_index(picked, lead))


# --------------------------------------------------------------------------- reading


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
    )


def read_tiling(body: Mapping[str, Any], w: str, pr: Problems) -> Tiling | None:
    raw = get_mapping(body, "tiling", w, pr)
    tw = f"{w}: tiling"
    check_keys(raw, _TILING_KEYS, tw, pr)
    before = len(pr.lines)
    sizes = [get_int(raw, key, tw, pr, minimum=1) for key in ("base_m", "base_n", "base_k")]
    double_buffer = get_bool(raw, "double_buffer", tw, pr, default=True)
    step_m, step_n = (get_int(raw, key, tw, pr, minimum=1, default=1) for key in ("step_m", "step_n"))
    if len(pr.lines) > before:
        return None
    return Tiling(*sizes, double_buffer=double_buffer, step_m=step_m, step_n=step_n)


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
    return out


# --------------------------------------------------------------------------- tiling


@attrs.frozen
class Requirement:
    """One capacity inequality: ``bytes`` (= ``formula`` = ``factors``) must fit the space
    playing ``role`` (``space`` names it for messages)."""

    space: str
    formula: str
    factors: str
    bytes: int
    role: str = ""


def buffers_text(n: int) -> str:
    return f"{n} buffer" if n == 1 else f"{n} buffers"


#: fp32 ``[base_m, 1]`` row statistics a row reduction keeps live
STATS = 4

#: (term, factors, elements) of an epilogue operand tile of each form in the vector buffer
_FORM_TERMS = {
    "col": lambda m, n: ("base_n", f"{n}", n),
    "row": lambda m, n: ("base_m", f"{m}", m),
    "full": lambda m, n: ("base_m*base_n", f"{m}*{n}", m * n),
}


def matmul_requirements(
    task: MatmulTask,
    base_m: int,
    base_n: int,
    base_k: int,
    buffers: int,
    hw: Hardware | None = None,
    steps: tuple[int, int] = (1, 1),
) -> tuple[Requirement, ...]:
    """The bytes a matmul tiling needs in each on-chip role, with the arithmetic spelled out.

    Parameters
    ----------
    task
        The matmul (its epilogue decides the vector buffer's operand tiles).
    base_m, base_n, base_k
        Tile sizes.
    buffers
        Copies of every tile (2 with double buffering).
    hw
        Names the spaces playing the roles (the default names without it).
    steps
        ``(step_m, step_n)``: a group's accumulators (``step_m * step_n`` blocks) and operand
        tiles (``step_m`` A tiles, ``step_n`` B tiles per K step) are live together.
    """
    e, acc, b = ELEM_BYTES, ACC_BYTES, buffers
    sm, sn = steps
    # the factors only appear when a step is above 1, so messages without L1 reuse keep their text
    acc_t, acc_f = ("step_m*step_n*", f"{sm}*{sn}*") if sm * sn > 1 else ("", "")
    a_t, a_f = ("step_m*", f"{sm}*") if sm > 1 else ("", "")
    b_t, b_f = ("step_n*", f"{sn}*") if sn > 1 else ("", "")
    bt = buffers_text(buffers)
    # the vector buffer holds the fp16 output block and one tile per epilogue operand; with a
    # row reduction, the whole row panel (N padded to the fractal), the reductions' gamma/beta
    # rows and fp32 row statistics
    n_pad = round_up(task.n, hw.cube.fractal[1] if hw is not None and hw.cube is not None else 16)
    panel = task.reduces
    ub_terms = ["base_m*N" if panel else "base_m*base_n"]
    ub_factors = [f"{base_m}*{n_pad}" if panel else f"{base_m}*{base_n}"]
    ub_elems = base_m * (n_pad if panel else base_n)
    for step in task.epilogue:
        if step.reduces:
            terms = [("N", f"{n_pad}", n_pad)] * (len(step.tensors))
        else:
            terms = [_FORM_TERMS[form](base_m, base_n) for form in VECOPS[step.op].operands[1:]]
        if not step.reduces:  # an op's scratch tiles (the vec-op table's UB working set)
            terms += [_FORM_TERMS["full"](base_m, base_n)] * VECOPS[step.op].scratch
        for term, factor, elems in terms:
            ub_terms.append(term)
            ub_factors.append(factor)
            ub_elems += elems
    if panel:
        # fp32 [base_m, 1] statistics, in fp16 elements
        ub_terms.append(f"{STATS}*base_m*2")
        ub_factors.append(f"{STATS}*{base_m}*2")
        ub_elems += STATS * base_m * 2

    def _sum(parts: list[str]) -> str:
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"

    def name(role: str) -> str:
        return (hw.role_space(role) if hw is not None else None) or ROLES[role][0]

    return (
        Requirement(
            name("cube_a"),
            f"base_m*base_k*{e} B*{bt}",
            f"{base_m}*{base_k}*{e}*{b}",
            base_m * base_k * e * b,
            "cube_a",
        ),
        Requirement(
            name("cube_b"),
            f"base_k*base_n*{e} B*{bt}",
            f"{base_k}*{base_n}*{e}*{b}",
            base_k * base_n * e * b,
            "cube_b",
        ),
        Requirement(
            name("accumulator"),
            f"{acc_t}base_m*base_n*{acc} B*{bt}",
            f"{acc_f}{base_m}*{base_n}*{acc}*{b}",
            sm * sn * base_m * base_n * acc * b,
            "accumulator",
        ),
        Requirement(
            name("operand"),
            f"({a_t}base_m*base_k + {b_t}base_k*base_n)*{e} B*{bt}",
            f"({a_f}{base_m}*{base_k} + {b_f}{base_k}*{base_n})*{e}*{b}",
            (sm * base_m * base_k + sn * base_k * base_n) * e * b,
            "operand",
        ),
        Requirement(
            name("vector"),
            f"{_sum(ub_terms)}*{e} B*{bt}",
            f"{_sum(ub_factors)}*{e}*{b}",
            ub_elems * e * b,
            "vector",
        ),
    )


def capacity(hw: Hardware, role: str) -> int | None:
    """Bytes available in the space playing ``role``; None when unbounded or absent."""
    space = hw.role_space(role)
    if space is None or not hw.has_space(space):
        return None
    cap = hw.space(space).capacity
    return cap if cap > 0 else None


def _fractal(task_id: str, hw: Hardware) -> tuple[int, int, int]:
    if hw.cube is None:
        raise TilingError(f"task '{task_id}': hardware '{hw.name}' has no [cube] section to run a matmul")
    fm, fn, fk = hw.cube.fractal
    return fm, fn, fk


def check_tiling(task: MatmulTask, tiling: Tiling, hw: Hardware) -> None:
    """Refuse an explicit tiling that is not a fractal multiple or does not fit the hardware.

    Raises
    ------
    TilingError
        One line per violation with the arithmetic, e.g. ``task 'mm': base_m*base_k*2 B*2
        buffers = 128*512*2*2 = 262144 B > L0A 65536 B``.
    """
    pr = Problems()
    fractal = _fractal(task.id, hw)
    sizes = (("base_m", tiling.base_m), ("base_n", tiling.base_n), ("base_k", tiling.base_k))
    for (key, value), f in zip(sizes, fractal, strict=True):
        if value <= 0 or value % f:
            pr.add(
                f"task '{task.id}': tiling {key} = {value} must be a positive multiple of {f} "
                f"(the Cube works on whole {fractal[0]}x{fractal[1]}x{fractal[2]} fractals; "
                f"only tails are padded)"
            )
    for key, step, dim, base in (("step_m", tiling.step_m, task.m, tiling.base_m),
                                 ("step_n", tiling.step_n, task.n, tiling.base_n)):
        count = math.ceil(dim / base)
        if step > count:
            axis = key[-1].upper()
            pr.add(f"task '{task.id}': tiling {key} = {step} exceeds the {count} blocks along "
                   f"{axis} ({axis} = {dim}, base_{key[-1]} = {base})")
    if tiling.reuses and task.reduces:
        pr.add(
            f"task '{task.id}': tiling step_m x step_n = {tiling.step_m}x{tiling.step_n}, but a row "
            f"reduction in the epilogue makes a whole row panel the unit of work; use steps 1x1"
        )
    pr.raise_if_any(TilingError)
    t = tiling
    for req in matmul_requirements(task, t.base_m, t.base_n, t.base_k, t.buffers, hw, (t.step_m, t.step_n)):
        cap = capacity(hw, req.role)
        if cap is not None and req.bytes > cap:
            pr.add(f"task '{task.id}': {req.formula} = {req.factors} = {req.bytes} B > {req.space} {cap} B")
    pr.raise_if_any(TilingError)


def _max_base_k(task: MatmulTask, bm: int, bn: int, fk: int, limit: int, hw: Hardware) -> int | None:
    """Largest legal base_k (multiple of ``fk``, at most ``limit``) for ``bm x bn``; None if none.

    Every requirement is affine in base_k, so evaluating at 0 and 1 gives its slope.
    """
    best = limit
    at0 = matmul_requirements(task, bm, bn, 0, 2, hw)
    at1 = matmul_requirements(task, bm, bn, 1, 2, hw)
    for r0, r1 in zip(at0, at1, strict=True):
        cap = capacity(hw, r0.role)
        if cap is None:
            continue
        slope = r1.bytes - r0.bytes
        if r0.bytes > cap:
            return None
        if slope > 0:
            best = min(best, (cap - r0.bytes) // slope)
    best = best // fk * fk
    return best if best >= fk else None


def derive_tiling(task: MatmulTask, hw: Hardware) -> Tiling:
    """The tiling lowering uses when a matmul gives none (double buffered).

    Candidates are fractal multiples no larger than the problem (each dim rounded up to the
    fractal, so ``M = 1`` gives ``base_m = 16``) that fit every requirement of
    :func:`matmul_requirements` with two buffers. Among them the seed's hand rule (§4.3) is
    generalised as: make the smallest of the three base sizes as large as possible, then the
    next smallest (so no dimension is starved: base_m/base_n set the data reuse per loaded
    byte, base_k the work per step against the fixed per-op overheads); ties prefer square
    output tiles, then the largest base_k, then the largest output tile. The result is
    maximal: no single base size can grow by a fractal and still fit. On ``seed-davinci`` the
    4096³ GEMM gets 128/128/128.

    Raises
    ------
    TilingError
        When not even one fractal per dimension fits, with the failing arithmetic.
    """
    fm, fn, fk = _fractal(task.id, hw)
    pm, pn, pk = round_up(task.m, fm), round_up(task.n, fn), round_up(task.k, fk)
    best: tuple | None = None
    # requirements grow with every base size, so each loop stops at the first misfit
    for bm in range(fm, pm + 1, fm):
        if _max_base_k(task, bm, fn, fk, pk, hw) is None:
            break
        for bn in range(fn, pn + 1, fn):
            bk = _max_base_k(task, bm, bn, fk, pk, hw)
            if bk is None:
                break
            key = (tuple(sorted((bm, bn, bk))), bm == bn, bk, bm * bn, bm)
            if best is None or key > best[0]:
                best = (key, Tiling(bm, bn, bk, double_buffer=True))
    if best is None:
        check_tiling(task, Tiling(fm, fn, fk, double_buffer=True), hw)
        raise TilingError(f"task '{task.id}': no tiling fits")  # check_tiling has raised already
    return best[1]


# --------------------------------------------------------------------------- plan and lowering


@attrs.frozen
class MatmulPlan:
    """How a matmul is cut: its tiling and the block grid it gives."""

    task: MatmulTask
    tiling: Tiling

    @property
    def m_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.m, self.tiling.base_m)

    @property
    def n_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.n, self.tiling.base_n)

    @property
    def k_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.k, self.tiling.base_k)

    @property
    def panels(self) -> int:
        """Row panels (batch element x M span)."""
        return self.task.batches * len(self.m_spans)

    @property
    def groups(self) -> tuple[tuple[int, int], ...]:
        """Per batch element, the ``(first M span, first N span)`` of each group of
        ``step_m x step_n`` blocks (clipped at the grid's edges), row-major."""
        t = self.tiling
        return tuple((mi, ni) for mi in range(0, len(self.m_spans), t.step_m)
                     for ni in range(0, len(self.n_spans), t.step_n))

    @property
    def blocks(self) -> int:
        """Units of work on cores: groups of output blocks (one block without L1 reuse), or
        row panels when the epilogue reduces rows."""
        return self.panels if self.task.reduces else self.task.batches * len(self.groups)

    @property
    def op_count(self) -> int:
        """Per group and K step: a load per A and B tile, a move per A tile, a move and an
        mmad per block; per block a fixpipe, a store, and per elementwise epilogue step one vec
        and, with a tensor operand, one load; the row reductions' ops per panel."""
        t, nm, nb = self.tiling, len(self.m_spans), len(self.n_spans)
        k_steps = math.ceil(self.task.k / t.base_k)
        epilogue = sum(2 if s.tensor else 1 for s in self.task.epilogue if not s.reduces)
        ops = 0
        for mi, ni in self.groups:
            gm, gn = min(t.step_m, nm - mi), min(t.step_n, nb - ni)
            ops += k_steps * (2 * gm + gn + 2 * gm * gn) + gm * gn * (2 + epilogue)
        per_panel = 0
        for s in self.task.epilogue:
            if s.reduces:
                params = {"gamma": s.gamma, "beta": s.beta}
                per_panel += ROWOPS[s.op].count_resident(nb, params) + nb * len(s.tensors)
        return self.task.batches * ops + self.panels * per_panel

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        combine = ROWOPS[REDUCTION_OPS[0]].resident_combine(len(self.n_spans)) if self.task.reduces else ""
        counts = Counter(balance_cores(self.work(hw), hw.cores))
        per = (min(counts.get(c, 0) for c in range(hw.cores)), max(counts.values()))
        return TilingInfo(self.task.id, "matmul", (t.base_m, t.base_n, t.base_k), t.buffers,
                          self.task.tiling is None, self.blocks, per,
                          combine=combine, steps=(t.step_m, t.step_n) if t.reuses else ())

    def work(self, hw: Hardware) -> list[int]:
        """The estimated cycles of each unit of work (group of blocks, or row panel), in block
        order, by which cores are balanced: the Cube's cycles or the loads' at the rate a core
        can count on (its path's, or its even share of a link the path crosses), whichever is
        larger. Tail blocks cost less, and on a link-bound chip it is the bytes that must be
        even: round-robin blocks of an unequal grid left the cores with the most bytes moving
        alone at the end (``unequal_mm1000_hbm.json``)."""
        task, t = self.task, self.tiling
        cube = hw.cube
        assert cube is not None  # needs() checked it
        fm, fn, fk = cube.fractal
        src = hw.role("global")
        dst = hw.role("operand")
        path = hw.path(src, dst)
        rate = min([path.bytes_per_cycle, *(lk.bytes_per_cycle / hw.cores for lk in hw.links_of(src, dst))])
        k_pad = sum(round_up(k1 - k0, fk) for k0, k1 in self.k_spans)
        nm, nn = len(self.m_spans), len(self.n_spans)

        def cost(rows: Sequence[int], cols: Sequence[int]) -> int:
            ms = [self.m_spans[i] for i in rows]
            ns = [self.n_spans[j] for j in cols]
            area = sum(round_up(m1 - m0, fm) * round_up(n1 - n0, fn) for m0, m1 in ms for n0, n1 in ns)
            macs = area * k_pad
            cycles = -(-macs // dict(cube.macs_per_cycle).get("float16", 1))
            loaded = (sum(m1 - m0 for m0, m1 in ms) + sum(n1 - n0 for n0, n1 in ns)) * task.k * 2
            return max(cycles, math.ceil(loaded / rate))

        if task.reduces:
            per_panel = [cost([mi], range(nn)) for mi in range(nm)]
            return per_panel * task.batches
        per_group = [cost(range(mi, min(mi + t.step_m, nm)), range(ni, min(ni + t.step_n, nn)))
                     for mi, ni in self.groups]
        return per_group * task.batches

    def lower(self, em: Builder) -> None:
        task, hw = self.task, em.hw
        assert hw.cube is not None  # needs() checked it
        fm, fn, fk = hw.cube.fractal
        m_spans, n_spans, k_spans = self.m_spans, self.n_spans, self.k_spans
        m, n, k = task.m, task.n, task.k
        em.output(task.out, [(bi * m + m0, bi * m + m1) for bi in range(task.batches) for m0, m1 in m_spans],
                  n_spans)
        cores = em.balance(self.work(hw))
        a_rows = k if task.transpose_a else m
        b_rows = n if task.transpose_b else k
        t, nm, nn = self.tiling, len(m_spans), len(n_spans)
        panel: list[_Tile] = []
        for bi in range(task.batches):
            a_off = task.operand_index(task.a_lead, bi) * a_rows
            b_off = task.operand_index(task.b_lead, bi) * b_rows
            o_off = bi * m
            for gi, (mi0, ni0) in enumerate(self.groups):
                # block numbers are row-major over (batch, M, N) whatever the grouping
                grid = [[((bi * nm + mi) * nn + ni, m_spans[mi], n_spans[ni])
                         for ni in range(ni0, min(ni0 + t.step_n, nn))]
                        for mi in range(mi0, min(mi0 + t.step_m, nm))]
                pi = bi * nm + mi0
                core = cores[pi if task.reduces else bi * len(self.groups) + gi]
                tiles = self._group(em, grid, core, k_spans, (a_off, b_off, o_off), (fm, fn, fk))
                if task.reduces:  # steps are 1x1 (check_tiling): the panel's blocks come in order
                    panel.extend(tiles)
                    if ni0 + 1 == nn:
                        self._panel(em, pi, panel)
                        panel = []

    def _panel(self, em: Builder, pi: int, blocks: list[_Tile]) -> None:
        """The epilogue of one row panel whose blocks are all in the vector buffer: each row
        reduction sweeps every block (:mod:`staticsched.tasks.rowops`), the elementwise steps
        after it run block by block; then every block is stored."""
        task = self.task
        first, rows = blocks[0], blocks[0].rows
        start = next(i for i, s in enumerate(task.epilogue) if s.reduces)
        for i in range(start, len(task.epilogue)):
            step = task.epilogue[i]
            if not step.reduces:
                for t in blocks:
                    t.step(em, i)
                continue
            tiles = []
            for t in blocks:
                params = {}
                for key in ("gamma", "beta"):
                    name = getattr(step, key)
                    if name:
                        params[key] = em.item(f"{t.p}.e{i}.{key}", "vector", FP16, (1, t.pn))
                        em.load(f"{t.p}.e{i}.load_{key}", t.core, params[key], name, ((0, 1), t.ns))
                tiles.append(Block(t.ub, t.cols, gamma=params.get("gamma", ""), beta=params.get("beta", "")))
            ctx = Ctx(em, first.core, f"{task.id}.r{pi}.e{i}", rows, first.pm, task.n)
            ROWOPS[step.op].resident(ctx, tiles, step.epsilon, "")
        for t in blocks:
            t.store(em)

    def _group(self, em: Builder, grid: list[list[tuple[int, tuple[int, int], tuple[int, int]]]], core: int,
               k_spans: Sequence[tuple[int, int]], offs: tuple[int, int, int],
               fractal: tuple[int, int, int]) -> list[_Tile]:
        """A group of blocks (``grid[i][j]`` = block number, M span, N span), K step by K step:
        each A tile is loaded once for its grid row and each B tile once for its column (named
        after the row's first and the column's first block, so a 1x1 group names everything
        after its block); then each block's epilogue in row-major order."""
        task = self.task
        fm, fn, fk = fractal
        a_off, b_off, _ = offs
        p = [[f"{task.id}.b{b}" for b, _, _ in row] for row in grid]
        pad_m = [round_up(ms[1] - ms[0], fm) for _, ms, _ in (row[0] for row in grid)]
        pad_n = [round_up(ns[1] - ns[0], fn) for _, _, ns in grid[0]]
        l0c = [[em.item(f"{p[i][j]}.l0c", "accumulator", FP32, (pad_m[i], pad_n[j]))
                for j in range(len(grid[0]))] for i in range(len(grid))]
        for s, (k0, k1) in enumerate(k_spans):
            pk, depth = round_up(k1 - k0, fk), k1 - k0
            l1a = []
            for i, row in enumerate(grid):
                (m0, m1), q = row[0][1], f"{p[i][0]}.k{s}"
                l1a.append(em.item(f"{q}.l1a", "operand", FP16, (pad_m[i], pk)))
                if task.transpose_a:
                    em.load(f"{q}.load_a", core, l1a[i], task.a, ((a_off + k0, a_off + k1), (m0, m1)),
                            transpose=True)
                else:
                    em.load(f"{q}.load_a", core, l1a[i], task.a, ((a_off + m0, a_off + m1), (k0, k1)))
            l1b = []
            for j, (_, _, (n0, n1)) in enumerate(grid[0]):
                q = f"{p[0][j]}.k{s}"
                l1b.append(em.item(f"{q}.l1b", "operand", FP16, (pk, pad_n[j])))
                if task.transpose_b:
                    em.load(f"{q}.load_b", core, l1b[j], task.b, ((b_off + n0, b_off + n1), (k0, k1)),
                            transpose=True)
                else:
                    em.load(f"{q}.load_b", core, l1b[j], task.b, ((b_off + k0, b_off + k1), (n0, n1)))
            for i, row in enumerate(grid):
                q = f"{p[i][0]}.k{s}"
                rows = row[0][1][1] - row[0][1][0]
                l0a = em.item(f"{q}.l0a", "cube_a", FP16, (pad_m[i], pk))
                em.move(f"{q}.move_a", core, l1a[i], l0a, rows, depth)
                for j, (_, _, (n0, n1)) in enumerate(row):
                    q = f"{p[i][j]}.k{s}"
                    l0b = em.item(f"{q}.l0b", "cube_b", FP16, (pk, pad_n[j]))
                    em.move(f"{q}.move_b", core, l1b[j], l0b, depth, n1 - n0)
                    em.mmad(f"{q}.mmad", core, l0a, l0b, l0c[i][j], rows, n1 - n0, depth, s == 0)
        return [self._epilogue(em, p[i][j], core, ms, ns, offs, l0c[i][j], (pad_m[i], pad_n[j]))
                for i, row in enumerate(grid) for j, (_, ms, ns) in enumerate(row)]

    def _epilogue(self, em: Builder, p: str, core: int, ms: tuple[int, int], ns: tuple[int, int],
                  offs: tuple[int, int, int], l0c: str, pads: tuple[int, int]) -> _Tile:
        """One block's epilogue operands, fixpipe and elementwise steps, and its store (unless
        a row reduction waits for the whole panel)."""
        task = self.task
        (m0, m1), (n0, n1) = ms, ns
        o_off = offs[2]
        pm, pn = pads
        rows, cols = m1 - m0, n1 - n0
        ub = em.item(f"{p}.ub", "vector", FP16, (pm, pn))
        operands: dict[int, str] = {}
        out_rows = (o_off + m0, o_off + m1)
        for i, step in enumerate(task.epilogue):
            if not step.tensor:
                continue
            form = VECOPS[step.op].operands[1]  # a reduction's gamma/beta load in _panel
            shape, region = {
                "col": ((1, pn), ((0, 1), (n0, n1))),
                "row": ((pm, 1), (out_rows, (0, 1))),
                "full": ((pm, pn), (out_rows, (n0, n1))),
            }[form]
            operands[i] = em.item(f"{p}.e{i}.ub", "vector", FP16, shape)
            em.load(f"{p}.e{i}.load", core, operands[i], step.tensor, region)
        em.fixpipe(f"{p}.fixpipe", core, l0c, ub, rows, cols)
        tile = _Tile(task, p, core, ub, operands, out_rows, ns, pm, pn)
        for i, step in enumerate(task.epilogue):
            if step.reduces:
                return tile  # the rest once the whole row panel is here (_panel)
            tile.step(em, i)
        tile.store(em)
        return tile


@attrs.frozen
class _Tile:
    """An output block in the vector buffer: its fp16 tile, epilogue operand tiles, where it
    goes (``rows`` of the output, columns ``ns``) and its padded size."""

    task: MatmulTask
    p: str
    core: int
    ub: str
    operands: dict[int, str]
    out_rows: tuple[int, int]
    ns: tuple[int, int]
    pm: int
    pn: int

    @property
    def rows(self) -> int:
        return self.out_rows[1] - self.out_rows[0]

    @property
    def cols(self) -> int:
        return self.ns[1] - self.ns[0]

    def step(self, em: Builder, i: int) -> None:
        """Elementwise epilogue step ``i`` in place."""
        step = self.task.epilogue[i]
        reads = (self.ub,) if i not in self.operands else (self.ub, self.operands[i])
        em.vec(f"{self.p}.e{i}.{step.op}", self.core, step.op, reads, self.ub, (self.rows, self.cols),
               scalar=step.value)

    def store(self, em: Builder) -> None:
        em.store(f"{self.p}.store", self.core, self.ub, self.task.out, (self.out_rows, self.ns))


def plan(task: MatmulTask, hw: Hardware) -> MatmulPlan:
    return checked_or_derived(task, hw, check_tiling, derive_tiling, MatmulPlan)


def needs(task: MatmulTask, hw: Hardware) -> list[str]:
    paths = [("global", "operand"), ("operand", "cube_a"), ("operand", "cube_b"), ("accumulator", "vector"),
             ("vector", "global")]
    if any(s.tensors for s in task.epilogue):
        paths.append(("global", "vector"))
    return hardware_needs(task.id, hw, roles=("operand", "cube_a", "cube_b", "accumulator", "vector"),
                          paths=paths, cube=True, vector=bool(task.epilogue))


# --------------------------------------------------------------------------- reference


def apply_step(op: str, x: np.ndarray, y: np.ndarray | None, value: float | None) -> np.ndarray:
    """One Vector step as the epilogue runs it: fp32 from fp16 operands, rounded back to fp16."""
    vop = VECOPS[op]
    args = [x.astype(np.float32)] if y is None else [x.astype(np.float32), y.astype(np.float32)]
    return vop.apply(args, {"scalar": value if value is not None else 0.0}).astype(np.float16)


def matrices(value: np.ndarray, lead: tuple[int, ...], transpose: bool) -> np.ndarray:
    """A 2-D GM value as its stack of matrices ``[*lead, r, c]``, transposed when asked."""
    rows = value.shape[0] // max(1, math.prod(lead))
    x = value.reshape(*lead, rows, value.shape[1])
    return np.swapaxes(x, -1, -2) if transpose else x


def reference(task: MatmulTask, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    a = matrices(env[task.a].astype(np.float32), task.a_lead, task.transpose_a)
    b = matrices(env[task.b].astype(np.float32), task.b_lead, task.transpose_b)
    # fp32 accumulation, then FixPipe's fp32 -> fp16
    y = np.matmul(a, b).reshape(task.batches * task.m, task.n).astype(np.float16)
    for step in task.epilogue:
        if step.reduces:
            g = env[step.gamma] if step.gamma else None
            beta = env[step.beta] if step.beta else None
            y = ROWOPS[step.op].reference(y, g, beta, step.epsilon).astype(np.float16)
        else:
            y = apply_step(step.op, y, env[step.tensor] if step.tensor else None, step.value)
    return {task.out: y}


def input_scales(task: MatmulTask) -> dict[str, float]:
    """``1 / sqrt(K)`` for ``b``: a K-long dot product of uniform [-1, 1) values then has a
    standard deviation of about 1/3 whatever K is."""
    return {task.b: 1.0 / math.sqrt(task.k)}


# --------------------------------------------------------------------------- strategy

#: epilogue steps the random properties draw: division and rsqrt of random [-1, 1) data, and
#: exponentials stacked on exponentials, would test the conditioning of fp16 data, not the
#: schedule (the norms and softmax exercise rsqrt, div and exp)
SAFE_STEPS = tuple(op for op in EPILOGUE_OPS + REDUCTION_OPS if op not in ("div", "div_row", "rsqrt", "exp"))


def strategy(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """A matmul with tails: shapes 1-150, optional batch (a 2-D ``b`` broadcast or a batched
    one), either transpose, an epilogue of up to 3 steps of any operand form or a row
    reduction, an optional explicit tiling with L1 reuse steps. With ``src`` it multiplies
    that ``[..., M, K]``."""
    from hypothesis import strategies as st

    if src is not None:
        a_name, shape = src
        batch, (m, k) = list(shape[:-2]), (shape[-2:] if len(shape) > 1 else (1, shape[0]))
        ta = False
    else:
        m = draw(st.integers(1, 150), label="M")
        k = draw(st.integers(1, 150), label="K")
        batch = draw(st.sampled_from([[], [], [2], [2, 2]]), label="batch")
        ta = draw(st.booleans(), label="transpose_a")
        a_name = f"{prefix}a"
        tensors[a_name] = {"shape": [*batch, k, m] if ta else [*batch, m, k]}
    n = draw(st.integers(1, 150), label="N")
    tb = draw(st.booleans(), label="transpose_b")
    b_batch = batch if batch and draw(st.booleans(), label="batched b") else []
    tensors[f"{prefix}w"] = {"shape": [*b_batch, n, k] if tb else [*b_batch, k, n]}
    out = f"{prefix}y"
    tensors[out] = {"shape": [*batch, m, n]}
    epilogue = []
    # a chained ``a`` (a softmax's or a norm's output) gives rows of nearly equal values: a
    # norm of such rows after row offsets divides fp16 rounding by a tiny deviation (a drawn
    # attention -> softmax -> matmul + add_row + add_row + layernorm differed by 0.03), which
    # tests fp16 conditioning, not the schedule
    ops = st.sampled_from(SAFE_STEPS if src is None else tuple(op for op in SAFE_STEPS if op not in ROWOPS))
    for j, op in enumerate(draw(st.lists(ops, max_size=3), label="epilogue")):
        step: dict[str, Any] = {"op": op}
        if op in ROWOPS:
            for key in ROWOPS[op].params:
                if draw(st.booleans(), label=key):
                    tensors[f"{prefix}{key}{j}"] = {"shape": [n]}
                    step[key] = f"{prefix}{key}{j}"
            epilogue.append(step)
            continue
        vop = VECOPS[op]
        if vop.arity > 1:
            name = f"{prefix}e{j}"
            form = vop.operands[1]
            tensors[name] = {"shape": {"col": [n], "row": [*batch, m, 1], "full": [*batch, m, n]}[form]}
            step["tensor"] = name
        if vop.scalar == "required":
            step["value"] = draw(st.sampled_from([0.5, -1.25, 2.0]), label="value")
        epilogue.append(step)
    task = {"id": f"{prefix}mm", "type": "matmul", "a": a_name, "b": f"{prefix}w", "out": out,
            "transpose_a": ta, "transpose_b": tb, "epilogue": epilogue}
    if draw(st.booleans(), label="explicit tiling"):
        base = draw(st.sampled_from([16, 32, 64]), label="base")
        task["tiling"] = {"base_m": base, "base_n": base, "base_k": base}
        reduces = any(s["op"] in ROWOPS for s in epilogue)
        if not reduces:  # L1 reuse groups, clipped to the block grid (check_tiling refuses more)
            task["tiling"]["step_m"] = min(draw(st.integers(1, 3), label="step_m"), -(-m // base))
            task["tiling"]["step_n"] = min(draw(st.integers(1, 3), label="step_n"), -(-n // base))
    return task


KIND = TaskKind(
    name="matmul",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
    strategy=strategy,
    input_scales=input_scales,
)
