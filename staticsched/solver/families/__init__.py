"""The solver's resource families, one module each, registered in :data:`FAMILIES`.

A family is a kind of resource a problem's ops compete for: the pipes (and the edges that
order ops), the memory spaces, the event-id pools, the shared links. Each module provides,
behind :class:`~.base.Family`, its data for a problem (``attach``), its prechecks and
explanations of infeasible inputs, its CP-SAT variables, constraints and hints, its
list-scheduler tracker, its feasibility check of a timetable against the model, its lower
bounds and the edges its order adds after solving (so that a timetable is the longest path
over the edges and those orders). Decomposition, the CP-SAT model, the hints, the list
scheduler's admission, the prechecks and explanations, the feasibility check, the lower bound
and the semi-active normalisation iterate over :data:`FAMILIES` and name none of them (the
list scheduler wires the memory family's placement and the link family's rates by their
roles); docs/design.md, "How to add a resource family", says what a new family touches.

The order of :data:`FAMILIES` is the order in which variables, constraints and hints enter a
model: it is part of what makes a model, and so a result, reproducible.
"""

from __future__ import annotations

from staticsched.solver.families.base import Family
from staticsched.solver.families.events import EVENTS
from staticsched.solver.families.links import LINKS
from staticsched.solver.families.memory import MEMORY
from staticsched.solver.families.pipes import PIPES

#: every family, in model order
FAMILIES: tuple[Family, ...] = (PIPES, MEMORY, EVENTS, LINKS)

__all__ = ["FAMILIES", "Family"]
