"""The solver's own view of an OpGraph: index-based, name-free scheduling problems.

A :class:`Problem` holds only structure (durations, pipes, edges with latencies, item sizes and
accesses, flag tokens and event-id pools) and no op or item names, so two cores running the
same program produce *equal* problems: the problem itself is the canonical signature used to
solve identical cores once. :class:`ProblemMap` maps local indices back to the graph.

The modules around it: :mod:`.decompose` builds the problems of a graph (groups of cores
sharing no cross-core edge), :mod:`.tokens` finds the flag tokens and event-id pools,
:mod:`.paths` holds the longest paths and topological orders of a problem.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import attrs
import numpy as np

from staticsched.model.hardware import SyncModel
from staticsched.model.pools import PoolKey
from staticsched.solver.link_values import LinkSpec, Xfer


@attrs.frozen
class SpaceSpec:
    """One bounded (core, space) with items in it.

    ``slot`` is the common footprint when every item rounds up to the same aligned size (then
    addresses are slots ``k * slot`` for ``k < limit // slot``), else 0 ("mixed": any aligned
    offset with ``offset + bytes <= capacity``). ``limit`` is the capacity the cumulative
    constraint uses. ``binding`` is False when every item fits at its own address at once (then
    items never share bytes and need no capacity or address constraint at all).
    """

    core: int
    name: str
    capacity: int
    alignment: int
    slot: int
    limit: int
    binding: bool
    #: the limit is ``event_ids`` slots, fewer than the capacity holds (flag slots: a
    #: restriction of the user's problem, see :func:`~.decompose.build_problems`), and the
    #: limit without that cut (:func:`relax_flag_slots` restores it)
    capped: bool = False
    full_limit: int = 0


@attrs.frozen
class ItemSpec:
    """An item in a bounded space: its first access (a write) and its tail accesses (the last
    write and the reads after it), which end its live range."""

    space: int
    bytes: int
    footprint: int
    first: int
    tails: tuple[int, ...] = attrs.field(converter=tuple)
    static_offset: int = 0
    #: shortest possible live range: the longest path along the item's own accesses
    min_live: int = 0


@attrs.frozen
class Token:
    """The possible flag from ``producer`` to its successors ``consumers`` on one other pipe
    (:mod:`.tokens` explains which flags the sync planner can keep and so which tokens exist).

    It is live over ``[end(producer), min start(consumers) + latency + 1)``: the id stays taken
    through the cycle of the WAIT, since two SETs of one id in one cycle would be ambiguous
    (:meth:`Token.end`). Each entry of
    ``triggers`` belongs to a consumer that can need the flag and lists its *rivals*: its other
    predecessors on the producer's pipe. The token must be counted when the producer runs after
    all rivals of some trigger. Consumers that a later op of the producer's pipe reaches anyway
    (through some path) never need the flag and are no trigger; without triggers there is no
    token.
    """

    producer: int
    budget: int
    consumers: tuple[int, ...] = attrs.field(converter=tuple)
    latency: int
    triggers: tuple[tuple[int, ...], ...] = attrs.field(converter=tuple)

    @property
    def mandatory(self) -> bool:
        return any(not r for r in self.triggers)

    def end(self, first_consumer_start: int) -> int:
        """End of the lifetime given the first consumer's start."""
        return first_consumer_start + self.latency + 1


@attrs.frozen
class Budget:
    """An event-id pool (cores numbered within the problem) and its capacity; ``binding`` is
    False when its tokens provably cannot overflow it."""

    key: PoolKey
    capacity: int
    binding: bool


@attrs.frozen(cache_hash=True)
class Problem:
    """A name-free scheduling problem over one group of cores (cores renumbered from 0).

    Attributes
    ----------
    pipes : tuple of (core, unit)
        The pipes; op ``i`` runs on ``pipes[pipe_of[i]]``.
    pipe_of : tuple of int
        Each op's pipe (an index into ``pipes``).
    edges : tuple of (src, dst, latency)
        ``start[dst] >= start[src] + dur[src] + latency``; sorted, no duplicates.
    sync : SyncModel
        The hardware's flags: latencies (:meth:`latency`, :attr:`reuse_gap`) and id budgets.
    links, xfers : tuple
        The shared links that bind this problem (:class:`~.links.LinkSpec`, with the units the
        problem may use) and its transfers on them (:class:`~.links.Xfer`). A transfer's
        ``dur`` is its full-rate duration until its rate is fixed (:func:`~.links.fix_rates`).
    link_overhead_holds : bool
        Whether a transfer holds its rate from its start (flags mode: a link's order is kept
        by flags, which release a transfer when another ends) or only from its data phase
        after its overhead (timed mode: exact cycles keep it).
    """

    n_cores: int
    pipes: tuple[tuple[int, str], ...] = attrs.field(converter=tuple)
    dur: tuple[int, ...] = attrs.field(converter=tuple)
    pipe_of: tuple[int, ...] = attrs.field(converter=tuple)
    edges: tuple[tuple[int, int, int], ...] = attrs.field(converter=tuple)
    spaces: tuple[SpaceSpec, ...] = attrs.field(converter=tuple)
    items: tuple[ItemSpec, ...] = attrs.field(converter=tuple)
    tokens: tuple[Token, ...] = attrs.field(converter=tuple)
    budgets: tuple[Budget, ...] = attrs.field(converter=tuple)
    sync: SyncModel
    links: tuple[LinkSpec, ...] = attrs.field(converter=tuple, default=())
    xfers: tuple[Xfer, ...] = attrs.field(converter=tuple, default=())
    link_overhead_holds: bool = True
    #: the data of families other than the four built in, ``(family name, value)`` in
    #: :data:`~.families.FAMILIES` order (:meth:`~.families.base.Family.attach` adds them;
    #: values are frozen and hashable, so that equal cores still give equal problems)
    parts: tuple[tuple[str, object], ...] = attrs.field(converter=tuple, default=())
    #: on a split chip, each core's place as its flags see it: a core number with the same
    #: cluster slot, in a cluster numbered within the group (a group need not be whole
    #: clusters from core 0, and a flag's route and latency depend on the cluster and the
    #: slot); empty on other chips, where the relative numbers serve
    places: tuple[int, ...] = attrs.field(converter=tuple, default=())

    @property
    def n(self) -> int:
        return len(self.dur)

    def part(self, name: str) -> object:
        """The data family ``name`` attached (None when it attached none)."""
        return next((v for k, v in self.parts if k == name), None)

    def latency(self, a: int, b: int) -> int:
        """The latency of an edge from op ``a`` to op ``b`` (by their pipes)."""
        return self.pipe_latency(self.pipes[self.pipe_of[a]], self.pipes[self.pipe_of[b]])

    def pipe_latency(self, src: tuple[int, str], dst: tuple[int, str]) -> int:
        """The latency from pipe ``src`` to pipe ``dst`` (relative cores) on the chip."""
        if self.places:
            src, dst = (self.places[src[0]], src[1]), (self.places[dst[0]], dst[1])
        return self.sync.latency(src, dst)

    def bound_latency(self, a: int, b: int) -> int:
        """The least latency an edge from op ``a`` to op ``b`` may have in a program
        (:meth:`~staticsched.model.hardware.SyncModel.bound_latency`): what bounds count."""
        src, dst = self.pipes[self.pipe_of[a]], self.pipes[self.pipe_of[b]]
        if self.places:
            src, dst = (self.places[src[0]], src[1]), (self.places[dst[0]], dst[1])
        return self.sync.bound_latency(src, dst)

    def for_bounds(self) -> Problem:
        """This problem with every edge at its :meth:`bound_latency` (itself when none is
        less): the bounds' problem."""
        edges = tuple((a, b, min(lat, self.bound_latency(a, b))) for a, b, lat in self.edges)
        return self if edges == self.edges else attrs.evolve(self, edges=edges)

    @property
    def reuse_gap(self) -> int:
        """Cycles between the end of an item's tail accesses and the first write of an item
        reusing its bytes: the flag latency (the reuse edge may cross pipes)."""
        return self.sync.flag_latency

    def live_range(self, k: int, starts: Sequence[int]) -> tuple[int, int]:
        """``[first access start, last tail access end)`` of item ``k`` in a timetable."""
        it = self.items[k]
        return starts[it.first], max(starts[a] + self.dur[a] for a in it.tails)

    def hold(self, k: int, starts: Sequence[int]) -> tuple[int, int]:
        """The cycles item ``k`` keeps its bytes in a timetable: its live range and then
        :attr:`reuse_gap` (CP-SAT's memory-family ``hold`` intervals model the same)."""
        begin, end = self.live_range(k, starts)
        return begin, end + self.reuse_gap

    def holds(self, starts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`hold` of every item at once (begin and end arrays): the LNS asks for them
        once per window, over ~10^4 items."""
        first, tails, at = _hold_index(self)
        s = np.asarray(starts, dtype=np.int64)
        if not len(first):
            return first, first
        ends = s + np.asarray(self.dur, dtype=np.int64)
        return s[first], np.maximum.reduceat(ends[tails], at) + self.reuse_gap


@functools.lru_cache(maxsize=8)
def _hold_index(prob: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items' first accesses, all tail accesses in item order, and where each item's begin."""
    first = np.fromiter((it.first for it in prob.items), np.int64, len(prob.items))
    tails = np.fromiter((a for it in prob.items for a in it.tails), np.int64)
    at = np.cumsum([0, *(len(it.tails) for it in prob.items[:-1])], dtype=np.int64)
    return first, tails, at


@attrs.frozen
class ProblemMap:
    """Where a problem's local indices live in the graph."""

    cores: tuple[int, ...] = attrs.field(converter=tuple)
    ops: tuple[int, ...] = attrs.field(converter=tuple)
    items: tuple[int, ...] = attrs.field(converter=tuple)


def shared_problems(pairs: Sequence[tuple[Problem, ProblemMap]]) -> list[tuple[Problem, ProblemMap]]:
    """``pairs`` with equal problems made one object: identical cores build equal problems,
    and every later lookup of one (a memo, the distinct problems to solve) then finds it by
    identity instead of comparing ~10^4 items field by field each time."""
    one: dict[Problem, Problem] = {}
    return [(one.setdefault(prob, prob), pmap) for prob, pmap in pairs]


def relax_flag_slots(prob: Problem) -> Problem:
    """``prob`` with every space at its full capacity: for when the flag slots (fewer slots
    than the capacity holds) leave an op no room (a space stays binding: its items keep
    getting addresses)."""
    return attrs.evolve(prob, spaces=[attrs.evolve(sp, limit=sp.full_limit, capped=False) if sp.capped else sp
                                      for sp in prob.spaces])


def relax_event_budgets(prob: Problem) -> Problem:
    """``prob`` with no event-id pool binding: for a program without flags (timed mode), or
    when the sync planner is left to fit the ids by moving SETs."""
    return attrs.evolve(prob, budgets=[attrs.evolve(b, binding=False) for b in prob.budgets])
