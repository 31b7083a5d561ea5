"""CP-SAT constraints of a problem: each resource family's (DESIGN §5), then the makespan.

:meth:`Constraints.add_all` adds the families in the order of
:data:`~staticsched.solver.families.FAMILIES`, so the model is built identically every time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from staticsched.solver.families import FAMILIES
from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables


class Constraints:
    """Adds every constraint family of ``prob`` to ``model`` over ``variables``."""

    def __init__(
        self,
        model: cp_model.CpModel,
        prob: Problem,
        variables: Variables,
        *,
        objective_ops: Sequence[int] | None = None,
    ) -> None:
        self.model = model
        self.prob = prob
        self.vars = variables
        #: the makespan covers these ops only (a window of a larger schedule), else all
        self.objective_ops = objective_ops
        # holds and lifetimes end by the makespan only when it covers every op
        self.whole = objective_ops is None

    def add_all(self) -> None:
        for family in FAMILIES:
            family.constrain(self.vars, self.whole)
        self._makespan()

    def _makespan(self) -> None:
        """The makespan covers every op without successors (the others end before them)."""
        v, prob = self.vars, self.prob
        if self.objective_ops is not None:
            for i in self.objective_ops:
                self.model.add(v.makespan >= v.end(i))
            return
        has_succ = [False] * prob.n
        for a, _, _ in prob.edges:
            has_succ[a] = True
        for i in range(prob.n):
            if not has_succ[i]:
                self.model.add(v.makespan >= v.end(i))
