"""The event-id pools of the id assignment: the state of every id and what waits on a pool.

An id of a pool with ``capacity`` C (1 for a binary intra-core flag, the counter's capacity
for a counting cross-core flag) may carry a new flag when, with the flags already on it:

* the SET of the flag C back has its WAIT passed and happening before the new SET (at most
  C sets outstanding under any timing: for C = 1 the reuse rule of DESIGN §2);
* the new SET happens after the previous SET on the id, and the new WAIT after the previous
  WAIT (sets and waits of one id are each totally ordered, so the n-th WAIT consumes the n-th
  SET whatever the timing).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from staticsched.model.hardware import SyncModel
from staticsched.model.pools import PoolKey


@attrs.define(eq=False)
class Busy:
    """An id whose SET is placed and whose WAIT is not passed yet: the flag, where its SET is
    (pipe and mark) and where its WAIT will be (``wait_order``: pipe, position of the op it
    guards, place among that op's WAITs)."""

    flag: int
    set_pipe: int = -1
    set_mark: int = 0
    wait_order: tuple[int, ...] = ()


@attrs.define(eq=False)
class LastWait:
    """A WAIT on an id that has been passed: its pipe, mark and nominal time, and its flag (a
    credit SET that relies on it goes right behind it); ``set_pipe``/``set_mark`` locate its
    SET."""

    pipe: int
    mark: int
    time: int
    flag: int
    set_pipe: int = -1
    set_mark: int = 0


class WaitAt:
    """A WAIT about to get an id: its pipe, its place in program order (``order``, as
    :attr:`Busy.wait_order`), and (computed on demand) a clock of what surely happens before it
    other than its own SET."""

    def __init__(self, pipe: int, floor: Callable[[], np.ndarray], order: tuple[int, ...] = ()) -> None:
        self.pipe = pipe
        self.order = order
        self._floor = floor
        self._clock: np.ndarray | None = None

    def after(self, last: LastWait) -> bool:
        """Whether ``last`` happens before this WAIT without its flag."""
        if last.pipe == self.pipe:
            return True  # program order: this WAIT is placed behind every passed point
        if self._clock is None:
            self._clock = self._floor()
        return bool(self._clock[last.pipe] >= last.mark)

    def follows(self, busy: Busy) -> bool:
        """Whether this WAIT comes after ``busy``'s (not yet passed) WAIT in program order."""
        return bool(self.order and busy.wait_order and self.order[0] == busy.wait_order[0]
                    and self.order > busy.wait_order)


class IdPool:
    """The ids of one pool: per id its last ``capacity`` flags, oldest first, each set
    (:class:`Busy`) or waited (:class:`LastWait`)."""

    def __init__(self, size: int, capacity: int = 1) -> None:
        self.capacity = max(1, capacity)
        self.flags: list[list[Busy | LastWait]] = [[] for _ in range(size)]

    def __len__(self) -> int:
        return len(self.flags)

    def last(self, k: int) -> Busy | LastWait | None:
        """The latest flag on id ``k`` (None: unused)."""
        return self.flags[k][-1] if self.flags[k] else None

    def _ordered(self, k: int, clock: np.ndarray, wait: WaitAt, set_pipe: int) -> bool:
        """The new SET (``clock``) follows id ``k``'s last SET, the new WAIT its last WAIT."""
        last = self.flags[k][-1]
        # a SET on another pipe is known to precede only once a point after its own set point
        # is: the SETs after one op sit in a row, and a WAIT that took an earlier of them
        # knows nothing of the later ones
        if last.set_pipe >= 0 and last.set_pipe != set_pipe and clock[last.set_pipe] <= last.set_mark:
            return False
        return wait.after(last) if isinstance(last, LastWait) else wait.follows(last)

    def _oldest(self, k: int) -> Busy | LastWait | None:
        """The flag ``capacity`` back on id ``k``, whose WAIT must precede a new SET."""
        es = self.flags[k]
        return es[-self.capacity] if len(es) >= self.capacity else None

    def eligible(self, clock: np.ndarray, wait: WaitAt, set_pipe: int = -1) -> int:
        """Lowest id that may carry a flag whose SET (on ``set_pipe``) has ``clock`` and whose
        WAIT is ``wait`` (see the module docstring); -1 if none."""
        for k in range(len(self.flags)):
            if not self.flags[k]:
                return k
            old = self._oldest(k)
            if old is not None and not (isinstance(old, LastWait) and clock[old.pipe] >= old.mark):
                continue
            if self._ordered(k, clock, wait, set_pipe):
                return k
        return -1

    def credit_candidates(
        self, clock: np.ndarray, wait: WaitAt, set_pipe: int = -1
    ) -> list[tuple[int, LastWait]]:
        """Ids a credit could free: the flag ``capacity`` back is waited but its WAIT does not
        happen before the new SET (a credit from that WAIT to the new SET makes it so), and the
        new flag would keep the id's order; earliest such WAIT first."""
        cands = []
        for k in range(len(self.flags)):
            old = self._oldest(k)
            if not isinstance(old, LastWait):
                continue
            # with one flag per id the credit orders the new SET after the old one too
            if wait.after(old) if self.capacity == 1 else self._ordered(k, clock, wait, set_pipe):
                cands.append((old.time, k, old))
        return [(k, st) for _, k, st in sorted(cands, key=lambda c: (c[0], c[1]))]

    def place(self, k: int, busy: Busy) -> None:
        """A new flag's SET on id ``k``."""
        es = self.flags[k]
        es.append(busy)
        if len(es) > self.capacity:
            del es[0]

    def passed(self, k: int, last: LastWait) -> None:
        """The WAIT of ``last.flag`` on id ``k`` is passed (a credit's WAIT is passed as it is
        placed: its flag joins the id here)."""
        es = self.flags[k]
        for j in range(len(es) - 1, -1, -1):
            if es[j].flag == last.flag:
                last.set_pipe, last.set_mark = es[j].set_pipe, es[j].set_mark
                es[j] = last
                return
        es.append(last)
        if len(es) > self.capacity:
            del es[0]


class Pools:
    """Every pool, created on first use with its budget, and the set points parked on each."""

    def __init__(self, sync: SyncModel) -> None:
        self.sync = sync
        self.pools: dict[PoolKey, IdPool] = {}
        self.wake: dict[PoolKey, list[int]] = {}

    def __getitem__(self, key: PoolKey) -> IdPool:
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = IdPool(key.budget(self.sync), key.capacity(self.sync))
        return pool
