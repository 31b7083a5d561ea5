"""The objective: minimise the makespan."""

from __future__ import annotations

from ortools.sat.python import cp_model

from staticsched.solver.variables import Variables


def minimise_makespan(model: cp_model.CpModel, variables: Variables) -> None:
    """Minimise the end of the last op (the only term: secondary terms were not needed)."""
    model.minimize(variables.makespan)
