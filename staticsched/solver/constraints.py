"""CP-SAT constraints of a problem, one method per constraint family (DESIGN §5).

:meth:`Constraints.add_all` fixes the order in which families are added, so the model is
built identically every time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from staticsched.solver.problem import Problem
from staticsched.solver.variables import Variables


class Constraints:
    """Adds every constraint family of ``prob`` to ``model`` over ``variables``."""

    def __init__(
        self,
        model: cp_model.CpModel,
        prob: Problem,
        variables: Variables,
        *,
        objective_ops: Sequence[int] | None = None,
    ) -> None:
        self.model = model
        self.prob = prob
        self.vars = variables
        #: the makespan covers these ops only (a window of a larger schedule), else all
        self.objective_ops = objective_ops
        # holds and lifetimes end by the makespan only when it covers every op
        self.whole = objective_ops is None

    def add_all(self) -> None:
        self._pipes_no_overlap()
        self._precedences()
        self._live_ranges()
        self._memory_capacity()
        self._memory_addresses()
        self._flag_presence()
        self._flag_budgets()
        self._link_capacity()
        self._makespan()

    def _pipes_no_overlap(self) -> None:
        """Each pipe runs one op at a time."""
        by_pipe: dict[int, list[int]] = {}
        for i, p in enumerate(self.prob.pipe_of):
            by_pipe.setdefault(p, []).append(i)
        for p in sorted(by_pipe):
            if len(by_pipe[p]) > 1:
                self.model.add_no_overlap([self.vars.interval[i] for i in by_pipe[p]])

    def _precedences(self) -> None:
        """``start[dst] >= end[src] + latency`` for every edge."""
        v = self.vars
        for a, b, lat in self.prob.edges:
            self.model.add(v.start[b] >= v.end(a) + lat)

    def _live_ranges(self) -> None:
        """An item's hold reaches at least the end of each of its tail accesses."""
        v = self.vars
        for k in sorted(v.live_end_var):
            for a in self.prob.items[k].tails:
                self.model.add(v.live_end_var[k] >= v.end(a))

    def _memory_capacity(self) -> None:
        """Held bytes per binding (core, space) stay within its limit."""
        v, prob = self.vars, self.prob
        by_space: dict[int, list[int]] = {}
        for k in sorted(v.hold):
            by_space.setdefault(prob.items[k].space, []).append(k)
        for s in sorted(by_space):
            ks = by_space[s]
            limit = prob.spaces[s].limit
            tail = [v.after_makespan(prob.reuse_gap, f"mk_space{s}")] if self.whole else []
            self.model.add_cumulative(
                [*(v.hold[k] for k in ks), *tail],
                [*(prob.items[k].footprint for k in ks), *([limit] * len(tail))],
                limit,
            )

    def _memory_addresses(self) -> None:
        """Spaces with mixed item sizes: concrete aligned offsets, no two items overlapping in
        both hold time and bytes. Uniform spaces get slots after solving by interval colouring
        instead, which always succeeds when the cumulative holds; measured at the same
        deterministic budget (5 units) on 60- and 180-op tile pipelines, the colouring model
        reached makespans 2011 and 6060, the 2-D no-overlap model 2108 and 6207."""
        v, prob = self.vars, self.prob
        by_space: dict[int, list[int]] = {}
        for k in sorted(v.place):
            by_space.setdefault(prob.items[k].space, []).append(k)
        for s in sorted(by_space):
            ks = by_space[s]
            self.model.add_no_overlap_2d([v.hold[k] for k in ks], [v.place[k] for k in ks])

    def _flag_presence(self) -> None:
        """A token is counted when its producer runs after every rival of some consumer."""
        v, prob = self.vars, self.prob
        for k in sorted(v.token_present):
            tok = prob.tokens[k]
            present = v.token_present[k]
            for rivals in tok.triggers:
                self.model.add_bool_or([present, *(v.runs_after(tok.producer, r).Not() for r in rivals)])

    def _flag_budgets(self) -> None:
        """At most ``event_ids`` flag lifetimes live per pipe pair (or core pair)."""
        v, prob = self.vars, self.prob
        by_budget: dict[int, list[int]] = {}
        for k in sorted(v.token):
            by_budget.setdefault(prob.tokens[k].budget, []).append(k)
        for b in sorted(by_budget):
            ks = by_budget[b]
            cap = prob.budgets[b].capacity
            lat = max(prob.tokens[k].end(0) for k in ks)
            tail = [v.after_makespan(lat, f"mk_budget{b}")] if self.whole else []
            self.model.add_cumulative(
                [*(v.token[k] for k in ks), *tail], [1] * len(ks) + [cap] * len(tail), cap
            )

    def _link_capacity(self) -> None:
        """At every cycle the transfers on a link hold at most its units (rates are fixed;
        a transfer holds from its start or, in timed mode, from the end of its overhead)."""
        v, prob = self.vars, self.prob
        for k, lk in enumerate(prob.links):
            xs = [x for x in prob.xfers if k in x.links]
            if not xs:
                continue
            ivs, demands = [], []
            for x in xs:
                off = 0 if prob.link_overhead_holds else min(x.overhead, prob.dur[x.op] - 1)
                ivs.append(self.model.new_fixed_size_interval_var(
                    v.start[x.op] + off, prob.dur[x.op] - off, f"link{k}_{x.op}"))
                demands.append(x.rate)
            if self.whole:
                ivs.append(v.after_makespan(0, f"mk_link{k}"))
                demands.append(lk.units)
            self.model.add_cumulative(ivs, demands, lk.units)

    def _makespan(self) -> None:
        """The makespan covers every op without successors (the others end before them)."""
        v, prob = self.vars, self.prob
        if self.objective_ops is not None:
            for i in self.objective_ops:
                self.model.add(v.makespan >= v.end(i))
            return
        has_succ = [False] * prob.n
        for a, _, _ in prob.edges:
            has_succ[a] = True
        for i in range(prob.n):
            if not has_succ[i]:
                self.model.add(v.makespan >= v.end(i))
