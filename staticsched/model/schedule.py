"""Schedule: the timetable a solver produces (per op timing, per item placement, sync events)."""

from __future__ import annotations

from typing import Any

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph

STATUSES = ("optimal", "feasible", "heuristic")


@attrs.frozen
class OpTime:
    """When and where one op runs: ``[start, end)`` on ``unit`` of ``core``; a transfer on a
    shared link also has the ``rate`` it runs at (rate units, :data:`~staticsched.model.hardware.
    RATE_DENOM` per byte per cycle; 0: its path's full rate, and for every other op)."""

    id: str
    core: int
    unit: str
    start: int
    end: int
    rate: int = 0


@attrs.frozen
class Placement:
    """An item's concrete placement and live range ``[start, end)`` (first access start to
    last access end). Items in an unbounded space (or none) have ``offset == 0``."""

    item: str
    core: int
    space: str
    offset: int
    bytes: int
    start: int
    end: int


@attrs.frozen
class SyncEvent:
    """One kept flag: ``kind`` is ``"flag"`` (intra-core, pipes ``src -> dst``) or ``"cross"``
    (``core -> dst_core``). ``producer``/``consumer`` are the ops it orders (for a back-edge
    inserted to honour the id-reuse rule, ``reason`` is ``"credit"``), ``set_cycle`` when the
    SET fires and ``wait_cycle`` when the WAIT releases, in the nominal timetable."""

    kind: str
    core: int
    src: str
    dst: str
    event: int
    producer: str
    consumer: str
    set_cycle: int
    wait_cycle: int
    reason: str = "raw"
    dst_core: int = -1


@attrs.frozen
class Schedule:
    """A timetable for ``graph`` on ``hw``.

    Attributes
    ----------
    ops : tuple of OpTime
        In the graph's op order.
    items : tuple of Placement
        In the graph's item order.
    events : tuple of SyncEvent
        The flags the sync plan keeps, with ids.
    makespan, lower_bound : int
        Cycles; ``gap = makespan / lower_bound - 1``.
    status : str
        ``optimal`` (makespan equals a proven bound), ``feasible`` (CP-SAT solution, not proven)
        or ``heuristic`` (list schedule only).
    stop_reason : str
        What ended the search: ``"optimal"``, ``"deterministic_limit"``, ``"wall_clock_limit"``
        (then the result may not be reproducible), ``"list"``.
    stats : tuple of (key, value)
        Solver statistics (JSON scalars).
    """

    graph: OpGraph = attrs.field(repr=False)
    hw: Hardware = attrs.field(repr=False)
    ops: tuple[OpTime, ...] = attrs.field(converter=tuple)
    items: tuple[Placement, ...] = attrs.field(converter=tuple)
    events: tuple[SyncEvent, ...] = attrs.field(converter=tuple)
    makespan: int
    lower_bound: int
    status: str
    method: str = "cpsat"
    stop_reason: str = ""
    stats: tuple[tuple[str, Any], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=()
    )

    @property
    def gap(self) -> float:
        return self.makespan / self.lower_bound - 1.0 if self.lower_bound > 0 else 0.0

    def op_time(self, op_id: str) -> OpTime:
        return self.ops[self.graph.op_index[op_id]]

    def verify(self) -> tuple[str, ...]:
        """Check this timetable against its graph and hardware, independently of the solver.

        Returns
        -------
        tuple of str
            One line per violation naming the ops/items and the numbers; empty when valid.
            See :mod:`staticsched.model.schedule_check` for the list of checks.
        """
        from staticsched.model.schedule_check import verify_schedule

        return verify_schedule(self)
