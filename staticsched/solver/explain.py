"""Explanations of infeasible inputs: one sentence per problem, with names and numbers.

:func:`precheck` finds what no schedule can satisfy before any search (an op whose items cannot
be co-resident, a cross-pipe dependency without any event id); :func:`explain_stuck` turns the
list scheduler's :class:`~staticsched.solver.list_sched.Stuck` into a sentence.
"""

from __future__ import annotations

from staticsched._fields import Problems
from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware, round_up
from staticsched.model.opgraph import OpGraph
from staticsched.solver.list_sched import Stuck
from staticsched.solver.problem import Problem, ProblemMap


def precheck(graph: OpGraph, hw: Hardware, pairs: list[tuple[Problem, ProblemMap]]) -> None:
    """Raise :class:`InfeasibleError` listing every input no schedule can satisfy."""
    pr = Problems()
    for prob, pmap in pairs:
        _event_budgets(graph, prob, pmap, pr)
        _co_residency(graph, hw, prob, pmap, pr)
    pr.raise_if_any(InfeasibleError)


def _event_budgets(graph: OpGraph, prob: Problem, pmap: ProblemMap, pr: Problems) -> None:
    """Every cross-pipe dependency needs a flag; a pool of 0 ids cannot carry any."""
    counts: dict[int, list[tuple[int, int]]] = {}
    for tok in prob.tokens:
        budget = prob.budgets[tok.budget]
        if budget.capacity == 0 and budget.binding:
            for v in tok.consumers:
                counts.setdefault(tok.budget, []).append((tok.producer, v))
    for b in sorted(counts):
        key = prob.budgets[b].key
        a, v = min(counts[b])
        src, dst = graph.ops[pmap.ops[a]], graph.ops[pmap.ops[v]]
        more = len(counts[b]) - 1
        tail = f" ({more} more such edge{'s' if more != 1 else ''})" if more else ""
        if key.kind == "cross":
            pr.add(
                f"edge '{src.id}' -> '{dst.id}' crosses from core {src.core} to core {dst.core}, but "
                f"sync.cross_core_event_ids = 0 leaves no cross-core flag to carry it{tail}"
            )
        else:
            pr.add(
                f"edge '{src.id}' -> '{dst.id}' crosses pipes {src.unit} -> {dst.unit} on core "
                f"{src.core}, but sync.event_ids = 0 leaves no flag to carry it{tail}"
            )


def _co_residency(graph: OpGraph, hw: Hardware, prob: Problem, pmap: ProblemMap, pr: Problems) -> None:
    """All items one op accesses must be in their space at once."""
    spec = {(pmap.cores[sp.core], sp.name): sp for sp in prob.spaces}
    bounded = {s.name for s in hw.spaces if s.bounded}
    for gi in pmap.ops:
        op = graph.ops[gi]
        by_space: dict[str, list[str]] = {}
        for name in dict.fromkeys((*op.reads, *op.writes)):
            it = graph.item_map[name]
            if it.space in bounded and it.bytes > 0:
                by_space.setdefault(it.space, []).append(name)
        for space in sorted(by_space):
            names = by_space[space]
            sp = spec[(op.core, space)]
            if len(names) < 2:
                continue
            sizes = [graph.item_map[n].bytes for n in names]
            # the space's own capacity: flag slots are dropped when they leave an op no room
            if not _fits_together(sizes, sp.capacity, sp.alignment, sp.slot, sp.full_limit or sp.limit):
                listed = ", ".join(f"'{n}' ({b} B)" for n, b in zip(names, sizes, strict=True))
                feet = sum(round_up(b, sp.alignment) for b in sizes)
                pr.add(
                    f"op '{op.id}' needs items {listed} in {space} of core {op.core} at the same "
                    f"time: {feet} B aligned to {sp.alignment} B do not fit its capacity of "
                    f"{sp.capacity} B"
                )


def _fits_together(sizes: list[int], capacity: int, align: int, slot: int, limit: int) -> bool:
    """Whether items of these sizes can sit side by side at aligned offsets."""
    if slot:
        return len(sizes) * slot <= limit
    o = 0
    for b in sorted(sizes, reverse=True):
        if o + b > capacity:
            return False
        o += round_up(b, align)
    return True


_PROOF = {
    "infeasible": " (CP-SAT proves that no schedule satisfies these constraints)",
    "unknown": " (CP-SAT found no schedule within its limits either)",
    "": " (the list scheduler found none; the problem is too large for an exhaustive search)",
}


def explain_stuck(graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> InfeasibleError:
    """A sentence for why the list scheduler found no way to go on."""
    err = _explain(graph, prob, pmap, stuck)
    return InfeasibleError([line + _PROOF[stuck.proof] for line in err.problems])


def _explain(graph: OpGraph, prob: Problem, pmap: ProblemMap, stuck: Stuck) -> InfeasibleError:
    op = graph.ops[pmap.ops[stuck.op]]
    if stuck.kind == "memory":
        sp = prob.spaces[stuck.space]
        item = graph.items[pmap.items[stuck.item]]
        held = []
        for k in stuck.holders:
            it = graph.items[pmap.items[k]]
            last = ", ".join(f"'{graph.ops[pmap.ops[a]].id}'" for a in prob.items[k].tails)
            held.append(f"'{it.name}' ({it.bytes} B, last used by {last})")
        return InfeasibleError(
            f"op '{op.id}' on core {op.core} needs item '{item.name}' ({item.bytes} B) in "
            f"{sp.name}, but the {sp.capacity} B there are held by {', '.join(held)}, which "
            f"must stay until their last use"
        )
    if stuck.budget >= 0:
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
            return InfeasibleError(
                f"op '{op.id}' on core {op.core} needs {len(own)} {pair} at once (to {targets}) "
                f"but {field} = {cap}"
            )
        producers = ", ".join(f"'{graph.ops[pmap.ops[a]].id}'" for a in stuck.holders)
        return InfeasibleError(
            f"op '{op.id}' on core {op.core} would need another event id for {pair}, but all "
            f"{field} = {cap} are held by flags from {producers} whose consumers cannot start "
            f"before it"
        )
    return InfeasibleError(f"op '{op.id}' on core {op.core} can never start (no schedule found)")
