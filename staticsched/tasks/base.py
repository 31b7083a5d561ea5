"""What every task kind provides, and the helpers kinds share.

A task kind is one module (or, for a big kind, a package) under ``staticsched/tasks/`` that
defines ``KIND``, a :class:`TaskKind`: how to read and validate a task of that kind from
TaskGraph JSON and write it back, how to tile it for a hardware model (derive or check: a
:class:`Plan`), how to lower the plan to micro-ops, and its NumPy reference. The Hypothesis
strategy the end-to-end properties draw it from lives with the tests
(``tests/task_strategies.py``). The registry (``staticsched/tasks/__init__.py``) lists the
modules; the TaskGraph reader, the lowering and the reference dispatch through it.

Tensors are declared with 1 to 4 dims. Every GM tensor is 2-D everywhere past the reader:
the leading dims are flattened into rows (``[B, H, M, N]`` is ``[B*H*M, N]``, so one batch
element's matrix is a range of rows), and a 1-D ``[N]`` is the row ``[1, N]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from staticsched._fields import Problems, get_list, get_number, get_str
from staticsched.model.hardware import Hardware
from staticsched.tasks.builder import Builder

#: the most dims a tensor may declare (leading batch and head dims, then a matrix)
MAX_RANK = 4


@attrs.frozen
class TensorDecl:
    """A GM tensor as declared: ``shape`` has 1 to :data:`MAX_RANK` dims, row-major."""

    name: str
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    dtype: str = "float16"
    #: the memory space the tensor lives in; "" is the hardware's ``global`` space (e.g. an
    #: intermediate placed in "HBM" pays that link's bandwidth when written and read back)
    space: str = ""
    #: how its values lie in GM: ``"ND"`` (row-major, the default) or ``"NZ"`` (the Cube's
    #: fractal format, converted before the graph runs: a weight cast at load time). Only the
    #: Cube's operand loads price it (an ND operand is converted on the fly at the hardware's
    #: ``nd2nz_derate``); the values a TaskGraph or a replay holds are row-major either way
    layout: str = "ND"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def matrix(self) -> tuple[int, int]:
        """The last two dims (a 1-D ``[N]`` is ``[1, N]``)."""
        if len(self.shape) == 1:
            return (1, self.shape[0])
        return (self.shape[-2], self.shape[-1])

    @property
    def lead(self) -> tuple[int, ...]:
        """The leading (batch, head) dims before the matrix; ``()`` for 1-D and 2-D tensors."""
        return tuple(self.shape[:-2])

    @property
    def shape2d(self) -> tuple[int, int]:
        """The 2-D shape used everywhere else: leading dims flattened into rows."""
        rows, cols = self.matrix
        return (math.prod(self.lead) * rows, cols)


def fmt_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(x) for x in shape) + "]"


#: a GM tensor's layouts: row-major, or the Cube's fractal format (:attr:`TensorDecl.layout`)
LAYOUTS = ("ND", "NZ")


#: declared tensors by name; None marks one whose shape is invalid (already reported)
Tensors = Mapping[str, TensorDecl | None]


@attrs.define
class ReadContext:
    """What a kind's reader gets besides the task body: the declared tensors, where to report,
    the problem lists (tiling problems apart, so a file whose only problems are tilings
    raises :class:`~staticsched.errors.TilingError`), and which kind takes which ``op``
    (the registry's ``KIND_OF_OP``, for hints)."""

    tensors: Tensors
    where: str
    task_id: str
    pr: Problems
    tiling_pr: Problems
    kind_of_op: Mapping[str, str] = attrs.field(factory=dict)

    def add(self, line: str) -> None:
        self.pr.add(f"{self.where}: {line}")

    def tensor(self, body: Mapping[str, Any], key: str) -> TensorDecl | None:
        """The declared tensor named by ``body[key]``; None if it is not usable (and reported)."""
        name = get_str(body, key, self.where, self.pr)
        if not name:
            return None
        if name not in self.tensors:
            self.add(f"'{key}' names unknown tensor '{name}' (tensors: {', '.join(sorted(self.tensors))})")
        return self.tensors.get(name)

    def optional_tensor(self, body: Mapping[str, Any], key: str) -> tuple[bool, TensorDecl | None]:
        """(given, tensor) for an optional tensor key."""
        if key not in body:
            return False, None
        return True, self.tensor(body, key)

    def tensor_list(self, body: Mapping[str, Any], key: str) -> list[TensorDecl | None]:
        out: list[TensorDecl | None] = []
        for j, name in enumerate(get_list(body, key, self.where, self.pr)):
            if not isinstance(name, str):
                self.add(f"'{key}'[{j}] must be a tensor name, got {name!r}")
                out.append(None)
            elif name not in self.tensors:
                known = ", ".join(sorted(self.tensors))
                self.add(f"'{key}'[{j}] names unknown tensor '{name}' (tensors: {known})")
                out.append(None)
            else:
                out.append(self.tensors[name])
        return out

    def number(self, body: Mapping[str, Any], key: str, default: float | None = None) -> float | None:
        if key not in body:
            return default
        return get_number(body, key, self.where, self.pr)

    def operand_dtype(self, operands: Sequence[tuple[str, TensorDecl | None]]) -> str:
        """The one dtype of a task's operands (``(key, tensor)`` pairs, None skipped): the
        first one's; one line when the others differ (a task computes in one dtype)."""
        known = [(key, t) for key, t in operands if t is not None]
        if not known:
            return "float16"
        dtype = known[0][1].dtype
        if any(t.dtype != dtype for _, t in known):
            listed = ", ".join(f"{key} '{t.name}' is {t.dtype}" for key, t in known)
            self.add(f"operands of different dtypes ({listed}); a task's operands share one dtype")
        return dtype

    def not_own_output(self, reads: Sequence[str], out: str) -> None:
        for name in sorted(set(reads)):
            if name == out:
                self.add(f"reads its own output tensor '{name}'")


class Task(Protocol):
    """What the TaskGraph needs of a task: its id, kind name and the tensors it reads/writes."""

    id: str

    @property
    def type(self) -> str: ...

    @property
    def reads(self) -> tuple[str, ...]: ...

    @property
    def writes(self) -> tuple[str, ...]: ...


@attrs.frozen
class TilingInfo:
    """How one task was cut, for summaries and ``timetable.json``.

    ``base`` is the kind's block sizes (``(base_m, base_n, base_k)`` for a matmul, ``(rows,
    cols)`` of a tile for the Vector kinds, ``(block_q, block_kv)`` for attention); ``derived``
    is False when the task gave its tiling; ``per_core`` is the fewest and most blocks one core
    gets; ``combine`` says how a row reduction spanning several blocks is combined (``single``
    when every row fits one block, ``online`` or ``two-pass``), empty when nothing reduces.
    """

    task: str
    kind: str
    base: tuple[int, ...] = attrs.field(converter=tuple)
    buffers: int
    derived: bool
    blocks: int
    #: (fewest, most) blocks of one core
    per_core: tuple[int, ...] = attrs.field(converter=tuple)
    what: str = ""
    combine: str = ""
    #: a matmul's L1 reuse steps ``(step_m, step_n)``; ``()`` when the kind has none or both are 1
    steps: tuple[int, ...] = attrs.field(converter=tuple, default=())
    #: a matmul's A row panel stays in L1 across the group's blocks (``Tiling.resident_a``)
    resident_a: bool = False

    def text(self) -> str:
        size = "/".join(map(str, self.base)) if self.kind == "matmul" else "x".join(map(str, self.base))
        what = self.what or ("base m/n/k" if self.kind == "matmul" else "tile rows x cols")
        lo, hi = self.per_core
        per = f"{lo}" if lo == hi else f"{lo}-{hi}"
        combine = f", rows reduced {self.combine}" if self.combine else ""
        steps = f", L1 reuse step m x n {self.steps[0]}x{self.steps[1]}" if self.steps else ""
        if self.resident_a:
            steps = ", A panel resident in L1" + (f" across 1x{self.steps[1]} blocks" if self.steps else "")
        unit = "groups of blocks" if self.steps else "blocks"
        return (f"{self.task}: {self.kind} {what} {size} ({'derived' if self.derived else 'given'}), "
                f"{'double' if self.buffers == 2 else 'single'} buffered{steps}, {self.blocks} {unit}, "
                f"{per} per core{combine}")

    def as_dict(self) -> dict[str, Any]:
        out = {
            "task": self.task,
            "kind": self.kind,
            "base": list(self.base),
            "buffers": self.buffers,
            "derived": self.derived,
            "blocks": self.blocks,
            "blocks_per_core": list(self.per_core),
        }
        if self.combine:
            out["combine"] = self.combine
        if self.steps:
            out["steps"] = list(self.steps)
        if self.resident_a:
            out["resident_a"] = True
        return out


def checked_or_derived(task: Any, hw: Hardware, check: Callable, derive: Callable, make: Callable) -> Any:
    """``make(task, tiling)`` with the task's own tiling checked by ``check`` or, without one,
    the tiling ``derive`` gives."""
    if task.tiling is not None:
        check(task, task.tiling, hw)
        return make(task, task.tiling)
    return make(task, derive(task, hw))


def per_core(units: int, cores: int) -> tuple[int, int]:
    """Fewest and most of ``units`` blocks one core gets when they go round-robin."""
    return (units // cores, -(-units // cores))


class Plan(Protocol):
    """A task cut for one hardware model."""

    @property
    def task(self) -> Any:
        """The task."""
        ...

    @property
    def blocks(self) -> int:
        """Units of work assigned to cores round-robin."""
        ...

    @property
    def op_count(self) -> int:
        """Ops :meth:`lower` emits (computed from shapes and tilings, nothing built)."""
        ...

    def info(self, hw: Hardware, /) -> TilingInfo: ...

    def lower(self, b: Builder, /) -> None: ...


@attrs.frozen
class TaskKind:
    """One task kind; every field is the kind's own function (see the module docstring).

    Attributes
    ----------
    name : str
        The ``type`` of its tasks in TaskGraph JSON.
    read : callable
        ``(body, ctx) -> task or None``: validate one task object, reporting through ``ctx``.
    to_dict : callable
        ``task -> dict``: the JSON form (reading it back gives an equal task).
    plan : callable
        ``(task, hw) -> Plan``: the tiling (checked when given, derived otherwise); raises
        :class:`~staticsched.errors.TilingError` with the arithmetic.
    needs : callable
        ``(task, hw) -> list of str``: what ``hw`` lacks to run the task (roles, paths, units).
    reference : callable
        ``(task, env) -> {tensor: array}``: the NumPy reference of its outputs, from the 2-D
        values in ``env``.
    input_scales : callable
        ``task -> {tensor: factor}``: how the seeded inputs of its operands are scaled (the
        matmul's ``b`` by ``1/sqrt(K)``), so that values stay well conditioned.
    positive_inputs : callable
        ``task -> {tensor: least}``: the operands its ops need positive (a square root's, a
        divisor, :attr:`VecOp.positive`), whose seeded values are drawn in
        ``[least, least + 1)`` rather than ``[-1, 1)``.
    cube_operands : callable
        ``task -> tensor names`` its lowering loads from global memory as the Cube's operands
        (a Cube matmul's ``a`` and ``b``): the only reads a tensor's ``"NZ"`` layout is for.
    ops : tuple of str
        The ``op`` values its tasks take, if it has any (for hints when another kind is given
        one of them).
    """

    name: str
    read: Callable[[Mapping[str, Any], ReadContext], Any]
    to_dict: Callable[[Any], dict[str, Any]]
    plan: Callable[[Any, Hardware], Plan]
    needs: Callable[[Any, Hardware], list[str]]
    reference: Callable[[Any, Mapping[str, np.ndarray]], dict[str, np.ndarray]]
    input_scales: Callable[[Any], dict[str, float]] = lambda task: {}
    positive_inputs: Callable[[Any], dict[str, float]] = lambda task: {}
    cube_operands: Callable[[Any], tuple[str, ...]] = lambda task: ()
    ops: tuple[str, ...] = attrs.field(converter=tuple, default=())


# --------------------------------------------------------------------------- hardware needs


def hardware_needs(
    task_id: str,
    hw: Hardware,
    *,
    roles: Sequence[str] = (),
    paths: Sequence[tuple[str, str]] = (),
    cube: bool = False,
    vector: bool = False,
    cube_dtype: str = "float16",
) -> list[str]:
    """Problem lines for what ``hw`` lacks: spaces playing ``roles``, transfer ``paths``
    between roles, a ``[cube]`` with a rate for ``cube_dtype``, a ``[vector]``."""
    from staticsched.model.hardware import ROLES

    w = f"hardware '{hw.name}' cannot run task '{task_id}'"
    lines = []
    for r in roles:
        if hw.role_space(r) is None:
            lines.append(f"{w}: no memory space '{ROLES[r][0]}' (role '{r}': {ROLES[r][1]})")
        elif not hw.has_space(hw.role(r)):
            lines.append(f"{w}: no memory space '{hw.role(r)}'")
    for src, dst in paths:
        s, d = hw.role_space(src) or ROLES[src][0], hw.role_space(dst) or ROLES[dst][0]
        if not hw.has_path(s, d):
            lines.append(f"{w}: no transfer path {s}->{d} in [[paths]]")
    if cube and hw.cube is None:
        lines.append(f"{w}: no [cube] section")
    elif cube and hw.cube is not None and cube_dtype not in dict(hw.cube.macs_per_cycle):
        lines.append(f"{w}: [cube] has no macs_per_cycle for {cube_dtype}")
    if vector and hw.vector is None:
        lines.append(f"{w}: no [vector] section")
    return lines


# --------------------------------------------------------------------------- vector tiles


@attrs.frozen
class RowTiling:
    """Tiles of a Vector task: ``rows`` rows of ``cols`` columns (``cols`` short of the row's
    width: a row is cut into column blocks)."""

    rows: int
    cols: int


class RowGrid:
    """The tile grid of a plan with a ``task`` of ``rows x cols`` and a :class:`RowTiling`."""

    task: Any
    tiling: RowTiling

    @property
    def row_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.rows, self.tiling.rows)

    @property
    def col_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.cols, min(self.tiling.cols, self.task.cols))


# --------------------------------------------------------------------------- arithmetic


def spans(total: int, step: int) -> tuple[tuple[int, int], ...]:
    """``[0, total)`` cut into ``step``-sized half-open spans, the last one possibly shorter."""
    return tuple((s, min(s + step, total)) for s in range(0, total, step))


def largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest ``x`` in ``[lo, hi]`` with ``ok(x)``, given ``ok(lo)`` and ``ok`` monotone."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def read_op(body: Mapping[str, Any], ctx: ReadContext, choices: Sequence[str]) -> str:
    """The ``op`` of a task, from ``choices``; an op of another kind names that kind."""
    raw = body.get("op")
    if isinstance(raw, str) and raw and raw not in choices:
        other = ctx.kind_of_op.get(raw)
        hint = f" ('{raw}' is an op of '{other}' tasks)" if other else ""
        ctx.add(f"'op' = {raw!r} is not one of {', '.join(choices)}{hint}")
        return ""
    return get_str(body, "op", ctx.where, ctx.pr)
