"""Semi-active normalisation of a timetable (DESIGN §5), on a problem's local indices.

Fix each pipe's order (by start, ties by index) and every address, derive the address-reuse
edges, and recompute every start as the longest path -- the earliest an in-order executor
reaches. This is the longest path over ``graph.edges`` plus
:func:`staticsched.model.deps.address_edges`, done in index space so that 10^4-op cores take
milliseconds: of the items that shared a byte with a later item only the *latest* one per
byte gets an edge, since the earlier ones reach the later item through it (same-item edges
chain every access of an item after its first write, and a path that changes pipes carries at
least the latency of a direct edge). ``tests/solver/test_solver_normalize.py`` checks equality with
a reference longest path on op names (``tests/oracles.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from staticsched.model.graphs import longest_starts
from staticsched.solver.families import FAMILIES
from staticsched.solver.problem import Problem


def semi_active(prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[int]:
    """Semi-active starts: the earliest under the pipe orders of ``starts``, the edges, the
    address edges of ``offsets`` and the order of every shared link (rates fixed).

    Parameters
    ----------
    prob
        The problem.
    starts, offsets
        A feasible timetable (local indices); it fixes the pipe orders and which items reuse
        which bytes.

    Returns
    -------
    list of int
        The starts, none later than in ``starts``.
    """
    # each family's order: the pipes' sequences, the address reuses of ``offsets``, each shared
    # link's order as a resource flow (moving ops earlier keeps every link within its
    # bandwidth: the problem's rates are fixed)
    extra = [e for family in FAMILIES for e in family.order_edges(prob, starts, offsets)]
    out = longest_starts(prob.dur, (*prob.edges, *extra))
    if out is None:
        raise AssertionError("pipe order contradicts the edges: the timetable was not feasible")
    return out
