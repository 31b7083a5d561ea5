"""The emitted program: per (core, pipe) instruction streams with sync flags.

This is the contract between the emitter (``staticsched.emit``) and the
verifying executor (``staticsched.verify``): the executor must be able to run
and check a program from these values alone (plus the hardware model).

Flag semantics (DESIGN §2): ``set_flag`` sits in pipe ``src``'s stream, fires
when everything before it on ``src`` has finished, and the flag
``(core, src, dst, event)`` is visible ``flag_latency`` cycles later;
``wait_flag`` sits in ``dst``'s stream, blocks ``dst`` until the flag is set,
then clears it. ``set_cross``/``wait_cross`` do the same across cores, keyed
``(src_core, dst_core, event)``, with ``peer_core`` the other core. Sync
instructions take zero cycles.
"""

from __future__ import annotations

from typing import Any

import attrs

from staticsched.model.opgraph import Tensor, _attr_tuple

FORMAT = "staticsched.program"
VERSION = 1

#: instruction kinds besides micro-ops (the one declaration of the sync vocabulary; their
#: mnemonics in every text form are the names upper-cased): flags between two pipes of a core
#: and cross-core flags, each a set and a wait
FLAG_KINDS = ("set_flag", "wait_flag")
CROSS_KINDS = ("set_cross", "wait_cross")
SYNC_KINDS = FLAG_KINDS + CROSS_KINDS
#: the sync kinds that set a flag (the others wait on one)
SET_KINDS = ("set_flag", "set_cross")
#: how a cross-core flag travels besides a point-to-point counter (``mode=`` in the program):
#: ``"0"`` an A2/A3 mode-0 barrier of all cores of the issuing core's type (each SETs once,
#: each WAIT needs every other's SET), ``"2"`` an A2/A3 mode-2 flag between a cluster's AIC
#: and its AIVs (the AIC's SET counts on both AIVs, its WAIT needs a SET from each), ``"gm"``
#: a GM word (IBSet/IBWait)
CROSS_MODES = ("0", "2", "gm")
#: a sync kind's mnemonic
SYNC_MNEMONICS = {k: k.upper() for k in SYNC_KINDS}


@attrs.frozen
class ProgItem:
    """An item with its concrete placement and nominal live range ``[live_start, live_end)``.

    Items in an unbounded space (or no space) have ``offset == 0`` and are
    addressed by name: they never overlap other items.
    """

    name: str
    core: int
    space: str
    offset: int
    bytes: int
    live_start: int
    live_end: int
    dtype: str = ""
    shape: tuple[int, ...] = attrs.field(converter=tuple, default=())


def _sees(value) -> tuple[str, ...]:
    """Intended writes naming no write at all are not recorded: ``()``."""
    return tuple(value) if any(value) else ()


#: ``attrs.field``, for class bodies where an attribute named ``attrs`` hides the module
_field = attrs.field


@attrs.frozen
class Instr:
    """One instruction of a stream.

    ``kind`` is a micro-op kind from :mod:`staticsched.model.opkinds`, ``"op"`` for an
    opaque op (no kind), or one of :data:`SYNC_KINDS`. ``cycle`` is the nominal issue cycle.
    Micro-ops use ``id/duration/reads/writes/attrs``; flags use ``src/dst/event``; cross
    flags use ``event/peer_core`` and ``mode`` (:data:`CROSS_MODES`; ``""`` a point-to-point
    flag; in mode 2 ``peer_core`` is the cluster's AIC, the core itself on the AIC). ``sees``
    (micro-ops) names, per read, the op whose write
    that read must see when several ops write its item (its producer in the OpGraph's
    sequential order), ``""`` for a read of an item one op writes; empty when the program does
    not record it (older programs).
    """

    kind: str
    cycle: int
    id: str = ""
    duration: int = 0
    reads: tuple[str, ...] = attrs.field(converter=tuple, default=())
    writes: tuple[str, ...] = attrs.field(converter=tuple, default=())
    attrs: tuple[tuple[str, Any], ...] = attrs.field(converter=_attr_tuple, default=())
    src: str = ""
    dst: str = ""
    event: int = -1
    peer_core: int = -1
    sees: tuple[str, ...] = _field(converter=_sees, default=())
    mode: str = ""

    @property
    def is_sync(self) -> bool:
        return self.kind in SYNC_KINDS

    @property
    def is_bare_sync(self) -> bool:
        """A sync instruction without any micro-op field (id, duration, operands, attributes,
        sees): the common case, two thirds of a chip's instructions."""
        return self.kind in SYNC_KINDS and not (self.id or self.duration or self.reads or self.writes
                                                or self.attrs or self.sees)


@attrs.frozen
class Stream:
    """The ordered instructions of one pipe of one core."""

    core: int
    unit: str
    instrs: tuple[Instr, ...] = attrs.field(converter=tuple)


@attrs.frozen
class Program:
    """A whole-chip program.

    ``streams`` are sorted by core, then by the hardware's unit order. ``source`` is the
    TaskGraph JSON the program computes (empty for OpGraph inputs), so numeric replay can
    build its NumPy reference from the program file alone.
    """

    hw: str
    mode: str  # "flags" | "timed"
    makespan: int
    tensors: tuple[Tensor, ...] = attrs.field(converter=tuple)
    items: tuple[ProgItem, ...] = attrs.field(converter=tuple)
    streams: tuple[Stream, ...] = attrs.field(converter=tuple)
    source: str = attrs.field(default="", repr=False)
