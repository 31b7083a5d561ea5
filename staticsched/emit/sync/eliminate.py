"""Pass 1 of sync planning: keep only the dependencies happens-before does not already imply.

Happens-before is tracked with vector clocks over *marks*: the op at position ``i`` of its
pipe issues at mark ``2i+1`` and ends at ``2i+2``, and ``clock[q] >= m`` says that point ``m``
of pipe ``q`` (and everything before it there) happens before. Joining clocks is an
element-wise maximum; because the components are independent, a point is implied by a join
exactly when it is implied by one of the joined clocks, which makes the redundancy test exact.
"""

from __future__ import annotations

import numpy as np

from staticsched.emit.sync.layout import Layout
from staticsched.model.opgraph import Edge


def eliminate(lay: Layout, deps: list[tuple[int, int, Edge]]) -> list[tuple[int, int, Edge]]:
    """Keep the dependencies not implied by program order and earlier kept flags.

    Marks here: the op at position ``i`` of its pipe issues at ``2i+1`` and ends at ``2i+2``.
    """
    n, npipes = len(lay.ids), len(lay.pipes)
    incoming: dict[int, list[tuple[int, Edge]]] = {}
    is_producer = [False] * n
    for p, c, e in deps:
        incoming.setdefault(c, []).append((p, e))
        is_producer[p] = True
    end_clock: dict[int, np.ndarray] = {}
    chain = [np.zeros(npipes, dtype=np.int64) for _ in range(npipes)]
    kept: list[tuple[int, int, Edge]] = []
    for c in sorted(range(n), key=lambda i: (lay.start[i], i)):
        q, i = lay.pipe_of[c], lay.pos[c]
        clock = chain[q].copy()
        clock[q] = 2 * i + 1
        # latest-ending first: a producer that happens before another candidate is then
        # always found implied, so what is kept is exactly the maximal producers
        for p, e in sorted(incoming.get(c, ()), key=lambda pe: (-lay.end[pe[0]], lay.pipe_of[pe[0]])):
            if clock[lay.pipe_of[p]] >= 2 * lay.pos[p] + 2:
                continue
            kept.append((p, c, e))
            np.maximum(clock, end_clock[p], out=clock)
        clock[q] = 2 * i + 2
        chain[q] = clock
        if is_producer[c]:
            end_clock[c] = clock
    return kept
