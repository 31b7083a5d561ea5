"""The values a timetable is made of: op timings, item placements and sync events.

A leaf module (it imports nothing of staticsched): the schedule, its checks, the dependency
rules and the emitters all build on these without importing each other.
"""

from __future__ import annotations

import attrs

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
