"""A complete CP-SAT hint from a feasible timetable.

CP-SAT profits from complete hints only, so every variable gets a value consistent with the
timetable: every family's (op starts, live-range ends and hold sizes, address slots, token
firsts, sizes and presence), every order literal created while building, and the makespan.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from staticsched.solver.families import FAMILIES
from staticsched.solver.list_sched import Timetable
from staticsched.solver.variables import Variables


def add_hints(
    model: cp_model.CpModel,
    variables: Variables,
    tt: Timetable,
    objective_ops: Sequence[int] | None = None,
) -> None:
    """Replace the model's hints with the values of ``tt``."""
    v, prob = variables, variables.prob
    s, dur = tt.starts, prob.dur
    model.clear_hints()
    for family in FAMILIES:
        family.hint(model, v, s, tt.offsets)
    for (lo, hi), lit in sorted(v.order_literals.items()):
        model.add_hint(lit, s[hi] > s[lo])
    # the makespan variable may cover a window only: hint its own maximum
    covered = max(s[i] + dur[i] for i in objective_ops) if objective_ops else tt.makespan
    model.add_hint(v.makespan, covered)
    for size in v.tail_sizes:
        model.add_hint(size, v.horizon + 1 - covered)
