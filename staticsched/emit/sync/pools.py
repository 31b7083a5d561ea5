"""The event-id pools of the id assignment: the state of every id and what waits on a pool."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from staticsched.model.hardware import SyncModel
from staticsched.model.pools import PoolKey


@attrs.define(eq=False)
class Busy:
    """An id whose SET is placed and whose WAIT is not passed yet."""

    flag: int


@attrs.define(eq=False)
class LastWait:
    """The latest WAIT on an id: its pipe, mark and nominal time, and its flag (a credit SET
    that relies on it goes right behind it)."""

    pipe: int
    mark: int
    time: int
    flag: int


class WaitAt:
    """A WAIT about to get an id: its pipe, and (computed on demand) a clock of what surely
    happens before it other than its own SET."""

    def __init__(self, pipe: int, floor: Callable[[], np.ndarray]) -> None:
        self.pipe = pipe
        self._floor = floor
        self._clock: np.ndarray | None = None

    def after(self, last: LastWait) -> bool:
        """Whether ``last`` happens before this WAIT without its flag."""
        if last.pipe == self.pipe:
            return True  # program order: this WAIT is placed behind every passed point
        if self._clock is None:
            self._clock = self._floor()
        return bool(self._clock[last.pipe] >= last.mark)


class IdPool:
    """The ids of one pool and the state of each: unused, set (:class:`Busy`) or free with
    its last WAIT (:class:`LastWait`)."""

    def __init__(self, size: int) -> None:
        self.slots: list[Busy | LastWait | None] = [None] * size

    def eligible(self, clock: np.ndarray, wait: WaitAt) -> int:
        """Lowest id whose last WAIT happens before a SET with ``clock`` and before ``wait``
        other than through the new flag; -1 if none."""
        for k, st in enumerate(self.slots):
            if st is None or (isinstance(st, LastWait) and clock[st.pipe] >= st.mark and wait.after(st)):
                return k
        return -1

    def credit_candidates(self, wait: WaitAt) -> list[tuple[int, LastWait]]:
        """Ids a credit could free (their last WAIT happens before ``wait``), earliest first."""
        cands = [(st.time, k, st) for k, st in enumerate(self.slots)
                 if isinstance(st, LastWait) and wait.after(st)]
        return [(k, st) for _, k, st in sorted(cands, key=lambda c: (c[0], c[1]))]


class Pools:
    """Every pool, created on first use with its budget, and the set points parked on each."""

    def __init__(self, sync: SyncModel) -> None:
        self.sync = sync
        self.pools: dict[PoolKey, IdPool] = {}
        self.wake: dict[PoolKey, list[int]] = {}

    def __getitem__(self, key: PoolKey) -> IdPool:
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = IdPool(key.budget(self.sync))
        return pool
