"""A flat, resolved view of a :class:`Program` that every check reads.

Instructions get global ids (``gid``) in stream order; names (items, tensors,
units, kinds) are resolved once, and whatever does not resolve becomes an
``input`` finding instead of an exception later. Memory is cut into
*segments*: the elementary byte ranges between item boundaries of one core's
bounded space, one segment per item of an unbounded space, and the cells of a
grid over each written GM tensor (row and column boundaries of all regions that
touch it). Two accesses overlap exactly when they share a segment, which is
what lets the race detector keep per-segment state.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import attrs
import numpy as np

from staticsched._fields import positive_ints
from staticsched.model.graphs import DisjointSets
from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.opgraph import Tensor
from staticsched.model.opkinds import KINDS
from staticsched.model.program import (
    FLAG_KINDS,
    SET_KINDS,
    SYNC_KINDS,
    SYNC_MNEMONICS,
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
    _, src_core, dst_core, event = key
    return f"cross flag core {src_core}->core {dst_core} id {event}"


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


class ProgramIndex:
    """Resolved instructions, flag keys, memory segments and ``input`` findings of a program.

    Parameters
    ----------
    program, hw
        What to index. Nothing here trusts ``Instr.cycle``; it is only copied into ``cycle``
        for the conformance check and timed mode.
    """

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
        self.role: list[int] = []
        self.key_of: list[Key | None] = []
        self.dur: list[int] = []
        self.cycle: list[int] = []
        self.latency: list[int] = []
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
        self._missing: dict[tuple[str, ...], list[str]] = {}

        self._check_header()
        self._index_tensors()
        self._index_items()
        self._index_streams()
        self._index_segments()
        self._index_components()
        self._index_writers()

    # ------------------------------------------------------------------ helpers
    @property
    def n(self) -> int:
        return len(self.instr)

    def _input(self, kind: str, message: str, **kw: Any) -> None:
        self.problems.append(Finding("input", kind, message, **kw))

    def unit_of(self, gid: int) -> str:
        return self.streams[self.stream_of[gid]].unit

    def core_of(self, gid: int) -> int:
        return self.streams[self.stream_of[gid]].core

    def op_label(self, gid: int) -> str:
        """The id of a micro-op, or ``core<c>.<PIPE>#<index>`` for a sync instruction."""
        ins = self.instr[gid]
        if self.role[gid] == OP and ins.id:
            return ins.id
        return f"core{self.core_of(gid)}.{self.unit_of(gid)}#{self.pos_of[gid]}"

    def describe(self, gid: int) -> str:
        """``'load3' (core 0 MTE2)`` or ``SET_FLAG MTE2->CUBE id 0 (core 0 MTE2#7, after 'load3')``."""
        ins = self.instr[gid]
        s = self.stream_of[gid]
        core, unit = self.streams[s].core, self.streams[s].unit
        if self.role[gid] == OP:
            return f"'{self.op_label(gid)}' (core {core} {unit})"
        if ins.kind in _FLAGS:
            what = f"{SYNC_MNEMONICS[ins.kind]} {ins.src}->{ins.dst} id {ins.event}"
        else:
            what = f"{SYNC_MNEMONICS[ins.kind]} peer core {ins.peer_core} id {ins.event}"
        return f"{what} (core {core} {unit}#{self.pos_of[gid]}{self._context(gid)})"

    def _context(self, gid: int) -> str:
        """Where a sync instruction sits: after / before the nearest micro-op of its stream."""
        gids = self.stream_gids[self.stream_of[gid]]
        pos = self.pos_of[gid]
        for p in range(pos - 1, -1, -1):
            if self.role[gids[p]] == OP:
                return f", after {self.op_label(gids[p])!r}"
        for p in range(pos + 1, len(gids)):
            if self.role[gids[p]] == OP:
                return f", before {self.op_label(gids[p])!r}"
        return ""

    # ------------------------------------------------------------------ header, tensors, items
    def _check_header(self) -> None:
        prog, hw = self.program, self.hw
        if prog.mode not in ("flags", "timed"):
            self._input(
                "bad_mode", f"program mode {prog.mode!r} is not 'flags' or 'timed'; checked as 'flags'"
            )
        if prog.hw != hw.name:
            self._input(
                "hw_mismatch",
                f"program was built for hardware {prog.hw!r} but is verified against {hw.name!r}",
            )

    def _index_tensors(self) -> None:
        for t in self.program.tensors:
            if t.name in self.tensors:
                self._input("duplicate_tensor", f"tensor '{t.name}' is declared twice")
                continue
            if not positive_ints(t.shape, 2):
                self._input("bad_shape", f"tensor '{t.name}': shape {list(t.shape)} is not two positive ints")
            if t.dtype not in DTYPE_BYTES:
                self._input("bad_dtype", f"tensor '{t.name}': unknown dtype {t.dtype!r}")
            self.tensors[t.name] = t

    def _index_items(self) -> None:
        hw = self.hw
        known = {sp.name: sp.bounded for sp in hw.spaces}
        for it in self.program.items:
            w = f"item '{it.name}'"
            if it.name in self.items:
                self._input("duplicate_item", f"{w} is declared twice")
                continue
            self.items[it.name] = it
            if known.get(it.space, False):
                self._bounded.add(it.name)
            if it.space and it.space not in known:
                self._input(
                    "unknown_space",
                    f"{w}: unknown space '{it.space}' (hardware '{hw.name}' has {', '.join(hw.space_names)})",
                    core=it.core,
                )
            if it.name in self._bounded and not 0 <= it.core < hw.cores:
                self._input(
                    "unknown_core", f"{w}: core {it.core} out of range 0..{hw.cores - 1}", core=it.core
                )
            if it.bytes < 0:
                self._input("bad_bytes", f"{w}: bytes must be >= 0, got {it.bytes}")
            if it.dtype and it.dtype not in DTYPE_BYTES:
                self._input("bad_dtype", f"{w}: unknown dtype {it.dtype!r}")
            elif it.dtype and it.shape:
                need = math.prod(it.shape) * DTYPE_BYTES[it.dtype]
                if need == it.bytes and min(it.shape) > 0:
                    continue
                if need > it.bytes or any(x <= 0 for x in it.shape):
                    self._input(
                        "bad_shape",
                        f"{w}: shape {list(it.shape)} of {it.dtype} needs {need} bytes, item has {it.bytes}",
                    )

    def bounded(self, it: ProgItem) -> bool:
        """True when the item lives at an address of a capacity-limited per-core space."""
        return bool(it.space) and self.hw.has_space(it.space) and self.hw.space(it.space).bounded

    def is_bounded(self, name: str) -> bool:
        """:meth:`bounded` of a declared item, by name (cached)."""
        return name in self._bounded

    # ------------------------------------------------------------------ instructions
    def _index_streams(self) -> None:
        hw = self.hw
        units = set(hw.unit_names)
        seen_streams: set[tuple[int, str]] = set()
        for s, st in enumerate(self.streams):
            if (st.core, st.unit) in seen_streams:
                self._input(
                    "duplicate_stream", f"core {st.core} has two streams for pipe {st.unit}", core=st.core
                )
            seen_streams.add((st.core, st.unit))
            if not 0 <= st.core < hw.cores:
                self._input(
                    "unknown_core",
                    f"stream core {st.core} {st.unit}: core out of range 0..{hw.cores - 1}",
                    core=st.core,
                    pipes=(st.unit,),
                )
            if st.unit not in units:
                self._input(
                    "unknown_unit",
                    f"stream core {st.core} {st.unit}: hardware '{hw.name}' has no pipe '{st.unit}' "
                    f"(pipes: {', '.join(hw.unit_names)})",
                    core=st.core,
                    pipes=(st.unit,),
                )
            base = len(self.instr)
            n = len(st.instrs)
            self.instr.extend(st.instrs)
            self.stream_of.extend([s] * n)
            self.pos_of.extend(range(n))
            self.stream_gids.append(list(range(base, base + n)))
            self._index_stream(base, st)

    def _index_stream(self, base: int, st: Any) -> None:
        """Index one stream's instructions; sync instructions (most of a chip's ~10^6) take an
        inlined path, everything else :meth:`_index_instr`."""
        core, unit = st.core, st.unit
        flag_latency, cross_latency = self.hw.sync.flag_latency, self.hw.sync.cross_core_latency
        role, dur, accesses, latency, key_of, cycle = (
            self.role.append,
            self.dur.append,
            self.accesses.append,
            self.latency.append,
            self.key_of.append,
            self.cycle.append,
        )
        sets_of, waits_of = self.sets_of, self.waits_of
        for pos, ins in enumerate(st.instrs):
            kind, cyc = ins.kind, ins.cycle
            if kind not in _SYNC or type(cyc) is not int or cyc < 0:
                self._index_instr(base + pos, ins, core, unit)
                continue
            cycle(cyc)
            dur(0)
            accesses(())
            if kind == "set_flag" or kind == "wait_flag":
                key: Key = ("flag", core, ins.src, ins.dst, ins.event)
                latency(flag_latency)
            elif kind == "set_cross":
                key = ("cross", core, ins.peer_core, ins.event)
                latency(cross_latency)
            else:
                key = ("cross", ins.peer_core, core, ins.event)
                latency(cross_latency)
            key_of(key)
            if kind in _SETS:
                role(SET)
                table = sets_of
            else:
                role(WAIT)
                table = waits_of
            got = table.get(key)
            if got is None:
                table[key] = [base + pos]
            else:
                got.append(base + pos)

    def _index_instr(self, gid: int, ins: Instr, core: int, unit: str) -> None:
        # runs once per instruction (~10^6 on a chip): the common case is checked first and
        # messages are only formatted for problems
        cyc = ins.cycle
        if isinstance(cyc, int) and cyc >= 0:
            self.cycle.append(cyc)
        else:
            self.cycle.append(cyc if isinstance(cyc, int) else 0)
            self._input("bad_cycle", f"core {core} {unit}#{self.pos_of[gid]}: cycle {cyc!r} is not >= 0")
        kind_name = ins.kind
        if kind_name in _SYNC:
            role = SET if kind_name in _SETS else WAIT
            self.role.append(role)
            self.dur.append(0)
            self.accesses.append(())
            if kind_name in _FLAGS:
                key: Key = ("flag", core, ins.src, ins.dst, ins.event)
                self.latency.append(self.hw.sync.flag_latency)
            elif kind_name == "set_cross":
                key = ("cross", core, ins.peer_core, ins.event)
                self.latency.append(self.hw.sync.cross_core_latency)
            else:
                key = ("cross", ins.peer_core, core, ins.event)
                self.latency.append(self.hw.sync.cross_core_latency)
            self.key_of.append(key)
            table = self.sets_of if role == SET else self.waits_of
            got = table.get(key)
            if got is None:
                table[key] = [gid]
            else:
                got.append(gid)
            return
        self.role.append(OP)
        self.key_of.append(None)
        self.latency.append(0)
        self.accesses.append(())  # filled in by _index_segments
        op_id, duration = ins.id, ins.duration

        def where() -> str:
            return f"op '{op_id}' (core {core} {unit})"

        if not op_id:
            self._input(
                "missing_id", f"core {core} {unit}#{self.pos_of[gid]}: micro-op without an id", core=core
            )
        elif op_id in self.op_gid:
            self._input("duplicate_op", f"{where()}: id used twice", ops=(op_id,), core=core)
        else:
            self.op_gid[op_id] = gid
        if isinstance(duration, int) and duration >= 1:
            self.dur.append(duration)
        else:
            self._input("bad_duration", f"{where()}: duration must be >= 1, got {duration!r}", core=core)
            self.dur.append(max(0, duration) if isinstance(duration, int) else 0)
        kind = KINDS.get(kind_name)
        if kind is None and kind_name != "op":
            self._input(
                "unknown_kind",
                f"{where()}: unknown instruction kind {kind_name!r} (kinds: op, {', '.join(KINDS)}, "
                f"{', '.join(SYNC_KINDS)})",
                ops=(op_id,),
                core=core,
            )
        items, bounded = self.items, self._bounded
        for names in (ins.reads, ins.writes):
            for name in names:
                it = items.get(name)
                if it is None:
                    self._input("unknown_item", f"{where()}: unknown item '{name}'", ops=(op_id,), core=core)
                elif it.core != core and name in bounded:
                    self._input(
                        "wrong_core",
                        f"{where()}: accesses item '{name}' that lives in {it.space} of core {it.core}",
                        ops=(op_id,),
                        core=core,
                    )
        if kind is None:
            return
        a = dict(ins.attrs)
        names_key = (kind_name, *a)
        missing = self._missing.get(names_key)
        if missing is None:
            missing = self._missing[names_key] = kind.missing(a)
        for name in missing:
            self._input(
                "missing_attr", f"{where()}: {kind_name} needs a {name!r} attribute", ops=(op_id,), core=core
            )
        if kind.gm:
            tensor, region = a.get("tensor"), _region(a.get("region"))
            if not isinstance(tensor, str) or not tensor:
                if "tensor" in a:
                    what = f"{where()}: {kind_name} needs a 'tensor' name, got {tensor!r}"
                    self._input("missing_attr", what, ops=(op_id,))
            elif region is None:
                self._input(
                    "bad_region",
                    f"{where()}: 'region' {a.get('region')!r} is not ((r0, r1), (c0, c1)) with r0<r1, c0<c1",
                    ops=(op_id,),
                )
            else:
                if tensor not in self.tensors:
                    self._input("unknown_tensor", f"{where()}: unknown tensor '{tensor}'", ops=(op_id,))
                self.gm_accesses.append(GmAccess(gid, tensor, region, kind.gm == "w"))

    # ------------------------------------------------------------------ memory segments
    def _index_segments(self) -> None:
        groups: dict[tuple[int, str], list[ProgItem]] = {}
        # how an access of each item reads in messages: "t3 = L1[0,1024) of core 0"
        labels: dict[str, str] = {}
        unbounded: set[str] = set()
        for it in self.items.values():
            if it.name in self._bounded:
                if it.bytes > 0:
                    groups.setdefault((it.core, it.space), []).append(it)
                else:
                    self._item_segs[it.name] = ()
                    labels[it.name] = f"{it.name} = {it.space} of core {it.core} (empty)"
            else:
                seg = self._new_segs(1)[0]
                self._item_segs[it.name] = (seg,)
                labels[it.name] = f"{it.name} = item '{it.name}'" + (f" in {it.space}" if it.space else "")
                self._gm_item_of_seg[seg] = it.name
                unbounded.add(it.name)
        for core, space in sorted(groups):
            items = groups[(core, space)]
            bounds = sorted({b for it in items for b in (it.offset, it.offset + it.bytes)})
            base = self._new_segs(len(bounds) - 1)[0] if len(bounds) > 1 else self.seg_count
            # a core's buffers are a few address ranges used by thousands of items
            spans: dict[tuple[int, int], tuple[int, ...]] = {}
            for it in items:
                key = (it.offset, it.bytes)
                segs = spans.get(key)
                if segs is None:
                    lo = bisect.bisect_left(bounds, it.offset)
                    hi = bisect.bisect_left(bounds, it.offset + it.bytes)
                    segs = spans[key] = tuple(range(base + lo, base + hi))
                self._item_segs[it.name] = segs
                labels[it.name] = f"{it.name} = {space}[{it.offset},{it.offset + it.bytes}) of core {core}"

        written = {g.tensor for g in self.gm_accesses if g.write}
        rows: dict[str, set[int]] = {}
        cols: dict[str, set[int]] = {}
        for g in self.gm_accesses:
            if g.tensor in written:
                (r0, r1), (c0, c1) = g.region
                rows.setdefault(g.tensor, set()).update((r0, r1))
                cols.setdefault(g.tensor, set()).update((c0, c1))
        grid = self.gm_grid
        for name in sorted(written):
            rb, cb = sorted(rows[name]), sorted(cols[name])
            base = self.seg_count
            self._new_segs((len(rb) - 1) * (len(cb) - 1))
            grid[name] = (rb, cb, base)
            self._gm_seg_owner.append((base, name))
        gm_by_gid: dict[int, list[GmAccess]] = {}
        for g in self.gm_accesses:
            gm_by_gid.setdefault(g.gid, []).append(g)

        item_segs = self._item_segs
        gm_written = self.gm_written
        accesses = self.accesses
        role, instr = self.role, self.instr
        # one Access object per distinct (data, direction): a chip has ~10^6 accesses of far
        # fewer items and regions
        made: dict[tuple, Access] = {}
        item_access: tuple[dict[str, Access], dict[str, Access]] = ({}, {})
        for name, segs in item_segs.items():
            gm = name in unbounded
            label = labels[name]
            # tuple.__new__ skips the NamedTuple constructor's Python frame (2 x 10^5 calls)
            item_access[0][name] = _new_tuple(Access, (label, segs, False, gm))
            item_access[1][name] = _new_tuple(Access, (label, segs, True, gm))
        number = {name: k for k, name in enumerate(self.items)}
        # every (micro-op, declared item) operand: gid, item number, read position or -1, write
        a_gid: list[int] = []
        a_item: list[int] = []
        a_pos: list[int] = []
        a_write: list[int] = []
        reads_of, writes_of = item_access
        written_items: set[str] = set()
        for gid in range(self.n):
            if role[gid] != OP:
                continue
            ins = instr[gid]
            acc = []
            for pos, name in enumerate(ins.reads):
                k = number.get(name)
                if k is not None:
                    a_gid.append(gid)
                    a_item.append(k)
                    a_pos.append(pos)
                    a_write.append(0)
                a = reads_of.get(name)
                if a is not None:
                    acc.append(a)
            for name in ins.writes:
                k = number.get(name)
                if k is not None:
                    a_gid.append(gid)
                    a_item.append(k)
                    a_pos.append(-1)
                    a_write.append(1)
                a = writes_of.get(name)
                if a is not None:
                    acc.append(a)
                    written_items.add(name)
            for g in gm_by_gid.get(gid, ()):
                key = (g.tensor, g.region, g.write)
                a = made.get(key)
                if a is None:
                    segs = ()
                    if g.tensor in grid:
                        segs = self.cells(g.tensor, g.region)
                        if g.write:
                            gm_written.update(segs)
                    a = made[key] = Access(region_text(g.tensor, g.region), segs, g.write, True)
                acc.append(a)
            accesses[gid] = tuple(acc)
        for name in written_items & unbounded:
            gm_written.update(item_segs[name])
        #: every (micro-op, declared item) operand as parallel arrays: gid, item number (in
        #: ``items`` order), position among the op's reads (-1 for a write), 1 for a write
        self.item_access = (
            np.array(a_gid, dtype=np.int64),
            np.array(a_item, dtype=np.int64),
            np.array(a_pos, dtype=np.int64),
            np.array(a_write, dtype=bool),
        )

    def cells(self, tensor: str, region: tuple[tuple[int, int], tuple[int, int]]) -> tuple[int, ...]:
        """The segments (grid cells) of a region of a written tensor, row-major."""
        rb, cb, base = self.gm_grid[tensor]
        (r0, r1), (c0, c1) = region
        i0, i1 = bisect.bisect_left(rb, r0), bisect.bisect_left(rb, r1)
        j0, j1 = bisect.bisect_left(cb, c0), bisect.bisect_left(cb, c1)
        ncol = len(cb) - 1
        if j1 - j0 == 1:
            return tuple(range(base + i0 * ncol + j0, base + i1 * ncol + j0, ncol))
        return tuple(base + i * ncol + j for i in range(i0, i1) for j in range(j0, j1))

    def gm_text(self, segs: Sequence[int]) -> str:
        """GM segments in words: the bounding region of the cells per tensor (with the count when
        the cells do not fill it) and the item names, e.g. ``GM y[64:96, 0:64]``."""
        parts = []
        by_tensor: dict[str, list[tuple[int, int]]] = {}
        for seg in sorted(set(segs)):
            item = self._gm_item_of_seg.get(seg)
            if item is not None:
                parts.append(f"item '{item}'")
                continue
            k = bisect.bisect_right(self._gm_seg_owner, (seg, "\uffff")) - 1
            if k < 0:
                continue
            base, name = self._gm_seg_owner[k]
            ncol = len(self.gm_grid[name][1]) - 1
            by_tensor.setdefault(name, []).append(divmod(seg - base, ncol))
        for name, ij in by_tensor.items():
            rb, cb, _ = self.gm_grid[name]
            i0, i1 = min(i for i, _ in ij), max(i for i, _ in ij) + 1
            j0, j1 = min(j for _, j in ij), max(j for _, j in ij) + 1
            text = region_text(name, ((rb[i0], rb[i1]), (cb[j0], cb[j1])))
            if len(ij) != (i1 - i0) * (j1 - j0):
                text = f"{len(ij)} cells within {text}"
            parts.append(text)
        return ", ".join(parts)

    def _new_segs(self, count: int) -> range:
        r = range(self.seg_count, self.seg_count + count)
        self.seg_count += count
        return r

    # ------------------------------------------------------------------ components
    def _index_components(self) -> None:
        """Cores linked by cross flags form one component; streams of different components are
        never ordered, so vector clocks only span one component."""
        sets = DisjointSets(sorted({st.core for st in self.streams}))
        for gid in range(self.n):
            key = self.key_of[gid]
            if key is not None and key[0] == "cross" and key[1] in sets and key[2] in sets:
                sets.union(key[1], key[2])
        self.comp_of_stream: list[int] = []
        self.local_of_stream: list[int] = []
        sizes: dict[int, int] = {}
        for st in self.streams:
            comp = sets.find(st.core)
            self.comp_of_stream.append(comp)
            self.local_of_stream.append(sizes.get(comp, 0))
            sizes[comp] = sizes.get(comp, 0) + 1
        self.comp_size = sizes

    def _index_writers(self) -> None:
        """Items several micro-ops write, and whether the program says which write each of
        their reads must see (``Instr.sees``; programs written before it was recorded do not)."""
        count: dict[str, set[str]] = {}
        records = False
        for gid in range(self.n):
            if self.role[gid] != OP:
                continue
            ins = self.instr[gid]
            records = records or bool(ins.sees)
            for name in ins.writes:
                count.setdefault(name, set()).add(ins.id)
        #: item -> how many distinct ops write it, for the items more than one op writes
        self.multi_written: dict[str, int] = {n: len(ids) for n, ids in count.items() if len(ids) > 1}
        #: whether the program records the intended writes (``sees``) at all
        self.records_sees = records

    # ------------------------------------------------------------------ queries used by checks
    def adopt_op_shapes(self, shapes: tuple[list[int], list[int]]) -> None:
        """Take :meth:`op_shapes` as a worker process computed it from this same index."""
        if self._shapes is None:
            self._shapes = shapes

    def op_shapes(self) -> tuple[list[int], list[int]]:
        """Micro-ops by *shape*: what the kind table computes for them (unit, duration, extents,
        route) depends only on the kind, the attributes (a region's shape, not where it lies)
        and the operand items' space, bytes, dtype and shape. A chip repeats a handful of shapes
        ~10^5 times, so the checks work per shape.

        Returns
        -------
        shape_of, first
            Per gid the shape number (-1: not a kinded micro-op), and per shape the first gid
            of it. An op whose attributes are not hashable (a hand-built program) is its own
            shape.
        """
        if self._shapes is None:
            item_key = {it.name: (it.space, it.bytes, it.dtype, it.shape) for it in self.items.values()}
            number: dict[tuple, int] = {}
            shape_of = [-1] * self.n
            first: list[int] = []
            role, instr = self.role, self.instr
            for gid in range(self.n):
                ins = instr[gid]
                if role[gid] != OP or ins.kind not in KINDS:
                    continue
                key = (
                    ins.kind,
                    cost_attrs(ins.attrs),
                    tuple(item_key.get(n) for n in ins.reads),
                    tuple(item_key.get(n) for n in ins.writes),
                )
                try:
                    k = number.setdefault(key, len(first))
                except TypeError:
                    k = len(first)
                if k == len(first):
                    first.append(gid)
                shape_of[gid] = k
            self._shapes = (shape_of, first)
        return self._shapes

    def flag_keys(self) -> list[Key]:
        """Every flag key used, sorted."""
        return sorted(set(self.sets_of) | set(self.waits_of))

    def capacity(self, key: Key) -> int:
        """Sets a flag key may have outstanding: 1 for an intra-core flag (binary), the
        hardware's ``cross_core_capacity`` for a cross-core one (a counting semaphore)."""
        return self.hw.sync.cross_core_capacity if key[0] == "cross" else 1


def cost_attrs(attrs_: tuple[tuple[str, Any], ...]) -> tuple:
    """The attributes as far as the kind table sees them: where a region lies in its tensor never
    matters, only its shape (so the ~10^5 loads of a chip share a handful of keys)."""
    out = []
    for k, v in attrs_:
        if k == "region":
            try:
                (r0, r1), (c0, c1) = v
                v = ("shape", r1 - r0, c1 - c0)
            except (TypeError, ValueError):
                pass
        elif k == "tensor":
            continue
        out.append((k, v))
    return tuple(out)
