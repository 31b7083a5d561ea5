"""CP-SAT variables of a :class:`~staticsched.solver.problem.Problem`.

Created in a fixed order (ops, then each family's in the order of
:data:`~staticsched.solver.families.FAMILIES`, then the makespan) with readable names, so that
the same problem always gives the same model. Auxiliary "op ``a`` runs before op ``b``"
literals are created on demand by :meth:`Variables.runs_after`, also in a fixed order because
the constraint builders ask for them in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model_helper import Literal

from staticsched.solver.problem import Problem


class Variables:
    """Handles of one model's variables: the ops' own, and each resource family's under its
    name (``of["memory"]``, ``of["events"]``: :mod:`staticsched.solver.families`).

    Attributes
    ----------
    start : list of IntVar
        Op starts; ``interval[i]`` is the fixed-size interval ``[start, start + dur)``.
    of : dict family name -> its variables
    makespan : IntVar
        Made by :meth:`add_makespan`, after every family's variables.
    """

    def __init__(
        self,
        model: cp_model.CpModel,
        prob: Problem,
        *,
        horizon: int,
        release: Sequence[int],
        deadline: Sequence[int],
        fixed_offsets: dict[int, int] | None = None,
    ) -> None:
        self.model = model
        self.prob = prob
        self.horizon = horizon
        #: item offsets a window keeps (mixed spaces)
        self.fixed_offsets = fixed_offsets or {}
        n = prob.n
        self.start = [model.new_int_var(release[i], deadline[i] - prob.dur[i], f"s{i}") for i in range(n)]
        self.interval = [
            model.new_fixed_size_interval_var(self.start[i], prob.dur[i], f"op{i}") for i in range(n)
        ]
        self._after: dict[tuple[int, int], cp_model.IntVar] = {}
        self.of: dict[str, Any] = {}
        #: sizes of the intervals made by :meth:`after_makespan` (``horizon + 1 - makespan``)
        self.tail_sizes: list[cp_model.IntVar] = []

    def add_makespan(self, lower: int) -> None:
        self.makespan = self.model.new_int_var(lower, self.horizon, "makespan")

    def end(self, i: int) -> cp_model.LinearExprT:
        return self.start[i] + self.prob.dur[i]
    def after_makespan(self, slack: int, name: str) -> cp_model.IntervalVar:
        """``[makespan + slack, horizon + slack + 1)``: added to a cumulative at full demand it
        tells the resource reasoning that every interval there ends by ``makespan + slack``
        (OR-Tools' rcpsp_sat "interval makespan"). Valid because holds end at a tail access end
        plus ``hold`` and flag lifetimes at a consumer start plus their latency plus one."""
        end = self.horizon + slack + 1
        size = self.model.new_int_var(1, end, f"{name}_size")
        self.tail_sizes.append(size)
        return self.model.new_interval_var(self.makespan + slack, size, end, name)

    def runs_after(self, a: int, b: int) -> Literal:
        """Literal "op ``a`` starts after op ``b`` ends" for two ops on one pipe."""
        lo, hi = min(a, b), max(a, b)
        lit = self._after.get((lo, hi))
        if lit is None:
            # lit: hi runs after lo; its negation: lo runs after hi (one pipe: one of the two)
            lit = self.model.new_bool_var(f"o{lo}_{hi}")
            self.model.add(self.start[hi] >= self.end(lo)).only_enforce_if(lit)
            self.model.add(self.start[lo] >= self.end(hi)).only_enforce_if(lit.Not())
            self._after[(lo, hi)] = lit
        return lit if a == hi else lit.Not()

    @property
    def order_literals(self) -> dict[tuple[int, int], cp_model.IntVar]:
        """``(lo, hi) -> literal "hi runs after lo"``, every one created so far."""
        return self._after
