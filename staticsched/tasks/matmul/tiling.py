"""The ``matmul`` tiling: the capacity inequalities (:func:`matmul_requirements`), stated once
and read by both checking and deriving."""

from __future__ import annotations

import math

import attrs

from staticsched._fields import Problems
from staticsched.errors import TilingError
from staticsched.model.hardware import ROLES, Hardware, round_up
from staticsched.model.vecops import VECOPS
from staticsched.tasks.bounds import bound_of
from staticsched.tasks.matmul.task import ACC_BYTES, MatmulTask, Tiling
from staticsched.tasks.matmul.workbound import MatmulBounds


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
#: the vector buffer's requirement counts 2-byte units (an fp16 or bf16 element; an fp32 tile
#: is ``2*`` its elements)
UNIT = 2


def _units(dtype_bytes: int) -> str:
    """The factor a tile of elements of ``dtype_bytes`` takes in :data:`UNIT` s (``""``: 1)."""
    return "" if dtype_bytes == UNIT else f"{dtype_bytes // UNIT}*"

def _form_term(form: str, m: int, m_text: str, n: int) -> tuple[str, str, int]:
    """(term, factors, elements) of an epilogue operand tile of ``form`` in the vector buffer,
    for tiles of ``m`` rows (``m_text`` in the formula) and ``n`` columns."""
    if form == "col":
        return "base_n", f"{n}", n
    if form == "row":
        return m_text, f"{m}", m
    return f"{m_text}*base_n", f"{m}*{n}", m * n


def matmul_requirements(
    task: MatmulTask,
    base_m: int,
    base_n: int,
    base_k: int,
    buffers: int,
    hw: Hardware | None = None,
    steps: tuple[int, int] = (1, 1),
    split_k: int = 1,
    resident_a: bool = False,
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
    split_k
        Above 1, the vector buffer also holds three fp32 tiles: a partial on its way out
        (coupled cores), the running sum and the next partial of the reduction.
    resident_a
        L1 holds a group's whole A row panel (``ceil(K/base_k)`` tiles, once: the next
        group's tiles take a panel tile's place as its last move frees it) beside the B
        tiles, and one block's accumulator is live at a time.
    """
    e, acc, b = task.elem_bytes, ACC_BYTES, buffers
    # the vector buffer's tiles in 2-byte units: the output block and scratch in the output's
    # dtype, the epilogue's operands in the operands' (fp16 and bf16 tiles take no factor)
    uo, ui = _units(task.out_bytes), _units(task.elem_bytes)
    fo, fi = task.out_bytes // UNIT, task.elem_bytes // UNIT
    sm, sn = steps
    # the factors only appear when a step is above 1, so messages without L1 reuse keep their text
    acc_t, acc_f = ("step_m*step_n*", f"{sm}*{sn}*") if sm * sn > 1 and not resident_a else ("", "")
    a_t, a_f = ("step_m*", f"{sm}*") if sm > 1 else ("", "")
    b_t, b_f = ("step_n*", f"{sn}*") if sn > 1 else ("", "")
    bt = buffers_text(buffers)
    # the vector buffer holds the output block and one tile per epilogue operand; with a
    # row reduction, the whole row panel (N padded to the fractal), the reductions' gamma/beta
    # rows and fp32 row statistics
    n_pad = round_up(task.n, hw.cube.fractal[1] if hw is not None and hw.cube is not None else 16)
    panel = task.reduces
    # on a split chip each of a cluster's two AIVs holds its half of a block's rows (of the row
    # panel with a reduction) in its own UB (tasks/matmul/split.py); split-K reducers hold less
    # still, and stay counted at base_m
    halved = hw is not None and hw.split and split_k == 1
    vm = math.ceil(base_m / 2) if halved else base_m
    vm_t = "ceil(base_m/2)" if halved else "base_m"
    ub_terms = [uo + (f"{vm_t}*N" if panel else f"{vm_t}*base_n")]
    ub_factors = [uo + (f"{vm}*{n_pad}" if panel else f"{vm}*{base_n}")]
    ub_elems = fo * vm * (n_pad if panel else base_n)
    for step in task.epilogue:
        if step.reduces:
            terms = [("N", f"{n_pad}", n_pad, ui, fi)] * (len(step.tensors))
        else:
            terms = [(*_form_term(form, vm, vm_t, base_n), ui, fi) for form in VECOPS[step.op].operands[1:]]
        if not step.reduces:  # an op's scratch tiles (the vec-op table's UB working set)
            terms += [(*_form_term("full", vm, vm_t, base_n), uo, fo)] * VECOPS[step.op].scratch
        for term, factor, elems, unit, f in terms:
            ub_terms.append(unit + term)
            ub_factors.append(unit + factor)
            ub_elems += f * elems
    if split_k > 1:  # three fp32 tiles, in 2-byte units
        ub_terms.append("3*2*base_m*base_n")
        ub_factors.append(f"3*2*{base_m}*{base_n}")
        ub_elems += 3 * 2 * base_m * base_n
    if panel:
        # fp32 [rows, 1] statistics, in 2-byte units
        ub_terms.append(f"{STATS}*{vm_t}*2")
        ub_factors.append(f"{STATS}*{vm}*2")
        ub_elems += STATS * vm * 2

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
            (1 if resident_a else sm * sn) * base_m * base_n * acc * b,
            "accumulator",
        ),
        _operand(name("operand"), task.k, (base_m, base_n, base_k), e, b, (a_t, a_f, b_t, b_f, sm, sn),
                 resident_a),
        Requirement(
            name("vector"),
            f"{_sum(ub_terms)}*{UNIT} B*{bt}",
            f"{_sum(ub_factors)}*{UNIT}*{b}",
            ub_elems * UNIT * b,
            "vector",
        ),
    )


def _operand(space: str, k: int, bases: tuple[int, int, int], e: int, b: int,
             steps: tuple[str, str, str, str, int, int], resident_a: bool) -> Requirement:
    """L1's requirement: a group's A and B tiles, ``b`` copies of each; with ``resident_a``
    the whole A panel once (``ceil(K/base_k)`` tiles) and ``b`` copies of the B tile."""
    base_m, base_n, base_k = bases
    a_t, a_f, b_t, b_f, sm, sn = steps
    bt = buffers_text(b)
    if resident_a:
        tiles = -(-k // base_k) if base_k else 0
        return Requirement(
            space,
            f"(ceil(K/base_k)*base_m*base_k + base_k*base_n*{bt})*{e} B",
            f"({tiles}*{base_m}*{base_k} + {base_k}*{base_n}*{b})*{e}",
            (tiles * base_m * base_k + base_k * base_n * b) * e,
            "operand",
        )
    return Requirement(
        space,
        f"({a_t}base_m*base_k + {b_t}base_k*base_n)*{e} B*{bt}",
        f"({a_f}{base_m}*{base_k} + {b_f}{base_k}*{base_n})*{e}*{b}",
        (sm * base_m * base_k + sn * base_k * base_n) * e * b,
        "operand",
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
    if tiling.split_k > 1:
        k_steps = math.ceil(task.k / tiling.base_k)
        if tiling.split_k > k_steps:
            pr.add(f"task '{task.id}': tiling split_k = {tiling.split_k} exceeds the {k_steps} K steps "
                   f"(K = {task.k}, base_k = {tiling.base_k})")
        if tiling.reuses:
            pr.add(f"task '{task.id}': tiling split_k = {tiling.split_k} with step_m x step_n = "
                   f"{tiling.step_m}x{tiling.step_n}: split-K chunks are single blocks; use steps 1x1")
        if task.reduces:
            pr.add(f"task '{task.id}': tiling split_k = {tiling.split_k}, but a row reduction in the "
                   f"epilogue needs whole row panels on one core; make it a separate rowwise task")
    if tiling.resident_a:
        if tiling.step_m != 1:
            pr.add(f"task '{task.id}': tiling resident_a with step_m = {tiling.step_m}: a resident A "
                   f"panel is one row of blocks; use step_m 1")
        if tiling.split_k > 1:
            pr.add(f"task '{task.id}': tiling resident_a with split_k = {tiling.split_k}: a split-K "
                   f"chunk is one block; use split_k 1")
    if tiling.reuses and task.reduces:
        pr.add(
            f"task '{task.id}': tiling step_m x step_n = {tiling.step_m}x{tiling.step_n}, but a row "
            f"reduction in the epilogue makes a whole row panel the unit of work; use steps 1x1"
        )
    pr.raise_if_any(TilingError)
    for req, cap in misfits(task, tiling, hw):
        pr.add(f"task '{task.id}': {req.formula} = {req.factors} = {req.bytes} B > {req.space} {cap} B")
    pr.raise_if_any(TilingError)


def misfits(task: MatmulTask, tiling: Tiling, hw: Hardware) -> list[tuple[Requirement, int]]:
    """The requirements of ``tiling`` above their space's capacity, each with that capacity."""
    t = tiling
    out = []
    for req in matmul_requirements(task, t.base_m, t.base_n, t.base_k, t.buffers, hw, (t.step_m, t.step_n),
                                   t.split_k, t.resident_a):
        cap = capacity(hw, req.role)
        if cap is not None and req.bytes > cap:
            out.append((req, cap))
    return out


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
    return grouped_rows(task, hw, resident_rows(task, hw, best[1]))


def _row_step(task: MatmulTask, hw: Hardware, tiling: Tiling) -> int:
    """Blocks along N that a row of them may take so that there are still at least as many
    groups as Cube cores: ``ceil(N blocks / ceil(cores / row panels))``."""
    nm = math.ceil(task.m / tiling.base_m) * task.batches
    nn = math.ceil(task.n / tiling.base_n)
    cores = max(1, len(hw.engine_cores("cube")))
    return math.ceil(nn / min(nn, math.ceil(cores / nm)))


def resident_rows(task: MatmulTask, hw: Hardware, tiling: Tiling) -> Tiling:
    """``tiling`` with A's row panel resident in L1 across a row of ``step_n`` blocks
    (``Tiling.resident_a``) when the panel fits beside B's tiles and no core loses work by it;
    else ``tiling`` unchanged.

    Without it every block reads its A panel from global memory again: a GPT-2-small block's
    projections read A 6-24 times (``N / base_n``), half the traffic of the link that bounds
    the block on ``ascend-a2``. A row of ``step_n`` blocks reads it once. The rows are as long
    as they can be while there are still at least as many groups as Cube cores (``step_n =
    ceil(N blocks / ceil(cores / row panels))``), so the grid's parallelism stays; with a
    row reduction in the epilogue the row panel is one core's work already and keeps its A.

    On a split chip only: a coupled core's MTE2 also feeds its Vector tasks, and there the
    rows' longer runs of B loads cost more than A's saved bytes (``llama_block`` on
    ``seed-davinci`` 27,720 -> 29,493 cycles with them, ``bert_wide_layer`` 70,143 -> 71,524).
    """
    if not hw.split:
        return tiling
    if task.reduces:
        step_n = 1
        if math.ceil(task.n / tiling.base_n) < 2:
            return tiling
    else:
        step_n = _row_step(task, hw, tiling)
        if step_n < 2:
            return tiling
    out = attrs.evolve(tiling, step_n=step_n, resident_a=True)
    return tiling if misfits(task, out, hw) else out


def grouped_rows(task: MatmulTask, hw: Hardware, tiling: Tiling) -> Tiling:
    """``tiling`` with groups of ``step_n`` blocks along N computed K step by K step, each A
    tile loaded once for the group (Ascend's ``stepN`` with ``depthA1`` below K), where A's
    panel cannot be resident (:func:`resident_rows` kept ``tiling``) and the grouping's lower
    bound is below the plain tiling's; else ``tiling`` unchanged.

    A GEMM of 128x128 tiles on ``ascend-a2`` needs as many MTE2 cycles for its two operand
    tiles per K step as the Cube needs for the step, plus the loads' fixed costs: its MTE2 and
    its share of the L2 link bound it. Sharing A's tile between ``step_n`` blocks cuts its
    loads by ``(step_n - 1) / (2 step_n)``; GPT-2-small's down projection (K 3072, whose A
    panel is 768 KiB) 30,544 -> 27,440 cycles alone. The groups are as long as the grid's
    parallelism allows (as :func:`resident_rows`), shortened to what fits, double buffered if
    it fits and else single buffered: the group's accumulators then drain before the next
    group's first ``mmad`` (one FixPipe per block against a K loop of ``K / base_k`` steps).
    The choice is made by the tuner's bound of each tiling
    (:class:`~staticsched.tasks.matmul.workbound.MatmulBounds`), the schedule-free cost model. On
    a split chip only, as :func:`resident_rows`.
    """
    if not hw.split or task.reduces or tiling.reuses or tiling.split_k > 1:
        return tiling
    for step_n in range(_row_step(task, hw, tiling), 1, -1):
        fits = [t for t in (attrs.evolve(tiling, step_n=step_n, double_buffer=db) for db in (True, False))
                if not misfits(task, t, hw)]
        if fits:
            break
    else:
        return tiling
    bounds = MatmulBounds(task, hw)
    grouped = fits[0]
    if bound_of([bounds.work(grouped)], hw.cores) < bound_of([bounds.work(tiling)], hw.cores):
        return grouped
    return tiling
