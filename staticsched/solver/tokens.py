"""Flag tokens and event-id pools of a problem: which flags the sync planner can keep, and
which pools they can overflow.

Flag lifetimes (DESIGN §5, refinement 9 of docs/design.md)
----------------------------------------------------------
The sync planner keeps a flag ``u -> v`` (pipe ``Q`` to pipe ``P``) only when the dependency is
not already implied by happens-before. Two facts bound what it can keep: if ``u`` is not the
last of ``v``'s predecessors on ``Q``, the last one implies it (program order on ``Q``); if
another successor of ``u`` on ``P`` starts before ``v``, that one implies it (program order on
``P``). So at most one flag leaves each producer per destination pipe, it exists only when the
producer is the last same-pipe predecessor of at least one consumer, and it is live from the
producer's end to the first start among its consumers on ``P`` (plus ``flag_latency``). A
:class:`Token` is that interval; counting tokens per (core, src pipe, dst pipe) bounds the
planner's live flags from above without counting every edge (which would wrongly reject fan-in
and fan-out at one event id).
"""

from __future__ import annotations

from collections.abc import Sequence

from staticsched.model.graphs import topological_order
from staticsched.model.hardware import SyncModel
from staticsched.model.pools import PoolKey
from staticsched.solver.problem import Budget, ItemSpec, SpaceSpec, Token


def flag_tokens(
    n: int,
    pipe_of: Sequence[int],
    pipes: Sequence[tuple[int, str]],
    edges: Sequence[tuple[int, int, int]],
) -> tuple[list[Token], list[PoolKey]]:
    """The tokens of a problem's ops and the pools they draw from (a token's ``budget`` is an
    index into the pools)."""
    succ_by_pipe: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(n)]
    pred_by_pipe: list[dict[int, list[int]]] = [{} for _ in range(n)]
    for a, b, lat in edges:
        if pipe_of[a] != pipe_of[b]:
            succ_by_pipe[a].setdefault(pipe_of[b], []).append((b, lat))
            pred_by_pipe[b].setdefault(pipe_of[a], []).append(a)
    reach = _Reach(n, edges, pipe_of) if n <= REACH_LIMIT else None
    budget_index: dict[PoolKey, int] = {}
    raw: list[tuple[int, int, tuple[int, ...], int, tuple[tuple[int, ...], ...]]] = []
    for u in range(n):
        q = pipe_of[u]
        for p in sorted(succ_by_pipe[u]):
            cons = sorted(succ_by_pipe[u][p])
            triggers = tuple(
                tuple(r for r in pred_by_pipe[v][q] if r != u)
                for v, _ in cons
                if reach is None or not reach.bypassed(u, v)
            )
            if not triggers:
                continue
            (cq, uq), (cp, up) = pipes[q], pipes[p]
            key = PoolKey.flag(cq, uq, up) if cq == cp else PoolKey.cross(cq, cp)
            b = budget_index.setdefault(key, len(budget_index))
            raw.append((u, b, tuple(v for v, _ in cons), cons[0][1], triggers))
    keys = [key for key, _ in sorted(budget_index.items(), key=lambda kv: kv[1])]
    return [Token(*r) for r in raw], keys


def event_budgets(
    found: tuple[list[Token], list[PoolKey]],
    op_items: list[list[int]],
    items: Sequence[ItemSpec],
    spaces: Sequence[SpaceSpec],
    sync: SyncModel,
    places: Sequence[int] = (),
) -> tuple[list[Token], list[Budget]]:
    """Event-id pools, each marked binding unless it provably cannot overflow (``places``:
    :attr:`~.problem.Problem.places`, where a cross-core pool's ids depend on the cores' places
    on a split chip).

    A token whose producer and some consumer access one item ``X`` lives inside ``X``'s hold
    (``X`` is live from its first access, which is not after the producer, to past the
    consumer's end plus the flag latency; the token ends one cycle after the consumer starts,
    within the consumer's duration). Tokens matched to distinct such items can be live
    no more often than those items can be resident at once.
    """
    tokens, keys = found
    by_budget: list[list[Token]] = [[] for _ in keys]
    for tok in tokens:
        by_budget[tok.budget].append(tok)
    out = []
    for b, key in enumerate(keys):
        # a counting id holds several outstanding flags
        placed = PoolKey.cross(places[key.core], places[key.peer]) if places and key.kind == "cross" else key
        cap = placed.budget(sync) * key.capacity(sync)
        toks = by_budget[b]
        binding = len(toks) > cap and _may_overflow(toks, op_items, items, spaces, cap)
        out.append(Budget(key, cap, binding))
    return tokens, out


def _may_overflow(
    toks: list[Token],
    op_items: list[list[int]],
    items: Sequence[ItemSpec],
    spaces: Sequence[SpaceSpec],
    cap: int,
) -> bool:
    used: set[int] = set()
    per_space: dict[int, int] = {}
    for tok in toks:
        shared: set[int] = set()
        mine = set(op_items[tok.producer])
        for v in tok.consumers:
            shared |= mine.intersection(op_items[v])
        free = sorted(shared - used)
        if not free:
            return True
        used.add(free[0])
        s = items[free[0]].space
        per_space[s] = per_space.get(s, 0) + 1
    live = 0
    for s, count in per_space.items():
        sp = spaces[s]
        smallest = sp.slot or min(it.footprint for it in items if it.space == s)
        live += min(count, sp.limit // smallest if sp.binding else count)
    return live > cap


#: problems up to this many ops get the reachability refinement of flag tokens (bitsets of
#: n bits per op: 10^4 ops take about 25 MB)
REACH_LIMIT = 20000


class _Reach:
    """Ancestor and descendant sets as integer bitsets."""

    def __init__(self, n: int, edges: Sequence[tuple[int, int, int]], pipe_of: Sequence[int]) -> None:
        succ: list[list[int]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        for a, b, _ in edges:
            succ[a].append(b)
            pred[b].append(a)
        order = topological_order(succ)
        self.anc = [0] * n
        for i in order:
            acc = 0
            for a in pred[i]:
                acc |= self.anc[a] | (1 << a)
            self.anc[i] = acc
        self.desc = [0] * n
        for i in reversed(order):
            acc = 0
            for b in succ[i]:
                acc |= self.desc[b] | (1 << b)
            self.desc[i] = acc
        self.mask: dict[int, int] = {}
        for i in range(n):
            self.mask[pipe_of[i]] = self.mask.get(pipe_of[i], 0) | (1 << i)
        self.pipe_of = pipe_of

    def bypassed(self, u: int, v: int) -> bool:
        """Some later op on ``u``'s pipe (a descendant of ``u``) is an ancestor of ``v``: then
        ``u -> v`` is implied by program order and that path in every schedule."""
        return bool(self.desc[u] & self.mask[self.pipe_of[u]] & self.anc[v])
