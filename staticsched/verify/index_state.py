"""The state a :class:`~staticsched.verify.index.ProgramIndex` fills: one column per fact
(global instruction ids index them), and the small values and helpers of the index that its
parts share. The parts are mixins over it, each one job: the streams and instructions
(:mod:`.index_streams`), the memory segments (:mod:`.index_gm`), and the rest
(:mod:`.index`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs
import numpy as np

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import Tensor
from staticsched.model.program import (
    FLAG_KINDS,
    SET_KINDS,
    SYNC_KINDS,
    Instr,
    ProgItem,
    Program,
)
from staticsched.verify.report import Finding

OP, SET, WAIT = 0, 1, 2

_SYNC = frozenset(SYNC_KINDS)
_SETS = frozenset(SET_KINDS)
_FLAGS = frozenset(FLAG_KINDS)

#: a flag key: ``("flag", core, src, dst, event)`` or ``("cross", src_core, dst_core, event)``
Key = tuple


_new_tuple = tuple.__new__


class Access(NamedTuple):
    """One operand access of a micro-op: ``label`` names the data, ``segs`` the segments.

    ``gm`` marks GM data (a region of a tensor, or an item of an unbounded space), whose
    reads the dataflow check follows; a plain tuple because a chip has ~10^6 of them.
    """

    label: str
    segs: tuple[int, ...]
    write: bool
    gm: bool = False


@attrs.frozen
class GmAccess:
    """A load/store's GM region, kept for the bounds check and numeric replay."""

    gid: int
    tensor: str
    region: tuple[tuple[int, int], tuple[int, int]]
    write: bool


def key_text(key: Key) -> str:
    """How a flag key reads in messages."""
    if key[0] == "flag":
        _, core, src, dst, event = key
        return f"flag {src}->{dst} id {event} on core {core}"
    _, src_core, dst_core, event, mode = key
    how = {"0": "mode-0 (barrier) ", "2": "mode-2 ", "gm": "GM-word "}.get(mode, "")
    return f"{how}cross flag core {src_core}->core {dst_core} id {event}"


def _region(value: Any) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The region as int pairs, or None when it is not ``((r0, r1), (c0, c1))`` with r0<r1, c0<c1."""
    try:
        (r0, r1), (c0, c1) = value
    except (TypeError, ValueError):
        return None
    vals = (r0, r1, c0, c1)
    if not all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in vals):
        return None
    if not (0 <= r0 < r1 and 0 <= c0 < c1):
        return None
    return ((int(r0), int(r1)), (int(c0), int(c1)))


def region_text(tensor: str, region: tuple[tuple[int, int], tuple[int, int]]) -> str:
    (r0, r1), (c0, c1) = region
    return f"GM {tensor}[{r0}:{r1}, {c0}:{c1}]"


class IndexState:
    """The columns and tables of an index (filled by the mixins of :class:`~staticsched.verify.
    index.ProgramIndex`)."""

    def __init__(self, program: Program, hw: Hardware) -> None:
        self.program = program
        self.hw = hw
        self.problems: list[Finding] = []
        self.timed = program.mode == "timed"
        self.streams = list(program.streams)
        self.stream_gids: list[list[int]] = []
        self.instr: list[Instr] = []
        self.stream_of: list[int] = []
        self.pos_of: list[int] = []
        #: gid -> position in its stream as the file has it, where they differ (an AIC's
        #: mode-2 instruction is indexed once per AIV of its cluster)
        self.file_pos: dict[int, int] = {}
        #: the gids of an expanded instruction but its last (the instruction is done with it)
        self.parts: set[int] = set()
        #: (gid, peer) of each AIC mode-2 instruction whose peer is not the AIC itself
        self._mode2: list[tuple[int, int]] = []
        #: (gid, peer) of each mode-0 instruction whose peer is not the core itself
        self._mode0: list[tuple[int, int]] = []
        self.role: list[int] = []
        self.key_of: list[Key | None] = []
        self.dur: list[int] = []
        self.cycle: list[int] = []
        self.latency: list[int] = []
        #: per GM-word wait, the cycles it holds its core once its word is visible (the final
        #: polling load, ``sync.gm_flag_poll``); no other instruction holds
        self.hold: dict[int, int] = {}
        self.accesses: list[tuple[Access, ...]] = []
        self.gm_accesses: list[GmAccess] = []
        self.sets_of: dict[Key, list[int]] = {}
        self.waits_of: dict[Key, list[int]] = {}
        self.op_gid: dict[str, int] = {}
        self.items: dict[str, ProgItem] = {}
        self.tensors: dict[str, Tensor] = {}
        self.seg_count = 0
        #: per written GM tensor: (row bounds, column bounds, first segment) of its cell grid
        self.gm_grid: dict[str, tuple[list[int], list[int], int]] = {}
        #: GM segments (tensor cells, unbounded items) that some micro-op writes
        self.gm_written: set[int] = set()
        #: (first segment, tensor) of each tensor grid, sorted, and the segment of each unbounded item
        self._gm_seg_owner: list[tuple[int, str]] = []
        self._gm_item_of_seg: dict[int, str] = {}
        self._item_segs: dict[str, tuple[int, ...]] = {}
        self._bounded: set[str] = set()
        self._shapes: tuple[list[int], list[int]] | None = None
        self._by_core: dict[int, list[ProgItem]] | None = None
        self._missing: dict[tuple[str, ...], list[str]] = {}


    @property
    def n(self) -> int:
        return len(self.instr)

    def _input(self, kind: str, message: str, **kw: Any) -> None:
        self.problems.append(Finding("input", kind, message, **kw))
