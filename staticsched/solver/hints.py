"""A complete CP-SAT hint from a feasible timetable.

CP-SAT profits from complete hints only, so every variable gets a value consistent with the
timetable: op starts, live-range ends and hold sizes, address slots, token firsts, sizes and
presence, every order literal created while building, and the makespan.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

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
    for i in range(prob.n):
        model.add_hint(v.start[i], s[i])
    for k in sorted(v.hold):
        it = prob.items[k]
        end = max(s[a] + dur[a] for a in it.tails)
        if k in v.live_end_var:
            model.add_hint(v.live_end_var[k], end)
        model.add_hint(v.hold_size[k], end + prob.reuse_gap - s[it.first])
        if k in v.slot:
            model.add_hint(v.slot[k], tt.offsets[k] // prob.spaces[it.space].alignment)
    for k in sorted(v.token):
        tok = prob.tokens[k]
        first = min(s[c] for c in tok.consumers)
        if k in v.token_first_var:
            model.add_hint(v.token_first_var[k], first)
        model.add_hint(v.token_size[k], tok.end(first) - s[tok.producer] - dur[tok.producer])
        if k in v.token_present:
            present = any(all(s[r] < s[tok.producer] for r in rv) for rv in tok.triggers)
            model.add_hint(v.token_present[k], present)
    for (lo, hi), lit in sorted(v.order_literals.items()):
        model.add_hint(lit, s[hi] > s[lo])
    # the makespan variable may cover a window only: hint its own maximum
    covered = max(s[i] + dur[i] for i in objective_ops) if objective_ops else tt.makespan
    model.add_hint(v.makespan, covered)
    for size in v.tail_sizes:
        model.add_hint(size, v.horizon + 1 - covered)
