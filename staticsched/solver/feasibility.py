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

import itertools
from collections.abc import Sequence

from staticsched.model.links import peak_usage
from staticsched.solver.links import holds_of
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
    dur = prob.dur
    out: list[str] = []
    for a, b, lat in prob.edges:
        if starts[a] + dur[a] + lat > starts[b]:
            out.append(f"edge {a}->{b}")
    by_pipe: dict[int, list[int]] = {}
    for i, p in enumerate(prob.pipe_of):
        by_pipe.setdefault(p, []).append(i)
    for ops in by_pipe.values():
        ops.sort(key=lambda i: starts[i])
        for x, y in itertools.pairwise(ops):
            if starts[x] + dur[x] > starts[y]:
                out.append(f"pipe overlap {x},{y}")
    holds: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for k, it in enumerate(prob.items):
        sp = prob.spaces[it.space]
        if not sp.binding:
            continue
        o = offsets[k]
        if o % sp.alignment or o < 0 or (sp.slot and o + it.footprint > sp.limit):
            out.append(f"item {k} offset {o}")
        if not sp.slot and o + it.bytes > sp.capacity:
            out.append(f"item {k} offset {o}")
        begin, end = prob.hold(k, starts)
        holds.setdefault(it.space, []).append((begin, end, o, o + it.footprint, k))
    for lst in holds.values():
        active: list[tuple[int, int, int, int]] = []  # (end, lo, hi, item) of holds still live
        for s1, e1, o1, p1, k1 in sorted(lst):
            active = [h for h in active if h[0] > s1]
            for _, o2, p2, k2 in active:
                if o1 < p2 and o2 < p1:
                    out.append(f"items {k2},{k1} share bytes while held")
            active.append((e1, o1, p1, k1))
    live: dict[int, list[tuple[int, int]]] = {}
    for tok in prob.tokens:
        if not prob.budgets[tok.budget].binding:
            continue
        u = tok.producer
        if any(all(starts[r] < starts[u] for r in rv) for rv in tok.triggers):
            first = min(starts[c] for c in tok.consumers)
            live.setdefault(tok.budget, []).append((starts[u] + dur[u], tok.end(first)))
    for b, ivs in live.items():
        events = sorted([(s, 1) for s, e in ivs if e > s] + [(e, -1) for s, e in ivs if e > s])
        level = 0
        for _, d in events:
            level += d
            if level > prob.budgets[b].capacity:
                out.append(f"budget {b} exceeded")
                break
    for k, lk in enumerate(prob.links):
        on_link = [(b, e, u) for _, b, e, u, on in holds_of(prob, starts) if k in on]
        peak, at = peak_usage(on_link)
        if peak > lk.units:
            out.append(f"link {lk.name} holds {peak} units at {at}, has {lk.units}")
    return out
