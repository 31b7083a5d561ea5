"""Does a timetable satisfy the solver's model of a problem?

The model is stricter than :meth:`Schedule.verify` in two ways: items that share bytes keep a
gap of ``Problem.reuse_gap`` cycles, and the flag lifetimes of each binding event-id pool stay
within its capacity. Shared links hold the rates fixed for the problem's transfers within their
units. The list scheduler's timetables and CP-SAT's solutions satisfy it by construction. The
LNS uses this check when it merges the results of windows solved side by side (lanes): a
lane's changes are kept only if the merged timetable still satisfies the model. The tests
hold every solver result to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from staticsched.solver.families import FAMILIES
from staticsched.solver.problem import Problem


def model_violations(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
    """Every way a timetable breaks the solver's model of ``prob``.

    Parameters
    ----------
    prob
        The problem.
    starts, offsets
        The timetable (local indices).

    Returns
    -------
    list of str
        One short line per violation (edges, pipes, offsets, holds sharing bytes, event-id
        pools); empty when the timetable satisfies the model.
    """
    out: list[str] = []
    for family in FAMILIES:
        out.extend(family.violations(prob, starts, offsets))
    return out
