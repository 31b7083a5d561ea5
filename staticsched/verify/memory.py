"""Memory checks: bounds, alignment, overlapping items, accesses outside live ranges, reads of
items nothing has written yet."""

from __future__ import annotations

import numpy as np

from staticsched.verify.index import ProgramIndex, region_text
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding


def placement_findings(ix: ProgramIndex) -> list[Finding]:
    """``out_of_bounds``, ``misaligned`` and ``item_overlap`` from the declared placements, and
    GM regions outside their tensor."""
    hw = ix.hw
    out: list[Finding] = []
    groups: dict[tuple[int, str], list] = {}
    for it in ix.items.values():
        if not ix.bounded(it):
            continue
        sp = hw.space(it.space)
        where = f"item '{it.name}' in {it.space} of core {it.core}"
        if it.offset < 0 or it.offset + it.bytes > sp.capacity:
            out.append(
                Finding(
                    "memory",
                    "out_of_bounds",
                    f"{where}: bytes [{it.offset}, {it.offset + it.bytes}) exceed the space's "
                    f"[0, {sp.capacity})",
                    core=it.core,
                )
            )
        if it.offset % sp.alignment:
            out.append(
                Finding(
                    "memory",
                    "misaligned",
                    f"{where}: offset {it.offset} is not a multiple of the {it.space} alignment "
                    f"{sp.alignment} (off by {it.offset % sp.alignment})",
                    core=it.core,
                )
            )
        if it.bytes > 0 and it.live_end > it.live_start:
            groups.setdefault((it.core, it.space), []).append(it)
    for key in sorted(groups):
        out.extend(_overlaps(groups[key]))
    for g in ix.gm_accesses:
        t = ix.tensors.get(g.tensor)
        if t is None or len(t.shape) != 2:
            continue
        (_, r1), (_, c1) = g.region
        if r1 > t.shape[0] or c1 > t.shape[1]:
            out.append(
                Finding(
                    "memory",
                    "out_of_bounds",
                    f"{ix.describe(g.gid)}: {region_text(g.tensor, g.region)} is outside tensor "
                    f"'{g.tensor}' of shape [{t.shape[0]}, {t.shape[1]}]",
                    ops=(ix.op_label(g.gid),),
                    core=ix.core_of(g.gid),
                    pipes=(ix.unit_of(g.gid),),
                )
            )
    return out


def _overlaps(items: list) -> list[Finding]:
    """Pairs of items overlapping in bytes while both are live, by a sweep over live starts:
    only the items still live when the next one starts can collide with it."""
    out = []
    active: list = []
    for it in sorted(items, key=lambda x: (x.live_start, x.live_end, x.offset, x.name)):
        active = [a for a in active if a.live_end > it.live_start]
        for a in active:
            if a.offset < it.offset + it.bytes and it.offset < a.offset + a.bytes:
                lo, hi = max(a.offset, it.offset), min(a.offset + a.bytes, it.offset + it.bytes)
                out.append(
                    Finding(
                        "memory",
                        "item_overlap",
                        f"items '{a.name}' [{a.offset}, {a.offset + a.bytes}) and '{it.name}' "
                        f"[{it.offset}, {it.offset + it.bytes}) share bytes [{lo}, {hi}) of {it.space} "
                        f"on core {it.core} while both are live (cycles [{a.live_start}, {a.live_end}) "
                        f"and [{it.live_start}, {it.live_end}))",
                        core=it.core,
                        cycle=it.live_start,
                    )
                )
        active.append(it)
    return out


def live_range_findings(ix: ProgramIndex, rep: Replay) -> list[Finding]:
    """``outside_live_range``: a micro-op of the nominal replay touching an item outside the
    item's declared ``[live_start, live_end)``; one finding per item (first access, count)."""
    gid, item, _, _ = ix.item_access
    if not len(gid):
        return []
    # an op reading and writing an item accesses it once (one int key per pair: a 1-d unique
    # is ten times faster than a row-wise one)
    span = ix.n + 1
    pairs = np.unique(item * span + gid)
    item, gid = pairs // span, pairs % span
    items = list(ix.items.values())
    lo = np.array([it.live_start for it in items], dtype=np.int64)
    hi = np.array([it.live_end for it in items], dtype=np.int64)
    start, end = np.asarray(rep.start, dtype=np.int64)[gid], np.asarray(rep.end, dtype=np.int64)[gid]
    bad = (start >= 0) & ((start < lo[item]) | (end > hi[item]))
    out = []
    for k in sorted(np.unique(item[bad]).tolist(), key=lambda k: items[k].name):
        it = items[k]
        mine = bad & (item == k)
        gs = gid[mine].tolist()
        g = min(gs, key=lambda x: (rep.start[x], x))
        more = f" ({len(gs) - 1} more accesses of it too)" if len(gs) > 1 else ""
        out.append(
            ix.finding_at(
                "memory",
                "outside_live_range",
                f"{ix.describe(g)} accesses item '{it.name}' at cycles [{rep.start[g]}, {rep.end[g]}), "
                f"outside its declared live range [{it.live_start}, {it.live_end}){more}",
                g,
                rep.start[g],
            )
        )
    return out


def uninitialized_read_findings(ix: ProgramIndex, rep: Replay) -> list[Finding]:
    """``uninitialized_read``: in the nominal replay a micro-op reads an on-chip item before any
    other op has finished writing it (a reordering that keeps every access happens-before
    ordered but turns a RAW into a WAR is no race, yet reads garbage); one finding per item,
    its earliest such read. GM data (items of unbounded spaces, tensor regions) is the
    dataflow check's."""
    gid, item, pos, write = ix.item_access
    items = list(ix.items.values())
    if not len(gid):
        return []
    start = np.asarray(rep.start, dtype=np.int64)[gid]
    end = np.asarray(rep.end, dtype=np.int64)[gid]
    ran = start >= 0
    never = np.iinfo(np.int64).max
    first_write_end = np.full(len(items), never, dtype=np.int64)
    w = ran & write
    np.minimum.at(first_write_end, item[w], end[w])
    bounded = np.array([ix.is_bounded(it.name) for it in items], dtype=bool)
    bad = ran & ~write & bounded[item] & (first_write_end[item] > start)
    # the earliest bad read of each item, in (start, gid, read position) order
    order = np.lexsort((pos[bad], gid[bad], start[bad]))
    out = []
    seen: set[int] = set()
    for k, g, st in zip(
        item[bad][order].tolist(), gid[bad][order].tolist(), start[bad][order].tolist(), strict=True
    ):
        if k in seen:
            continue
        seen.add(k)
        ready = int(first_write_end[k])
        when = "no op writes it" if ready == never else f"its first write ends at {ready}"
        out.append(
            ix.finding_at(
                "memory",
                "uninitialized_read",
                f"{ix.describe(g)} reads item '{items[k].name}' at cycle {st} but {when}",
                g,
                st,
            )
        )
    return out
