"""Explanations of infeasible inputs: one sentence per problem, with names and numbers.

:func:`precheck` asks every resource family for what no schedule can satisfy before any search
(an op whose items cannot be co-resident, a cross-pipe dependency without any event id);
:func:`explain_stuck` asks the family that held the list scheduler back
(:class:`~staticsched.solver.families.base.Stuck`) for a sentence.
"""

from __future__ import annotations

from staticsched._fields import Problems
from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families import FAMILIES
from staticsched.solver.families.base import Stuck
from staticsched.solver.problem import Problem, ProblemMap


def precheck(graph: OpGraph, hw: Hardware, pairs: list[tuple[Problem, ProblemMap]]) -> None:
    """Raise :class:`InfeasibleError` listing every input no schedule can satisfy."""
    pr = Problems()
    for prob, pmap in pairs:
        for family in FAMILIES:
            for line in family.precheck(graph, hw, prob, pmap):
                pr.add(line)
    pr.raise_if_any(InfeasibleError)


_PROOF = {
    "infeasible": " (CP-SAT proves that no schedule satisfies these constraints)",
    "unknown": " (CP-SAT found no schedule within its limits either)",
    "": " (the list scheduler found none; the problem is too large for an exhaustive search)",
}


def explain_stuck(graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> InfeasibleError:
    """A sentence for why the list scheduler found no way to go on."""
    said = (family.explain(graph, prob, pmap, stuck) for family in FAMILIES)
    line = next((s for s in said if s is not None), None)
    if line is None:
        op = graph.ops[pmap.ops[stuck.op]]
        line = f"op '{op.id}' on core {op.core} can never start (no schedule found)"
    return InfeasibleError([line + _PROOF[stuck.proof]])
