"""Orders and longest paths of a :class:`~.problem.Problem`'s edges (resources ignored):
the bounds, the list scheduler's priorities and CP-SAT's variable domains read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from staticsched.model.graphs import longest_starts, longest_tails, topological_order
from staticsched.solver.problem import Problem


def topo_order(prob: Problem, key: Sequence[Any] | None = None) -> list[int]:
    """Topological order of the edges, smallest ``key`` (default: index) first among ready ops."""
    succ: list[list[int]] = [[] for _ in range(prob.n)]
    for a, b, _ in prob.edges:
        succ[a].append(b)
    return topological_order(succ, key if key is not None else range(prob.n))


def head_lengths(prob: Problem) -> list[int]:
    """Earliest start of each op from the edges alone (no resources)."""
    out = longest_starts(prob.dur, prob.edges)
    if out is None:
        raise AssertionError("the problem's edges have a cycle")
    return out


def tail_lengths(prob: Problem) -> list[int]:
    """Longest path from each op's start to the end of the schedule (its duration included)."""
    out = longest_tails(prob.dur, prob.edges)
    if out is None:
        raise AssertionError("the problem's edges have a cycle")
    return out
