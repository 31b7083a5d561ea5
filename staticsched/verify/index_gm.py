"""Cutting a program's memory into segments: the byte ranges between item boundaries of a
core's bounded space, one segment per item of an unbounded space, and the cells of a grid
over each written GM tensor (a mixin of :class:`~staticsched.verify.index.ProgramIndex`)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from staticsched.model.program import ProgItem
from staticsched.verify.index_state import OP, Access, GmAccess, IndexState, _new_tuple, region_text


class GmSegments(IndexState):
    """The memory segments of an index, and the queries on GM cells."""

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
        reads_of, writes_of = item_access
        # per declared item (every one has segments): its number and its two accesses, one
        # lookup per operand of a chip's ~5 x 10^5
        known = {name: (k, reads_of[name], writes_of[name]) for k, name in enumerate(self.items)}
        # every (micro-op, declared item) operand: gid, item number, read position or -1, write
        a_gid: list[int] = []
        a_item: list[int] = []
        a_pos: list[int] = []
        a_write: list[int] = []
        written_items: set[str] = set()
        for gid in range(self.n):
            if role[gid] != OP:
                continue
            ins = instr[gid]
            acc = []
            for pos, name in enumerate(ins.reads):
                got = known.get(name)
                if got is not None:
                    a_gid.append(gid)
                    a_item.append(got[0])
                    a_pos.append(pos)
                    a_write.append(0)
                    acc.append(got[1])
            for name in ins.writes:
                got = known.get(name)
                if got is not None:
                    a_gid.append(gid)
                    a_item.append(got[0])
                    a_pos.append(-1)
                    a_write.append(1)
                    acc.append(got[2])
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
