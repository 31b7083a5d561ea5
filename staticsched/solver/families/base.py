"""The protocol of a solver resource family (:mod:`staticsched.solver.families`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ortools.sat.python import cp_model

from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables

#: an edge ``(a, b, latency)``: op ``b`` starts at least ``latency`` after op ``a`` ends
Edge = tuple[int, int, int]


class Family(Protocol):
    """What a resource family gives the solver. Every method may do nothing for a problem
    without the family's resources."""

    #: the family's name (``v.of[name]`` holds its CP-SAT variables)
    name: str

    def variables(self, v: Variables) -> None:
        """Create the family's CP-SAT variables over ``v`` (in a fixed order, named)."""
        ...

    def constrain(self, v: Variables, whole: bool) -> None:
        """Add the family's constraints; ``whole`` when the makespan covers every op (not a
        window), so that its intervals may be told they end by the makespan."""
        ...

    def hint(self, model: cp_model.CpModel, v: Variables, starts: Sequence[int],
             offsets: Sequence[int]) -> None:
        """Hint every variable of the family from a feasible timetable."""
        ...

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        """Every way a timetable breaks the family's part of the solver's model, one short line
        each."""
        ...

    def bounds(self, prob: Problem, heads: Sequence[int], tails: Sequence[int],
               core_names: tuple[int, ...] | None) -> list[tuple[str, int]]:
        """Lower bounds of the makespan from the family's resources, each with its source
        (``"pipe 0:CUBE"``, ``"link L2"``). ``heads`` are the longest paths to each op's start,
        ``tails`` from each op's start to the end (its duration included)."""
        ...

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
        """The order a feasible timetable gives the family's resources, as edges: with them
        every start is the longest path (semi-active normalisation, emission)."""
        ...
