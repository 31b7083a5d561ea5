"""The pipe family: each op occupies its pipe (one op at a time per pipe), after its
predecessors (the graph's edges with their latencies)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ortools.sat.python import cp_model

from staticsched.solver.families.base import Edge, Passive
from staticsched.solver.jackson import jackson_bound
from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables


def _by_pipe(prob: Problem) -> dict[int, list[int]]:
    by_pipe: dict[int, list[int]] = {}
    for i, p in enumerate(prob.pipe_of):
        by_pipe.setdefault(p, []).append(i)
    return by_pipe


class Pipes(Passive):
    name = "pipes"

    def variables(self, v: Variables) -> None:
        """The ops' starts and intervals are the model's own (:class:`.Variables`)."""

    def constrain(self, v: Variables, whole: bool) -> None:
        model, prob = v.model, v.prob
        # each pipe runs one op at a time
        by_pipe = _by_pipe(prob)
        for p in sorted(by_pipe):
            if len(by_pipe[p]) > 1:
                model.add_no_overlap([v.interval[i] for i in by_pipe[p]])
        # start[dst] >= end[src] + latency for every edge
        for a, b, lat in prob.edges:
            model.add(v.start[b] >= v.end(a) + lat)

    def hint(self, model: cp_model.CpModel, v: Variables, starts: Sequence[int],
             offsets: Sequence[int]) -> None:
        for i in range(v.prob.n):
            model.add_hint(v.start[i], starts[i])

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        dur = prob.dur
        out: list[str] = []
        for a, b, lat in prob.edges:
            if starts[a] + dur[a] + lat > starts[b]:
                out.append(f"edge {a}->{b}")
        for ops in _by_pipe(prob).values():
            ops.sort(key=lambda i: starts[i])
            for x, y in itertools.pairwise(ops):
                if starts[x] + dur[x] > starts[y]:
                    out.append(f"pipe overlap {x},{y}")
        return out

    def bounds(self, prob: Problem, heads: Sequence[int], tails: Sequence[int],
               core_names: tuple[int, ...] | None) -> list[tuple[str, int]]:
        """Per pipe: its ops run one at a time, each no earlier than its head and each followed
        by its tail (the longest paths of the edges), so Jackson's preemptive schedule of them
        bounds the makespan (:func:`~staticsched.solver.jackson.jackson_bound`). It is at
        least ``min head + sum of durations + min tail``, and more where a pipe's work cannot
        start early or must end early: a task's loads waiting for the task before it."""
        jobs: dict[int, list[tuple[int, int, int]]] = {}
        for i in range(prob.n):
            jobs.setdefault(prob.pipe_of[i], []).append((heads[i], prob.dur[i], tails[i] - prob.dur[i]))
        out = []
        for p, (core, unit) in enumerate(prob.pipes):
            label = f"{core_names[core] if core_names else core}:{unit}"
            out.append((f"pipe {label}", jackson_bound(jobs.get(p, ()))))
        return out

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
        """Each pipe's ops in the order of their starts (ties by index)."""
        chains: list[Edge] = []
        for ops in _by_pipe(prob).values():
            ops.sort(key=lambda i: (starts[i], i))
            chains.extend((a, b, 0) for a, b in itertools.pairwise(ops))
        return chains


PIPES = Pipes()
