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

import math
from typing import Any

from staticsched._fields import positive_ints
from staticsched.model.graphs import DisjointSets
from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.opkinds import KINDS
from staticsched.model.program import (
    SYNC_MNEMONICS,
    ProgItem,
    Program,
)
from staticsched.verify.index_gm import GmSegments
from staticsched.verify.index_state import (
    _FLAGS,
    OP,
    SET,
    WAIT,
    Access,
    GmAccess,
    Key,
    key_text,
    region_text,
)
from staticsched.verify.index_streams import StreamIndex
from staticsched.verify.report import Finding

__all__ = ["OP", "SET", "WAIT", "Access", "GmAccess", "Key", "ProgramIndex", "cost_attrs", "key_text",
           "region_text"]


class ProgramIndex(StreamIndex, GmSegments):
    """Resolved instructions, flag keys, memory segments and ``input`` findings of a program.

    Parameters
    ----------
    program, hw
        What to index. Nothing here trusts ``Instr.cycle``; it is only copied into ``cycle``
        for the conformance check and timed mode.
    """
    def __init__(self, program: Program, hw: Hardware) -> None:
        super().__init__(program, hw)
        self._check_header()
        self._index_tensors()
        self._index_items()
        self._index_streams()
        self._index_segments()
        self._index_components()
        self._index_writers()

    # ------------------------------------------------------------------ helpers
    def unit_of(self, gid: int) -> str:
        return self.streams[self.stream_of[gid]].unit

    def core_of(self, gid: int) -> int:
        return self.streams[self.stream_of[gid]].core

    def core_per_gid(self) -> list[int]:
        """:meth:`core_of` of every instruction."""
        cores = [st.core for st in self.streams]
        return [cores[s] for s in self.stream_of]

    def op_label(self, gid: int) -> str:
        """The id of a micro-op, or ``core<c>.<PIPE>#<index>`` for a sync instruction."""
        ins = self.instr[gid]
        if self.role[gid] == OP and ins.id:
            return ins.id
        return f"core{self.core_of(gid)}.{self.unit_of(gid)}#{self.file_pos.get(gid, self.pos_of[gid])}"

    def finding_at(self, check: str, kind: str, message: str, gid: int, cycle: int) -> Finding:
        """A finding about instruction ``gid`` at ``cycle``: its op, core and pipe."""
        return Finding(check, kind, message, ops=(self.op_label(gid),), core=self.core_of(gid),
                       pipes=(self.unit_of(gid),), cycle=cycle)

    def describe(self, gid: int) -> str:
        """``'load3' (core 0 MTE2)`` or ``SET_FLAG MTE2->CUBE id 0 (core 0 MTE2#7, after 'load3')``."""
        ins = self.instr[gid]
        s = self.stream_of[gid]
        core, unit = self.streams[s].core, self.streams[s].unit
        if self.role[gid] == OP:
            return f"'{self.op_label(gid)}' (core {core} {unit})"
        if ins.kind in _FLAGS:
            what = f"{SYNC_MNEMONICS[ins.kind]} {ins.src}->{ins.dst} id {ins.event}"
        elif ins.mode in ("0", "2"):
            way = "to" if self.role[gid] == SET else "from"
            what = f"{SYNC_MNEMONICS[ins.kind]} mode {ins.mode} {way} core {ins.peer_core} id {ins.event}"
        else:
            how = " GM word" if ins.mode == "gm" else ""
            what = f"{SYNC_MNEMONICS[ins.kind]}{how} peer core {ins.peer_core} id {ins.event}"
        return f"{what} (core {core} {unit}#{self.file_pos.get(gid, self.pos_of[gid])}{self._context(gid)})"

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

    # ------------------------------------------------------------------ memory segments
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

    def bounded_items(self) -> dict[int, list[ProgItem]]:
        """The items of capacity-limited spaces by core, in declaration order (cached): what a
        part of the numeric replay over some cores needs of a chip's ~10^5 items."""
        if self._by_core is None:
            by_core: dict[int, list[ProgItem]] = {}
            for it in self.items.values():
                if it.name in self._bounded:
                    by_core.setdefault(it.core, []).append(it)
            self._by_core = by_core
        return self._by_core

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
