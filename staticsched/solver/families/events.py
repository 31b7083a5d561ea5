"""The event-id family: a flag lifetime (a :class:`~staticsched.solver.problem.Token`) runs
from its producer's end to its first consumer's start plus the latency; each binding pool of
event ids (a pipe pair, or a core pair) holds at most its capacity of them at once. A
lifetime is counted only when its producer runs after every rival of some consumer (else the
flag is redundant: another one already orders them). :class:`EventTracker` is the list
scheduler's view."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import attrs
from ortools.sat.python import cp_model

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.solver.families.base import Edge, Group, Passive, Stuck
from staticsched.solver.list_prep import Prep
from staticsched.solver.problem import Problem, ProblemMap, Token
from staticsched.solver.tokens import event_budgets, flag_tokens
from staticsched.solver.variables import Variables


@attrs.define
class EventVars:
    """The family's variables, per token of a binding pool.

    Attributes
    ----------
    first : dict token -> LinearExpr
        First start among the token's consumers.
    token : dict token -> IntervalVar
        The flag lifetime, optional with ``present`` unless mandatory.
    """

    first: dict[int, cp_model.LinearExprT] = attrs.Factory(dict)
    first_var: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    size: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    present: dict[int, cp_model.IntVar] = attrs.Factory(dict)
    token: dict[int, cp_model.IntervalVar] = attrs.Factory(dict)


def event_vars(v: Variables) -> EventVars:
    return v.of["events"]


class Events(Passive):
    name = "events"

    def attach(self, prob: Problem, pmap: ProblemMap, group: Group) -> tuple[Problem, ProblemMap]:
        """The flag tokens and event-id pools (:mod:`~staticsched.solver.tokens`)."""
        # tokens depend on pipes, edges and items only: cores running the same program share them
        key = ("events", prob)
        if key not in group.cache:
            graph, local = group.graph, group.local
            op_items: list[list[int]] = [[] for _ in range(prob.n)]
            for k, gi in enumerate(pmap.items):
                for i, _ in graph.accesses[graph.items[gi].name]:
                    op_items[local[i]].append(k)
            found = flag_tokens(prob.n, prob.pipe_of, prob.pipes, prob.edges)
            group.cache[key] = event_budgets(found, op_items, prob.items, prob.spaces, prob.sync,
                                             prob.places)
        tokens, budgets = group.cache[key]
        return attrs.evolve(prob, tokens=tokens, budgets=budgets), pmap

    def precheck(self, graph: OpGraph, hw: Hardware, prob: Problem, pmap: ProblemMap) -> list[str]:
        """Every cross-pipe dependency needs a flag; a pool of 0 ids cannot carry any."""
        counts: dict[int, list[tuple[int, int]]] = {}
        for tok in prob.tokens:
            budget = prob.budgets[tok.budget]
            if budget.capacity == 0 and budget.binding:
                for v in tok.consumers:
                    counts.setdefault(tok.budget, []).append((tok.producer, v))
        out = []
        for b in sorted(counts):
            key = prob.budgets[b].key
            a, v = min(counts[b])
            src, dst = graph.ops[pmap.ops[a]], graph.ops[pmap.ops[v]]
            more = len(counts[b]) - 1
            tail = f" ({more} more such edge{'s' if more != 1 else ''})" if more else ""
            if key.kind == "cross":
                out.append(f"edge '{src.id}' -> '{dst.id}' crosses from core {src.core} to core "
                           f"{dst.core}, but {prob.sync.no_cross_flag} leaves no cross-core "
                           f"flag to carry it{tail}")
            else:
                out.append(f"edge '{src.id}' -> '{dst.id}' crosses pipes {src.unit} -> {dst.unit} "
                           f"on core {src.core}, but sync.event_ids = 0 leaves no flag to carry "
                           f"it{tail}")
        return out

    def tracker(self, prob: Problem, prep: Prep) -> EventTracker:
        return EventTracker(prob, prep)

    def explain(self, graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> str | None:
        if stuck.kind != self.name:
            return None
        op = graph.ops[pmap.ops[stuck.op]]
        key = prob.budgets[stuck.budget].key
        cap = prob.budgets[stuck.budget].capacity
        if key.kind == "cross":
            pair = f"cross-core flags core {pmap.cores[key.core]} -> core {pmap.cores[key.peer]}"
            field = "cross_core_event_ids"
        else:
            pair = f"flags {key.src} -> {key.dst} on core {pmap.cores[key.core]}"
            field = "event_ids"
        own = [t for t in prob.tokens if t.producer == stuck.op and t.budget == stuck.budget]
        if not stuck.holders:
            targets = ", ".join(f"'{graph.ops[pmap.ops[t.consumers[0]]].id}'" for t in own)
            return (f"op '{op.id}' on core {op.core} needs {len(own)} {pair} at once (to "
                    f"{targets}) but {field} = {cap}")
        producers = ", ".join(f"'{graph.ops[pmap.ops[a]].id}'" for a in stuck.holders)
        return (f"op '{op.id}' on core {op.core} would need another event id for {pair}, but all "
                f"{field} = {cap} are held by flags from {producers} whose consumers cannot "
                f"start before it")

    def variables(self, v: Variables) -> None:
        model, prob = v.model, v.prob
        ev = v.of[self.name] = EventVars()
        for k, tok in enumerate(prob.tokens):
            if not prob.budgets[tok.budget].binding:
                continue
            if len(tok.consumers) == 1:
                first = v.start[tok.consumers[0]]
            else:
                # the lifetime must reach the *first* consumer exactly: a shorter interval
                # would undercount, so this is an equality, not a bound
                first = model.new_int_var(0, v.horizon, f"tf{k}")
                model.add_min_equality(first, [v.start[c] for c in tok.consumers])
                ev.first_var[k] = first
            ev.first[k] = first
            # every consumer starts at least ``latency`` after the producer ends
            size = model.new_int_var(tok.end(tok.latency), v.horizon + tok.end(tok.latency), f"ts{k}")
            ev.size[k] = size
            begin, end = v.end(tok.producer), first + tok.end(0)
            if tok.mandatory:
                ev.token[k] = model.new_interval_var(begin, size, end, f"tok{k}")
            else:
                present = model.new_bool_var(f"tp{k}")
                ev.present[k] = present
                ev.token[k] = model.new_optional_interval_var(begin, size, end, present, f"tok{k}")

    def constrain(self, v: Variables, whole: bool) -> None:
        model, prob, ev = v.model, v.prob, event_vars(v)
        # a token is counted when its producer runs after every rival of some consumer
        for k in sorted(ev.present):
            tok = prob.tokens[k]
            present = ev.present[k]
            for rivals in tok.triggers:
                model.add_bool_or([present, *(v.runs_after(tok.producer, r).Not() for r in rivals)])
        # at most ``event_ids`` flag lifetimes live per pipe pair (or core pair)
        by_budget: dict[int, list[int]] = {}
        for k in sorted(ev.token):
            by_budget.setdefault(prob.tokens[k].budget, []).append(k)
        for b in sorted(by_budget):
            ks = by_budget[b]
            cap = prob.budgets[b].capacity
            lat = max(prob.tokens[k].end(0) for k in ks)
            tail = [v.after_makespan(lat, f"mk_budget{b}")] if whole else []
            model.add_cumulative(
                [*(ev.token[k] for k in ks), *tail], [1] * len(ks) + [cap] * len(tail), cap
            )

    def hint(self, model: cp_model.CpModel, v: Variables, starts: Sequence[int],
             offsets: Sequence[int]) -> None:
        prob, ev, dur = v.prob, event_vars(v), v.prob.dur
        for k in sorted(ev.token):
            tok = prob.tokens[k]
            first = min(starts[c] for c in tok.consumers)
            if k in ev.first_var:
                model.add_hint(ev.first_var[k], first)
            model.add_hint(ev.size[k], tok.end(first) - starts[tok.producer] - dur[tok.producer])
            if k in ev.present:
                present = any(all(starts[r] < starts[tok.producer] for r in rv) for rv in tok.triggers)
                model.add_hint(ev.present[k], present)

    def violations(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[str]:
        dur = prob.dur
        out: list[str] = []
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
        return out

    def bounds(self, prob: Problem, heads: Sequence[int], tails: Sequence[int],
               core_names: tuple[int, ...] | None) -> list[tuple[str, int]]:
        """None: a pool short of ids delays flags, which the order decides."""
        return []

    def order_edges(self, prob: Problem, starts: Sequence[int], offsets: Sequence[int]) -> list[Edge]:
        """None: the sync planner assigns ids to the flags of the edges that need them."""
        return []


EVENTS = Events()

_ABSENT, _OPEN, _CLOSED = 1, 2, 3


class EventTracker:
    """Flag lifetimes (tokens) of binding event-id pools while the schedule is built.

    A token opens when its producer starts (its lifetime begins at the producer's end) if the
    producer runs after all rivals of some trigger, and closes when the first consumer starts.
    """

    def __init__(self, prob: Problem, prep: Prep) -> None:
        self.prob, self.prep = prob, prep
        self.state = [0] * len(prob.tokens)
        self.open_count = [0] * len(prob.budgets)
        self.closed_ends: list[list[int]] = [[] for _ in prob.budgets]
        # only binding pools constrain anything; their closed lifetimes' ends, soonest first
        self.binding = [b.binding for b in prob.budgets]
        self.ends: list[tuple[int, int]] = []  # (end, budget) heap
        # per op, the tokens it produces in binding pools: the only ones full() counts
        self.bound_tokens = [[prob.tokens[k] for k in ks if self.binding[prob.tokens[k].budget]]
                             for ks in prep.produces]
        #: op -> (pool, lifetimes it needs there) of its last refusal (see :meth:`refuses`)
        self.refused: dict[int, tuple[int, int]] = {}

    def refuses(self, i: int, end: int, start: list[int]) -> bool:
        # a refusal is remembered as (pool, lifetimes op i needs in it): the need only grows as
        # more ops start, so while that pool still has no room for it the answer stands, and
        # the retries at every later event skip the tokens' trigger checks
        seen = self.refused.get(i)
        if seen is not None:
            b, c = seen
            if self._live(b, end) + c > self.prob.budgets[b].capacity:
                return True
        b, c = self._first_full(i, end, start)
        if b < 0:
            self.refused.pop(i, None)
            return False
        self.refused[i] = (b, c)
        return True

    def stuck(self, i: int, end: int, start: list[int], rule: str) -> Stuck | None:
        b = self.full(i, end, start)
        if b < 0:
            return None
        return Stuck("events", i, end - self.prob.dur[i], budget=b, holders=self.holders(b), rule=rule)

    def full(self, i: int, end: int, start: list[int]) -> int:
        """-1 if op ``i`` may open its lifetimes, which begin at ``end``; else the full pool."""
        return self._first_full(i, end, start)[0]

    def _first_full(self, i: int, end: int, start: list[int]) -> tuple[int, int]:
        """The first pool without room for op ``i``'s lifetimes and how many it needs there;
        ``(-1, 0)`` when every pool has room."""
        toks = self.bound_tokens[i]
        if not toks:
            return -1, 0
        need: dict[int, int] = {}
        for tok in toks:
            if _present(tok, start):
                need[tok.budget] = need.get(tok.budget, 0) + 1
        for b, c in need.items():
            if self._live(b, end) + c > self.prob.budgets[b].capacity:
                return b, c
        return -1, 0

    def _live(self, b: int, end: int) -> int:
        """Lifetimes of pool ``b`` open at ``end``: the open ones and the closed ones ending later."""
        return self.open_count[b] + sum(1 for e in self.closed_ends[b] if e > end)

    def begin(self, i: int, t: int, start: list[int]) -> None:
        """Op ``i`` starts at ``t`` (``start[i]`` already set): open and close lifetimes."""
        for k in self.prep.produces[i]:
            tok = self.prob.tokens[k]
            if _present(tok, start):
                self.state[k] = _OPEN
                self.open_count[tok.budget] += 1
            else:
                self.state[k] = _ABSENT
        for k in self.prep.consumes[i]:
            if self.state[k] == _OPEN:
                tok = self.prob.tokens[k]
                self.state[k] = _CLOSED
                self.open_count[tok.budget] -= 1
                if self.binding[tok.budget]:
                    e = tok.end(t)
                    self.closed_ends[tok.budget].append(e)
                    heapq.heappush(self.ends, (e, tok.budget))

    def prune(self, t: int) -> None:
        dirty = set()
        while self.ends and self.ends[0][0] <= t:
            dirty.add(heapq.heappop(self.ends)[1])
        for b in dirty:
            self.closed_ends[b] = [e for e in self.closed_ends[b] if e > t]

    def next_change(self) -> int | None:
        return self.ends[0][0] if self.ends else None

    def holders(self, b: int) -> tuple[int, ...]:
        """Producers whose lifetimes in pool ``b`` are open."""
        return tuple(
            tok.producer
            for k, tok in enumerate(self.prob.tokens)
            if tok.budget == b and self.state[k] == _OPEN
        )


def _present(tok: Token, start: list[int]) -> bool:
    """The producer (starting now) runs after all rivals of at least one trigger."""
    return any(all(start[r] >= 0 for r in rv) for rv in tok.triggers)
