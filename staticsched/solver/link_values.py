"""The link family's values in a solver problem: the links it may use (:class:`LinkSpec`) and
its transfers on them (:class:`Xfer`). They sit below :mod:`staticsched.solver.problem`, which
holds them; what works on a problem is in :mod:`staticsched.solver.families.links`."""

from __future__ import annotations

import attrs

from staticsched.model.links import transfer_cycles


@attrs.frozen
class LinkSpec:
    """A link of a problem: its name and the units the problem's transfers may hold at once
    (the whole bandwidth, or one core's share in an equal static split)."""

    name: str
    units: int


@attrs.frozen
class Xfer:
    """A transfer op of a problem: ``op`` moves ``bytes`` after ``overhead`` cycles, at most
    ``path_units``, on the problem's links ``links`` (indices); ``rate`` is its fixed rate, or
    0 while the list scheduler may still choose one."""

    op: int
    bytes: int
    overhead: int
    path_units: int
    links: tuple[int, ...] = attrs.field(converter=tuple)
    rate: int = 0
    #: the duration at the path's own rate (0: computed from ``path_units``)
    full: int = 0

    def cycles(self, rate: int) -> int:
        """Duration at ``rate`` units (0, or the path's rate: ``full``)."""
        return transfer_cycles(self.bytes, self.overhead, self.path_units, self.full, rate)

    def hold_start(self, start: int, overhead_holds: bool) -> int:
        """When the transfer starts holding its rate (see ``Problem.link_overhead_holds``)."""
        return start if overhead_holds else start + self.overhead
