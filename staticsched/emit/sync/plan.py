"""What a sync plan is: flags with their anchors and ids, the planned streams, the counts.

A plan is data (TVM's coproc-sync habit): computed from a schedule before any program text is
written, and turned into instructions by :mod:`staticsched.emit.build`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from staticsched.model.opgraph import Edge
from staticsched.model.pools import PoolKey


@attrs.frozen
class Flag:
    """One planned SET/WAIT pair, each end anchored ``"before"`` or ``"after"`` an op.

    A dependency flag has its SET right ``"after"`` the producer op ``set_op`` and its WAIT
    right ``"before"`` the consumer op ``wait_op``. A credit flag (``reason == "credit"``) runs
    the other way: its SET sits right behind an earlier WAIT whose id a new SET wants to reuse
    (so ``"before"`` that WAIT's op, or ``"after"`` an op when that WAIT was a credit WAIT
    itself), its WAIT ``"after"`` the producer of the new SET, right before that SET. The exact
    slots are in :attr:`SyncPlan.streams`.

    ``kind`` is ``"flag"`` (same core, ids per (core, set_unit, wait_unit)) or ``"cross"``
    (ids per (set_core, wait_core)).
    """

    index: int
    kind: str
    reason: str
    set_core: int
    set_unit: str
    set_op: str
    set_side: str
    wait_core: int
    wait_unit: str
    wait_op: str
    wait_side: str
    event: int
    item: str = ""
    #: how a cross-core flag travels (:mod:`staticsched.emit.sync.routes`): ``""``
    #: point-to-point, ``"2"`` mode 2, ``"gm"`` a GM word
    route: str = ""
    #: a mode-2 flag whose AIC-side SET or WAIT is the one of the flag before it in its group
    merged: bool = False

    @property
    def id_key(self) -> PoolKey:
        """The id pool this flag draws from."""
        if self.kind == "cross":
            return PoolKey.cross(self.set_core, self.wait_core)
        return PoolKey.flag(self.set_core, self.set_unit, self.wait_unit)


@attrs.frozen
class PlanStream:
    """One pipe's program: ``slots`` are ``("op", op_id)``, ``("set", flag index)`` or
    ``("wait", flag index)`` in execution order."""

    core: int
    unit: str
    #: the second of each pair is an op id (str) or a flag index (int), as the first says
    slots: tuple[tuple[str, Any], ...] = attrs.field(converter=tuple)


@attrs.frozen
class SyncStats:
    """Counts of a sync plan.

    ``dependencies`` counts distinct cross-pipe (producer, consumer) pairs -- the flags a naive
    planner would emit (``flags_naive``). ``flags_kept`` of them got a flag, the rest are implied
    by happens-before (``flags_eliminated``). ``credits`` are extra flags added for the id-reuse
    rule. ``ids_used`` is, per id pool (``"c0 MTE2->CUBE"`` or ``"core0->core1"``), the number of
    distinct ids used. ``relays`` and ``fallback`` are set when ids ran short and the baton plan
    (:mod:`staticsched.emit.sync.baton`) replaced the main one (``fallback`` says why).
    """

    dependencies: int
    flags_naive: int
    flags_kept: int
    flags_eliminated: int
    credits: int
    cross_core: int
    ids_used: tuple[tuple[str, int], ...] = attrs.field(converter=tuple, default=())
    relays: int = 0
    fallback: str = ""
    #: each bundle of GM words the barrier pass tried (:mod:`staticsched.emit.sync.barriers`)
    barriers: tuple[Any, ...] = attrs.field(converter=tuple, default=())
    #: GM-word WAITs the turnstile pass moved into an earlier poll (:mod:`staticsched.emit.sync.turnstiles`)
    turnstiles: int = 0

    def as_dict(self) -> dict:
        """JSON-ready form with a fixed key order."""
        out = {
            "dependencies": self.dependencies,
            "flags_naive": self.flags_naive,
            "flags_kept": self.flags_kept,
            "flags_eliminated": self.flags_eliminated,
            "credits": self.credits,
            "cross_core": self.cross_core,
            "ids_used": dict(self.ids_used),
        }
        if self.fallback:
            out["relays"] = self.relays
            out["fallback"] = self.fallback
        if self.barriers:
            out["barriers"] = [attrs.asdict(b) for b in self.barriers]
        if self.turnstiles:
            out["turnstiles"] = self.turnstiles
        return out


@attrs.frozen
class SyncPlan:
    """The sync plan of a schedule: program order with flag slots, the flags, the counts.

    ``mode`` is ``"flags"`` or ``"timed"`` (a timed plan has no flags: exact cycles order
    everything). ``dependencies`` are the cross-pipe edges the flags must cover, in the order
    they were found.
    """

    mode: str
    streams: tuple[PlanStream, ...] = attrs.field(converter=tuple)
    flags: tuple[Flag, ...] = attrs.field(converter=tuple)
    dependencies: tuple[Edge, ...] = attrs.field(converter=tuple)
    stats: SyncStats


def ids_used(pipes: Sequence[tuple[int, str]], flags: Sequence[Flag]) -> tuple[tuple[str, int], ...]:
    """Distinct ids per pool, labelled ``"c0 MTE2->CUBE"`` / ``"core0->core1"``: intra-core
    pools in the order of ``pipes`` (source, then destination), then cross-core pools."""
    used: dict[PoolKey, set[int]] = {}
    for f in flags:
        used.setdefault(f.id_key, set()).add(f.event)
    pipe_rank = {p: k for k, p in enumerate(pipes)}

    def rank(key: PoolKey) -> tuple:
        if key.kind == "cross":
            return (1, key.core, key.peer)
        return (0, pipe_rank[(key.core, key.src)], pipe_rank[(key.core, key.dst)])

    return tuple((key.label, len(used[key])) for key in sorted(used, key=rank))
