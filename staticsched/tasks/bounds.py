"""What a cheap bound of a task's tiling knows, and how the tasks of a graph combine.

A :class:`Work` is one task's (:mod:`staticsched.tasks.matmul.workbound` computes a matmul's
from its tiling's block grid); :func:`bound_of` combines the tasks of a graph. Tiling
derivation compares tilings by them, and tuning orders and prunes its candidates by them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import attrs

from staticsched.model.hardware import Hardware


@attrs.frozen
class Work:
    """Lower bounds of one task's tiling: ``per_core``, per pipe, on the busiest core's time
    (head, busy cycles and tail); ``total``, per pipe, on the cycles of the whole chip;
    ``links``, per shared link, the cycles its bytes take at its whole bandwidth."""

    per_core: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)
    total: tuple[tuple[str, Fraction], ...] = attrs.field(converter=tuple)
    links: tuple[tuple[str, Fraction], ...] = attrs.field(converter=tuple, default=())


def bound_of(works: Sequence[Work], cores: int) -> int:
    """A lower bound of the makespan of a graph whose tasks have ``works``: the largest
    per-core bound of any task, per pipe the tasks' total cycles over the cores, and per link
    the tasks' cycles on it."""
    best = 0
    totals: dict[str, Fraction] = {}
    links: dict[str, Fraction] = {}
    for w in works:
        for _, v in w.per_core:
            best = max(best, v)
        for pipe, v in w.total:
            totals[pipe] = totals.get(pipe, Fraction(0)) + v
        for name, v in w.links:
            links[name] = links.get(name, Fraction(0)) + v
    for v in totals.values():
        best = max(best, math.ceil(v / cores))
    for v in links.values():
        best = max(best, math.ceil(v))
    return best


def link_cycles(hw: Hardware, moves: Sequence[tuple[str, str, int]]) -> list[tuple[str, Fraction]]:
    """Per link of ``hw``, the cycles the ``(src, dst, bytes)`` moves on it take at its whole
    bandwidth (no transfer is faster)."""
    out = []
    for lk in hw.links:
        nbytes = sum(n for src, dst, n in moves if lk.carries(src, dst))
        if nbytes:
            out.append((lk.name, Fraction(nbytes) / Fraction(lk.bytes_per_cycle)))
    return out
