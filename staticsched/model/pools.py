"""Event-id pools: which flags share a budget of ids.

An intra-core flag ``SET_FLAG src dst id`` draws from the pool of its (core, src pipe, dst
pipe) and is binary (one set outstanding per id); a cross-core flag from the pool of its (src
core, dst core) and counts (up to ``cross_core_capacity`` sets outstanding per id). Solver,
sync planner and verifier all name pools with :class:`PoolKey`.
"""

from __future__ import annotations

import attrs

from staticsched.model.hardware import SyncModel


@attrs.frozen(order=True)
class PoolKey:
    """One pool: ``kind`` ``"flag"`` (``core``, pipes ``src -> dst``) or ``"cross"`` (cores
    ``core -> peer``)."""

    kind: str
    core: int
    src: str = ""
    dst: str = ""
    peer: int = -1

    @classmethod
    def flag(cls, core: int, src: str, dst: str) -> PoolKey:
        return cls("flag", core, src, dst)

    @classmethod
    def cross(cls, src_core: int, dst_core: int) -> PoolKey:
        return cls("cross", src_core, peer=dst_core)

    def reverse(self) -> PoolKey:
        """The pool of flags going back (credits, relays)."""
        if self.kind == "cross":
            return PoolKey.cross(self.peer, self.core)
        return PoolKey.flag(self.core, self.dst, self.src)

    def budget(self, sync: SyncModel) -> int:
        """How many ids the pool has: a mode-2 flag's ids are the receiving core's own
        (``cross_core_ids_per_core`` of them, where given)."""
        if self.kind != "cross":
            return sync.event_ids
        if sync.no_cross_flag:
            return 0
        if sync.cross_core_ids_per_core and sync.route(self.core, self.peer) == "2":
            return min(sync.cross_core_event_ids, sync.cross_core_ids_per_core)
        return sync.cross_core_event_ids

    def capacity(self, sync: SyncModel) -> int:
        """How many sets one id may have outstanding: 1 for a binary intra-core flag, the
        counter's capacity for a counting cross-core flag."""
        return sync.cross_core_capacity if self.kind == "cross" else 1

    @property
    def label(self) -> str:
        """``"c0 MTE2->CUBE"`` or ``"core0->core1"`` (summaries, stats)."""
        if self.kind == "cross":
            return f"core{self.core}->core{self.peer}"
        return f"c{self.core} {self.src}->{self.dst}"
