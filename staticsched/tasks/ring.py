"""A ring of slots in a GM workspace, one ring per owning core: how a split chip's AIC and
AIVs hand tiles to each other (CATLASS's multistage workspace).

Each owner (an AIC) has ``stages`` slots of ``rows x cols``; its k-th tile goes to slot
``k mod stages``. Global memory is not an item whose reuse the OpGraph orders, so the ring
states the "consumed" edge itself: the writers of a reused slot depend on the readers of its
previous tile (:meth:`Ring.next` returns them, :meth:`Ring.read` records them). A slot may be
cut into row ranges (``cuts``) that different cores write: each is its own cell of the
store grid, so a reader of the whole slot depends on every writer.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from staticsched.model.opgraph import Tensor
from staticsched.tasks.builder import Builder


@attrs.frozen
class Slot:
    """One use of a slot: its first row in the workspace, the ops its writers must follow,
    and its key for :meth:`Ring.read`."""

    base: int
    after: tuple[str, ...]
    key: tuple[int, int]


def cluster_aivs(hw) -> dict[int, list[int]]:
    """Cluster -> its Vector cores, in core order (empty on a coupled chip)."""
    out: dict[int, list[int]] = {}
    for c in hw.engine_cores("vector") if hw.split else ():
        out.setdefault(hw.cluster_of(c), []).append(c)
    return out


class Ring:
    """The rings of one workspace tensor ``name``, one per core of ``owners``."""

    def __init__(self, em: Builder, name: str, owners: Sequence[int], stages: int, shape: tuple[int, int],
                 dtype: str, cuts: Sequence[int] = (0,), layout: str = "ND") -> None:
        self.name, self.stages, self.rows = name, stages, shape[0]
        self.rank = {c: k for k, c in enumerate(owners)}
        slots = stages * len(owners)
        em.workspace(Tensor(name, (slots * shape[0], shape[1]), dtype, workspace=True, layout=layout))
        starts = sorted(set(cuts))
        spans = [(k * shape[0] + a, k * shape[0] + b)
                 for k in range(slots) for a, b in zip(starts, [*starts[1:], shape[0]], strict=True)]
        em.output(name, spans, [(0, shape[1])])
        self.done: dict[int, int] = {}
        self.readers: dict[tuple[int, int], tuple[str, ...]] = {}

    def next(self, owner: int) -> Slot:
        """The owner's next slot."""
        k = self.done.get(owner, 0)
        self.done[owner] = k + 1
        slot = k % self.stages
        base = (slot * len(self.rank) + self.rank[owner]) * self.rows
        return Slot(base, self.readers.get((owner, slot), ()), (owner, slot))

    def read(self, slot: Slot, ops: Sequence[str]) -> None:
        """``ops`` are the last readers of ``slot``'s tile."""
        self.readers[slot.key] = tuple(ops)
