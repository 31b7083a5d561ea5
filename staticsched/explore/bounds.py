"""Lower bounds tuning orders and prunes its candidates by.

A :class:`~staticsched.tasks.bounds.Work` is what a cheap bound knows of one task
(:mod:`staticsched.tasks.matmul.workbound` computes it from a tiling's block grid);
:func:`~staticsched.tasks.bounds.bound_of` combines the tasks of a graph. Once a candidate is
lowered, :func:`solver_bound` is the solver's own static bound of the graph raised by
:func:`memory_bound`, which the solver's bound does not have.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.tasks.bounds import Work, link_cycles


def solver_bound(og: OpGraph, hw: Hardware) -> tuple[int, str]:
    """The lower bound the solver computes for the lowered graph ``og`` on ``hw``, raised by
    the memory bound (:func:`memory_bound`), and its source
    (``pipe 3:CUBE``, ``critical_path``, ``link L2``, ``memory L0B core 0``)."""
    from staticsched.solver.bounds import chip_lower_bound
    from staticsched.solver.decompose import build_problems

    value, source, _ = chip_lower_bound(og, hw, build_problems(og, hw))
    memory, where = memory_bound(og, hw)
    return (memory, where) if memory > value else (value, source)


def fixed_work(og: OpGraph, hw: Hardware, task_ids: set[str]) -> Work:
    """Chip-wide cycles per pipe, and bytes per shared link, of the ops the tasks ``task_ids``
    lowered to in ``og`` (op ids start with their task's id and a dot)."""
    from staticsched.model.opkinds import transfer_route

    ids = sorted(task_ids, key=len, reverse=True)
    items = {it.name: it for it in og.items}
    total: dict[str, int] = {}
    moves = []
    for op in og.ops:
        if any(op.id.startswith(f"{t}.") for t in ids):
            total[op.unit] = total.get(op.unit, 0) + op.duration
            route = transfer_route(hw, op.kind, op.attr, [items[n] for n in op.reads],
                                   [items[n] for n in op.writes])
            if route is not None:
                moves.append(route)
    return Work((), [(u, Fraction(v)) for u, v in sorted(total.items())], link_cycles(hw, moves))


def memory_bound(og: Any, hw: Hardware) -> tuple[int, str]:
    """A lower bound of any schedule of the lowered graph ``og`` from its memory: items taking
    more than half of a bounded space cannot be live at the same time, so on each core their
    lives follow one another. An item lives from its first access to the end of its last; its
    accesses in program order are chained (each write after the reads and write before it), so
    it lives at least the sum, over its writes, of the write and the longest read after it.
    Returns the value and where it comes from (``memory L0B core 3``), or ``(0, "")``."""
    caps = {s.name: s.capacity for s in hw.spaces if s.capacity > 0}
    big = {it.name: it.space for it in og.items if it.space in caps and 2 * it.bytes > caps[it.space]}
    if not big:
        return 0, ""
    life: dict[str, list[int]] = {}  # item -> [chained cycles so far, longest read since]
    core: dict[str, int] = {}
    for op in og.ops:
        for name in op.writes:
            if name in big:
                st = life.setdefault(name, [0, 0])
                st[0], st[1] = st[0] + st[1] + op.duration, 0
                core.setdefault(name, op.core)
        for name in op.reads:
            if name in big and name not in op.writes:
                st = life.setdefault(name, [0, 0])
                st[1] = max(st[1], op.duration)
                core.setdefault(name, op.core)
    per: dict[tuple[int, str], int] = {}
    for name, (chained, read) in life.items():
        key = (core[name], big[name])
        per[key] = per.get(key, 0) + chained + read
    (c, space), value = max(per.items(), key=lambda kv: (kv[1], -kv[0][0], kv[0][1]))
    return value, f"memory {space} core {c}"
