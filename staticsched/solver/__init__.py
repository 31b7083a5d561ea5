"""The solver: list scheduler, CP-SAT model, lower bounds, decomposition (DESIGN §5).

``solve(graph, hw, ...)`` is the entry point; the other modules are its parts.
"""

from staticsched.solver.bounds import Bound, lower_bound
from staticsched.solver.decompose import build_problems
from staticsched.solver.list_sched import Stuck, Timetable, list_schedule
from staticsched.solver.problem import Problem, ProblemMap
from staticsched.solver.solve import solve

__all__ = [
    "Bound",
    "Problem",
    "ProblemMap",
    "Stuck",
    "Timetable",
    "build_problems",
    "list_schedule",
    "lower_bound",
    "solve",
]
