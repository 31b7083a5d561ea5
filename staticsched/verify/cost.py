"""Cost conformance and extents: every kinded micro-op against the hardware's cost model.

A timed program is only correct when every duration is exact, and the solver's
timetable is only as good as the durations it was given. So each micro-op with a
kind must run on the unit the kind table names for its operands and last exactly
the cycles the kind's duration formula gives for its own attributes (its extents)
on this hardware. The extents themselves must fit the operands' tiles: an extent
past a tile reads or writes bytes outside the item. Opaque ops (``op``) have no
cost model and are exempt.
"""

from __future__ import annotations

from typing import Any

from staticsched.errors import StaticschedError
from staticsched.model.opkinds import KINDS, ItemShape, extent_problems, item_shape
from staticsched.verify.index import ProgramIndex
from staticsched.verify.report import Finding

_FAILURES = (StaticschedError, KeyError, ValueError, TypeError, ZeroDivisionError)

#: the evaluation of an op shape with an operand that is not a declared item (``input``
#: reports it; nothing to evaluate)
_UNDECLARED = "operand not declared"


def cost_findings(ix: ProgramIndex) -> tuple[list[Finding], list[Finding]]:
    """``cost`` findings (``duration_mismatch``, ``wrong_unit``, ``no_cost``) and ``memory`` /
    ``out_of_bounds`` findings for extents that do not fit their operands.

    Ops that already have ``input`` findings (unknown items, missing attributes) are skipped.
    """
    hw = ix.hw
    made: dict[tuple, ItemShape] = {}
    shapes: dict[str, ItemShape] = {}
    for it in ix.items.values():
        key = (it.space, it.bytes, it.dtype, it.shape)
        sh = made.get(key)
        if sh is None:
            sh = made[key] = item_shape(*key)
        shapes[it.name] = sh
    skip = {op for f in ix.problems for op in f.ops}
    shape_of, first = ix.op_shapes()
    # one formula call per op shape
    # None: not evaluated yet
    memo: list[tuple[str, int, list[str]] | str | None] = [None] * len(first)
    cost: list[Finding] = []
    bounds: list[Finding] = []
    instr, stream_of, streams = ix.instr, ix.stream_of, ix.streams
    for gid in range(ix.n):
        k = shape_of[gid]
        if k < 0:
            continue
        ins = instr[gid]
        if ins.id in skip:
            continue
        got = memo[k]
        if got is None:
            names = (*ins.reads, *ins.writes)
            if any(n not in shapes for n in names):
                got = memo[k] = _UNDECLARED
            else:
                got = memo[k] = _evaluate(ix, KINDS[ins.kind], dict(ins.attrs), ins.reads, ins.writes, shapes)
        if got is _UNDECLARED:
            continue
        if (
            not isinstance(got, str)
            and not got[2]
            and got[0] == streams[stream_of[gid]].unit
            and got[1] == ins.duration
        ):
            continue
        names = (*ins.reads, *ins.writes)
        where = ix.describe(gid)
        common: dict[str, Any] = {
            "ops": (ix.op_label(gid),),
            "core": ix.core_of(gid),
            "pipes": (ix.unit_of(gid),),
        }
        if isinstance(got, str):
            cost.append(Finding("cost", "no_cost", f"{where}: {got}", **common))
            continue
        unit, duration, extents = got
        operands = ", ".join(repr(n) for n in names)
        for line in extents:
            bounds.append(
                Finding("memory", "out_of_bounds", f"{where}: {line} (operands {operands})", **common)
            )
        if unit != ix.unit_of(gid):
            cost.append(
                Finding(
                    "cost",
                    "wrong_unit",
                    f"{where}: a {ins.kind} of these operands runs on {unit} on hardware '{hw.name}', "
                    f"not on {ix.unit_of(gid)}",
                    **common,
                )
            )
        if duration != ins.duration:
            cost.append(
                Finding(
                    "cost",
                    "duration_mismatch",
                    f"{where}: the program says {ins.duration} cycles, the cost model of '{hw.name}' "
                    f"gives {duration} for {ins.kind} {_attrs_text(ins.attrs)}",
                    **common,
                )
            )
    return cost, bounds


def _evaluate(
    ix: ProgramIndex,
    kind: Any,
    a: dict[str, Any],
    reads: tuple[str, ...],
    writes: tuple[str, ...],
    shapes: dict[str, ItemShape],
) -> tuple[str, int, list[str]] | str:
    """(unit, duration, extent problems) of one op shape, or why the cost model has none."""
    r = [shapes[n] for n in reads]
    w = [shapes[n] for n in writes]
    if len(r) < len(kind.reads) - kind.optional_reads or len(w) != len(kind.writes):
        return (
            f"kind '{kind.name}' needs {len(kind.reads) - kind.optional_reads}+ reads and "
            f"{len(kind.writes)} writes, the op has {len(r)} and {len(w)}"
        )
    try:
        extents = extent_problems(kind, a, r, w)
        return kind.unit(ix.hw, a, r, w), int(kind.duration(ix.hw, a, r, w)), extents
    except _FAILURES as exc:
        if isinstance(exc, StaticschedError):
            text = "; ".join(exc.problems)
        else:
            text = f"{type(exc).__name__}: {exc}"
        return f"no cost for kind '{kind.name}' on hardware '{ix.hw.name}': {text}"


def _attrs_text(attrs_: tuple[tuple[str, Any], ...]) -> str:
    return " ".join(f"{k}={v}" for k, v in attrs_) or "(no attributes)"
