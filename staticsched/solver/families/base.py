"""The protocol of a solver resource family (:mod:`staticsched.solver.families`), the list
scheduler's tracker protocol and what a stuck list-scheduler run reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs
from ortools.sat.python import cp_model

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver.list_prep import Prep
from staticsched.solver.problem import Problem, ProblemMap
from staticsched.solver.variables import Variables

#: an edge ``(a, b, latency)``: op ``b`` starts at least ``latency`` after op ``a`` ends
Edge = tuple[int, int, int]


@attrs.frozen
class Stuck:
    """Why a list-scheduler run could not continue: the first unstarted op in allocation order
    and what it waits for. ``kind`` names the family that holds it back (``"memory"``:
    ``space``, ``item``, ``holders`` the items in the way; ``"events"``: ``budget``,
    ``holders`` the producers whose flag lifetimes are open; another family: ``holders`` as
    it explains them)."""

    kind: str
    op: int
    time: int
    space: int = -1
    item: int = -1
    budget: int = -1
    holders: tuple[int, ...] = attrs.field(converter=tuple, default=())
    rule: str = ""
    #: what CP-SAT said when asked to find any schedule: "infeasible" (proven), "unknown"
    #: (nothing within its limits) or "" (not asked: problem too large)
    proof: str = ""


@attrs.frozen
class Group:
    """What a family reads to describe one group of cores as part of a :class:`Problem`
    (:func:`~staticsched.solver.decompose.build_problems`): the graph, its hardware, the
    group's cores, its ops (graph indices, in local order), each graph op's local index, the
    group's items in bounded spaces with their accesses, and whether the program has flags.
    ``cache`` is shared by all groups of one graph, so that groups running the same program
    compute a family's data once."""

    graph: OpGraph
    hw: Hardware
    cores: tuple[int, ...]
    members: Sequence[int]
    local: Sequence[int]
    item_list: Sequence[tuple[int, list[tuple[int, str]]]]
    flag_slots: bool
    cache: dict = attrs.field(eq=False)


class Tracker(Protocol):
    """A family's state while the list scheduler builds a timetable: it holds an op back
    while the family's resources are not there. Time only moves forward."""

    def prune(self, t: int) -> None:
        """Forget what ended by ``t``."""
        ...

    def next_change(self) -> int | None:
        """The next time the tracker would admit more (None: nothing pending)."""
        ...

    def refuses(self, i: int, end: int, start: list[int]) -> bool:
        """Whether op ``i``, ending at ``end``, may not start now (``start``: every start so
        far, -1 for unstarted ops)."""
        ...

    def begin(self, i: int, t: int, start: list[int]) -> None:
        """Op ``i`` starts at ``t`` (``start[i]`` is already set)."""
        ...

    def stuck(self, i: int, end: int, start: list[int], rule: str) -> Stuck | None:
        """Why op ``i`` cannot start now, or None when this family does not hold it."""
        ...


class Family(Protocol):
    """What a resource family gives the solver. Every method may do nothing for a problem
    without the family's resources."""

    #: the family's name (``v.of[name]`` holds its CP-SAT variables, ``Stuck.kind`` names it)
    name: str

    def attach(self, prob: Problem, pmap: ProblemMap, group: Group) -> tuple[Problem, ProblemMap]:
        """The problem (and map) with the family's data of ``group`` added; a new family keeps
        its data in ``Problem.parts`` under its name."""
        ...

    def precheck(self, graph: OpGraph, hw: Hardware, prob: Problem, pmap: ProblemMap) -> list[str]:
        """One sentence per input no schedule can satisfy, before any search."""
        ...

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

    def tracker(self, prob: Problem, prep: Prep) -> Tracker | None:
        """The list scheduler's tracker of the family, or None (the memory and link families
        shape an op rather than admit it, and are wired by their roles: see
        :mod:`~staticsched.solver.list_sched`)."""
        ...

    def explain(self, graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> str | None:
        """A sentence, with names and numbers, for a run stuck on this family (``stuck.kind``
        is its name); None for another family's."""
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


class Passive:
    """Defaults for a family without data of its own to attach, nothing to precheck, no
    tracker and no explanation."""

    def attach(self, prob: Problem, pmap: ProblemMap, group: Group) -> tuple[Problem, ProblemMap]:
        return prob, pmap

    def precheck(self, graph: OpGraph, hw: Hardware, prob: Problem, pmap: ProblemMap) -> list[str]:
        return []

    def tracker(self, prob: Problem, prep: Prep) -> Tracker | None:
        return None

    def explain(self, graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> str | None:
        return None
