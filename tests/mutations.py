"""Program mutations that inject one known bug each, for testing the verifier.

Every helper is a pure function ``Program -> Program`` (``Hardware -> Hardware`` for
:func:`shrink_capacity`). Where it has to choose a target it draws from
``np.random.default_rng(seed)`` over the candidates in a fixed order, so the same seed
gives the same mutant. Cycles are left as they were (a mutant usually also fails
conformance; :func:`restate` rewrites them, as an adversary would); nothing here consults
the verifier. The helpers that need the cost model read the kind table, as the emitter does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import networkx as nx
import numpy as np
from oracles import hb_graph

from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opkinds import KINDS, item_shape
from staticsched.model.program import Instr, Program, Stream
from staticsched.verify import retime

WAITS = ("wait_flag", "wait_cross")
SETS = ("set_flag", "set_cross")


class NoCandidate(ValueError):
    """The program has nothing this mutation could change."""


def _pick(candidates: list, seed: int, what: str):
    if not candidates:
        raise NoCandidate(f"no {what} to mutate")
    return candidates[int(np.random.default_rng(seed).integers(len(candidates)))]


def _with_stream(p: Program, s: int, instrs: list[Instr]) -> Program:
    streams = list(p.streams)
    streams[s] = Stream(streams[s].core, streams[s].unit, instrs)
    return attrs.evolve(p, streams=streams)


def _positions(p: Program, pred: Callable[[Instr], bool]) -> list[tuple[int, int]]:
    return [(s, i) for s, st in enumerate(p.streams) for i, ins in enumerate(st.instrs) if pred(ins)]


def _delete(p: Program, kinds: tuple[str, ...], seed: int) -> Program:
    s, i = _pick(_positions(p, lambda ins: ins.kind in kinds), seed, "/".join(kinds))
    instrs = list(p.streams[s].instrs)
    del instrs[i]
    return _with_stream(p, s, instrs)


def delete_wait(p: Program, seed: int = 0) -> Program:
    """Remove one WAIT_FLAG / WAIT_CROSS."""
    return _delete(p, WAITS, seed)


def delete_set(p: Program, seed: int = 0) -> Program:
    """Remove one SET_FLAG / SET_CROSS."""
    return _delete(p, SETS, seed)


def change_event_id(p: Program, seed: int = 0, event_ids: int = 8) -> Program:
    """Give one set or wait (not its partner) a different id in ``0..event_ids-1``."""
    rng = np.random.default_rng(seed)
    cands = _positions(p, lambda ins: ins.kind in SETS + WAITS)
    if not cands:
        raise NoCandidate("no set/wait to mutate")
    s, i = cands[int(rng.integers(len(cands)))]
    ins = p.streams[s].instrs[i]
    new = (ins.event + 1 + int(rng.integers(event_ids - 1))) % event_ids
    instrs = list(p.streams[s].instrs)
    instrs[i] = attrs.evolve(ins, event=new)
    return _with_stream(p, s, instrs)


def hoist_above_wait(p: Program, seed: int = 0) -> Program:
    """Move a micro-op from right after a WAIT to right before it (out of its guard)."""
    st = p.streams

    def guarded(s: int, i: int) -> bool:
        return i + 1 < len(st[s].instrs) and not st[s].instrs[i + 1].is_sync

    s, i = _pick([c for c in _positions(p, lambda ins: ins.kind in WAITS) if guarded(*c)], seed, "guarded op")
    instrs = list(st[s].instrs)
    instrs[i], instrs[i + 1] = instrs[i + 1], instrs[i]
    return _with_stream(p, s, instrs)


def swap_ops(p: Program, seed: int = 0) -> Program:
    """Swap two consecutive micro-ops of one pipe that have a WAIT between them."""
    cands = []
    for s, stream in enumerate(p.streams):
        ops = [i for i, ins in enumerate(stream.instrs) if not ins.is_sync]
        for a, b in itertools.pairwise(ops):
            if any(stream.instrs[x].kind in WAITS for x in range(a + 1, b)):
                cands.append((s, a, b))
    s, a, b = _pick(cands, seed, "pair of ops around a wait")
    instrs = list(p.streams[s].instrs)
    instrs[a], instrs[b] = instrs[b], instrs[a]
    return _with_stream(p, s, instrs)


def overlap_items(p: Program, seed: int = 0) -> Program:
    """Move one item onto another's bytes in the same core and space while both are live."""
    items = list(p.items)
    cands = []
    for x, a in enumerate(items):
        for y, b in enumerate(items):
            if (
                x != y
                and a.space not in ("", "GM")
                and (a.core, a.space) == (b.core, b.space)
                and a.bytes > 0
                and b.bytes > 0
                and a.offset != b.offset
                and a.live_start < b.live_end
                and b.live_start < a.live_end
            ):
                cands.append((x, y))
    x, y = _pick(cands, seed, "pair of items live together")
    items[y] = attrs.evolve(items[y], offset=items[x].offset)
    return attrs.evolve(p, items=items)


def reuse_id_early(p: Program, seed: int = 0) -> Program:
    """Relabel a set/wait pair with the id of the pair issued just before it on the same pipe
    pair, i.e. reuse that id before its wait (the pairing stays consistent)."""
    keyed: dict[tuple, list[tuple[int, int]]] = {}
    for s, i in _positions(p, lambda ins: ins.kind == "set_flag"):
        ins = p.streams[s].instrs[i]
        keyed.setdefault((p.streams[s].core, ins.src, ins.dst), []).append((s, i))
    cands = []
    for pair, sets in sorted(keyed.items()):
        for (s0, i0), (s1, i1) in itertools.pairwise(sets):
            if p.streams[s0].instrs[i0].event != p.streams[s1].instrs[i1].event:
                cands.append((pair, s1, i1, p.streams[s0].instrs[i0].event))
    pair, s, i, new = _pick(cands, seed, "consecutive pairs with different ids")
    old = p.streams[s].instrs[i].event
    # the wait consuming this set: same n-th position among the waits of (pair, old id)
    nth = sum(
        1 for x in p.streams[s].instrs[:i] if x.kind == "set_flag" and (x.dst, x.event) == (pair[2], old)
    )
    out = _with_stream(
        p,
        s,
        [
            *p.streams[s].instrs[:i],
            attrs.evolve(p.streams[s].instrs[i], event=new),
            *p.streams[s].instrs[i + 1 :],
        ],
    )
    for w, st in enumerate(out.streams):
        if st.core != pair[0] or st.unit != pair[2]:
            continue
        seen = 0
        instrs = list(st.instrs)
        for j, ins in enumerate(instrs):
            if ins.kind == "wait_flag" and (ins.src, ins.event) == (pair[1], old):
                if seen == nth:
                    instrs[j] = attrs.evolve(ins, event=new)
                    return _with_stream(out, w, instrs)
                seen += 1
    raise NoCandidate("the relabelled set has no wait")


def corrupt_load_region(p: Program, seed: int = 0) -> Program:
    """Point one load at another load's GM region of the same tensor and size."""
    loads = _positions(p, lambda ins: ins.kind == "load")
    region = {(s, i): dict(p.streams[s].instrs[i].attrs) for s, i in loads}
    cands = []
    for a in loads:
        for b in loads:
            ra, rb = region[a], region[b]
            if ra["tensor"] == rb["tensor"] and ra["region"] != rb["region"]:
                (r0, r1), (c0, c1) = ra["region"]
                (q0, q1), (d0, d1) = rb["region"]
                if (r1 - r0, c1 - c0) == (q1 - q0, d1 - d0):
                    cands.append((a, b))
    (s, i), b = _pick(cands, seed, "pair of same-size loads")
    attrs_ = dict(region[(s, i)], region=region[b]["region"])
    instrs = list(p.streams[s].instrs)
    instrs[i] = attrs.evolve(instrs[i], attrs=attrs_)
    return _with_stream(p, s, instrs)


def first_load_of(p: Program, core: int, **changes: Any) -> Program:
    """``p`` with attributes of the first load of ``core`` (its MTE2 stream) changed."""
    s = next(j for j, st in enumerate(p.streams) if st.core == core and st.unit == "MTE2")
    instrs = list(p.streams[s].instrs)
    i = next(j for j, ins in enumerate(instrs) if ins.kind == "load")
    instrs[i] = attrs.evolve(instrs[i], attrs={**dict(instrs[i].attrs), **changes})
    return _with_stream(p, s, instrs)


def shrink_capacity(hw: Hardware, p: Program, seed: int = 0) -> Hardware:
    """The hardware with one space the program uses made one byte too small for its items."""
    bounded = {sp.name: sp for sp in hw.spaces if sp.bounded}
    used: dict[str, int] = {}
    for it in p.items:
        if it.space in bounded and it.bytes > 0:
            used[it.space] = max(used.get(it.space, 0), it.offset + it.bytes)
    name = _pick(sorted(used), seed, "bounded space in use")
    spaces = [attrs.evolve(sp, capacity=used[name] - 1) if sp.name == name else sp for sp in hw.spaces]
    return attrs.evolve(hw, spaces=spaces)


# --------------------------------------------------------------------------- GM dataflow


def _gm(ins: Instr) -> tuple[str, tuple] | None:
    """(tensor, region) of a load/store."""
    if ins.kind not in ("load", "store"):
        return None
    a = dict(ins.attrs)
    return a["tensor"], a["region"]


def _meets(r1: tuple, r2: tuple) -> bool:
    (a0, a1), (b0, b1) = r1
    (c0, c1), (d0, d1) = r2
    return a0 < c1 and c0 < a1 and b0 < d1 and d0 < b1


def _gm_deps(p: Program) -> list[tuple[int, int, int, int]]:
    """(reader stream, index, writer stream, index) for every micro-op reading GM data whose only
    writer is another micro-op: a load of cells one store alone writes, or a read of an item of
    GM (or no space) that one op alone writes. Sorted."""
    where = {
        (s, i): ins for s, st in enumerate(p.streams) for i, ins in enumerate(st.instrs) if not ins.is_sync
    }
    stores = [(pos, *_gm(ins)) for pos, ins in where.items() if ins.kind == "store"]
    out = set()
    for pos, ins in where.items():
        if ins.kind != "load":
            continue
        tensor, region = _gm(ins)
        meeting = [(w, r) for w, t, r in stores if t == tensor and _meets(region, r)]
        for w, r in meeting:
            if not any(_meets(r, r2) for w2, t2, r2 in stores if w2 != w and t2 == tensor):
                out.add((*pos, *w))
    gm_items = {it.name for it in p.items if it.space in ("", "GM")}
    writers: dict[str, list[tuple[int, int]]] = {}
    for pos, ins in where.items():
        for name in ins.writes:
            if name in gm_items:
                writers.setdefault(name, []).append(pos)
    for pos, ins in where.items():
        for name in ins.reads:
            ws = writers.get(name, [])
            if len(ws) == 1 and ws[0] != pos:
                out.add((*pos, *ws[0]))
    return sorted(out)


def _moved(instrs: list[Instr], src: int, dst: int) -> list[Instr]:
    """``instrs`` with the instruction at ``src`` moved to position ``dst`` (of the result)."""
    out = list(instrs)
    ins = out.pop(src)
    out.insert(dst, ins)
    return out


def _cross_pairs(p: Program) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(set position, wait position) of every cross-core flag pair whose key has one setting and
    one waiting stream (so the n-th set is paired with the n-th wait in program order)."""
    sets: dict[tuple, list[tuple[int, int]]] = {}
    waits: dict[tuple, list[tuple[int, int]]] = {}
    for s, st in enumerate(p.streams):
        for i, ins in enumerate(st.instrs):
            if ins.kind == "set_cross":
                sets.setdefault((st.core, ins.peer_core, ins.event), []).append((s, i))
            elif ins.kind == "wait_cross":
                waits.setdefault((ins.peer_core, st.core, ins.event), []).append((s, i))
    out = []
    for key in sorted(sets):
        ss, ws = sets[key], waits.get(key, [])
        if len({x for x, _ in ss}) == 1 and len({x for x, _ in ws}) == 1:
            out += list(zip(ss, ws, strict=False))
    return out


def reverse_cross_pair(p: Program, seed: int = 0) -> Program:
    """Reverse a cross-core SET/WAIT pair around a dependency through GM (a store -> load, or a GM
    item's writer -> reader): the writer's core now *waits* right before the write and the
    reader's core *sets* right after the read, so the read is ordered before the write (no
    race: everything stays ordered).

    The new pair uses an id unused on the reversed core pair; candidates whose reversal would
    close a happens-before cycle (a deadlock, not this bug) are skipped.
    """
    pairs = _cross_pairs(p)
    cands = []
    for rs, ri, ws, wi in _gm_deps(p):
        for (ss, si), (ts, ti) in pairs:
            if ss == ws and si > wi and ts == rs and ti < ri:
                cands.append((rs, ri, ws, wi, si, ti))
    rng = np.random.default_rng(seed)
    for k in rng.permutation(len(cands)).tolist():
        rs, ri, ws, wi, set_at, wait_at = cands[k]
        rcore, wcore = p.streams[rs].core, p.streams[ws].core
        used = {
            ins.event
            for st in p.streams
            for ins in st.instrs
            if (ins.kind == "set_cross" and st.core == rcore and ins.peer_core == wcore)
            or (ins.kind == "wait_cross" and st.core == wcore and ins.peer_core == rcore)
        }
        event = min(set(range(16)) - used, default=None)
        if event is None:
            continue
        writer = list(p.streams[ws].instrs)
        del writer[set_at]
        writer.insert(wi, Instr("wait_cross", 0, event=event, peer_core=rcore))
        reader = list(p.streams[rs].instrs)
        del reader[wait_at]
        reader.insert(ri, Instr("set_cross", 0, event=event, peer_core=wcore))  # right after the read
        out = _with_stream(_with_stream(p, ws, writer), rs, reader)
        if _acyclic(out):
            return out
    raise NoCandidate("no cross-core GM dependency whose flag pair can be reversed without a deadlock")


def _acyclic(p: Program) -> bool:
    """Independent check that program order plus n-th set -> n-th wait has no cycle."""
    return nx.is_directed_acyclic_graph(hb_graph(p))


def _orders(p: Program) -> tuple[dict[tuple, bool], dict[tuple, tuple]] | None:
    """Happens-before direction of every two conflicting accesses of ``p`` (None when two are
    unordered or HB has a cycle), and per same-data pair ``(ida, idb)`` its data and which of
    the two accesses write: ``(data, write a, write b)``."""
    g = hb_graph(p)
    if not nx.is_directed_acyclic_graph(g):
        return None
    reach = {n: nx.descendants(g, n) for n in g}
    items = {it.name: it for it in p.items}
    acc = []
    for s, st in enumerate(p.streams):
        for i, ins in enumerate(st.instrs):
            if ins.is_sync:
                continue
            for name, write in [(n, False) for n in ins.reads] + [(n, True) for n in ins.writes]:
                it = items[name]
                if it.space in ("", "GM"):
                    place = ("item", name, 0, 1)
                else:
                    place = (it.core, it.space, it.offset, it.offset + it.bytes)
                acc.append(((s, i), ins.id, name, place, write))
            if ins.kind in ("load", "store"):
                a = dict(ins.attrs)
                (r0, r1), (c0, c1) = a["region"]
                place = ("gm", a["tensor"], r0, r1, c0, c1)
                acc.append(((s, i), ins.id, place, place, ins.kind == "store"))
    out: dict[tuple, bool] = {}
    data: dict[tuple, tuple] = {}
    for (na, ida, da, pa, wa), (nb, idb, db, pb, wb) in itertools.combinations(acc, 2):
        if ida == idb or not (wa or wb) or not _conflict(pa, pb):
            continue
        if nb in reach[na]:
            first = True
        elif na in reach[nb]:
            first = False
        else:
            return None  # unordered: a race, not an equivalent program
        if da == db:
            out[("same", ida, idb)] = first
            data[(ida, idb)] = (da, wa, wb)
        else:
            # items sharing bytes: one direction for every pair of their accesses
            key = ("shared", *sorted((str(da), str(db))))
            before = first if str(da) < str(db) else not first
            if out.setdefault(key, before) != before:
                return None
    return out, data


def _reversed(program: Program, mutant: Program) -> list[tuple] | None:
    """The same-data pairs of accesses whose order ``mutant`` reverses, as ``(data, write a,
    write b, writers of data)``; None when either program has unordered conflicting accesses
    (or two items sharing bytes whose accesses interleave)."""
    a, b = _orders(program), _orders(mutant)
    if a is None or b is None:
        return None
    (oa, data), (ob, _) = a, b
    writers: dict = {}
    for ins in (i for st in program.streams for i in st.instrs if not i.is_sync):
        for name in ins.writes:
            writers.setdefault(name, set()).add(ins.id)
        if ins.kind == "store":
            a_ = dict(ins.attrs)
            (r0, r1), (c0, c1) = a_["region"]
            writers.setdefault(("gm", a_["tensor"], r0, r1, c0, c1), set()).add(ins.id)
    flip = {("same", k[2], k[1]): not v for k, v in ob.items() if k[0] == "same"}
    out = []
    for k, v in oa.items():
        if k[0] == "same" and ob.get(k, flip.get(k)) != v:
            da, wa, wb = data[k[1:]]
            out.append((da, wa, wb, len(writers.get(da, ()))))
    return out


def equivalent(program: Program, mutant: Program) -> bool:
    """Whether a reordering mutant is the same program. Every two conflicting accesses (one a
    write) must be ordered by happens-before; accesses of the same data (an item, or cells of a
    GM tensor) in the same direction as in ``program``; and of two items sharing on-chip bytes,
    one item's accesses all before the other's (which one first may change: that is only a
    different use of the buffer). Then no check can (or should) tell the programs apart.
    Independent of the verifier."""
    return _reversed(program, mutant) == []


def same_reads(program: Program, mutant: Program) -> bool:
    """Whether every read of an item sees the same write in ``mutant`` as in ``program`` (the
    latest write of the item that happens before it, by op id), with no two conflicting
    accesses unordered in either. A mutant that reverses only writes nothing reads in between
    (two writes of an item, the last one never read) is then the same program to everything
    that can observe it. Independent of the verifier."""
    a, b = _seen(program), _seen(mutant)
    return a is not None and a == b


def _seen(p: Program) -> dict[tuple[str, str], str] | None:
    """Per (reading op id, item) the id of the write it sees; None when two conflicting accesses
    are unordered (or happens-before has a cycle)."""
    if _orders(p) is None:
        return None
    g = hb_graph(p)
    reach = {n: nx.descendants(g, n) for n in g}
    writes: dict[str, list[tuple[tuple[int, int], str]]] = {}
    reads: list[tuple[tuple[int, int], str, str]] = []
    for s, st in enumerate(p.streams):
        for i, ins in enumerate(st.instrs):
            if ins.is_sync:
                continue
            reads += [((s, i), ins.id, name) for name in ins.reads]
            for name in ins.writes:
                writes.setdefault(name, []).append(((s, i), ins.id))
    out = {}
    for node, op_id, name in reads:
        before = [(w, wid) for w, wid in writes.get(name, []) if wid != op_id and node in reach[w]]
        # the latest: every other write before the read reaches it
        last = [wid for w, wid in before if all(w2 == w or w in reach[w2] for w2, _ in before)]
        out[(op_id, name)] = last[0] if last else ""
    return out


def _conflict(pa: tuple, pb: tuple) -> bool:
    if pa[0] == "gm" or pb[0] == "gm":
        return pa[0] == pb[0] == "gm" and pa[1] == pb[1] and _meets((pa[2:4], pa[4:6]), (pb[2:4], pb[4:6]))
    return pa[:2] == pb[:2] and pa[2] < pb[3] and pb[2] < pa[3]


def load_before_store(p: Program, seed: int = 0) -> Program:
    """Move a micro-op reading GM data that another op writes (a load of an intermediate tensor,
    or a reader of a GM item) to the front of its pipe's stream: ahead of every wait, hence of
    the write it depends on. In timed mode it also issues at cycle 0."""
    cands = sorted({(rs, ri) for rs, ri, ws, wi in _gm_deps(p) if ri > 0 and (rs, ri) != (ws, wi)})
    s, i = _pick(cands, seed, "reader of GM data another op writes")
    instrs = _moved(list(p.streams[s].instrs), i, 0)
    if p.mode == "timed":
        instrs[0] = attrs.evolve(instrs[0], cycle=0)
    return _with_stream(p, s, instrs)


def store_later(p: Program, seed: int = 0) -> Program:
    """Timed mode: issue a writer of GM data that another op reads (a store of an intermediate
    tensor, or a GM item's writer) only after all its readers have ended (moved to the end of its
    stream, its cycle past the readers' ends)."""
    deps = _gm_deps(p)
    cands = sorted({(ss, si) for _, _, ss, si in deps})
    s, i = _pick(cands, seed, "writer of GM data that another op reads")
    readers = [(ls, li) for ls, li, ss, si in deps if (ss, si) == (s, i)]
    late = max(p.streams[ls].instrs[li].cycle + p.streams[ls].instrs[li].duration for ls, li in readers)
    instrs = _moved(list(p.streams[s].instrs), i, len(p.streams[s].instrs) - 1)
    instrs[-1] = attrs.evolve(instrs[-1], cycle=max(late, instrs[-1].cycle))
    return _with_stream(p, s, instrs)


# --------------------------------------------------------------------------- extents and costs


def _kinded(p: Program, kinds: tuple[str, ...]) -> list[tuple[int, int]]:
    return _positions(p, lambda ins: ins.kind in kinds)


def _shapes(p: Program) -> dict:
    return {it.name: item_shape(it.space, it.bytes, it.dtype, it.shape) for it in p.items}


def _cost(hw: Hardware, shapes: dict, ins: Instr, attrs_: dict) -> int:
    kind = KINDS[ins.kind]
    return kind.duration(hw, attrs_, [shapes[n] for n in ins.reads], [shapes[n] for n in ins.writes])


def _halve(p: Program, seed: int, kinds: tuple[str, ...], fields: tuple[str, ...], what: str) -> Program:
    """Halve one extent attribute (or one dimension of a region) of an op of ``kinds``, choosing
    among those whose cost changes, so that the stated duration now disagrees with the cost model."""
    hw, shapes = load_hardware(p.hw), _shapes(p)
    cands = []
    for s, i in _kinded(p, kinds):
        ins = p.streams[s].instrs[i]
        a = dict(ins.attrs)
        for f in fields:
            new = _halved(a, f)
            if new is not None and _cost(hw, shapes, ins, new) != ins.duration:
                cands.append((s, i, new))
    s, i, new = _pick(cands, seed, what)
    instrs = list(p.streams[s].instrs)
    instrs[i] = attrs.evolve(instrs[i], attrs=new)
    return _with_stream(p, s, instrs)


def _halved(a: dict, field: str) -> dict | None:
    if field in ("rows", "cols") and "region" in a:
        (r0, r1), (c0, c1) = a["region"]
        if field == "rows" and r1 - r0 > 1:
            return dict(a, region=((r0, r0 + (r1 - r0) // 2), (c0, c1)))
        if field == "cols" and c1 - c0 > 1:
            return dict(a, region=((r0, r1), (c0, c0 + (c1 - c0) // 2)))
        return None
    if a.get(field, 1) > 1:
        return dict(a, **{field: a[field] // 2})
    return None


def mmad_extent(p: Program, seed: int = 0) -> Program:
    """Halve one of an MMAD's m, n, k (e.g. k 128 -> 64), leaving its duration as it was."""
    return _halve(p, seed, ("mmad",), ("m", "n", "k"), "mmad whose cost follows m/n/k")


def vec_extent(p: Program, seed: int = 0) -> Program:
    """Halve a vector op's rows or cols (its element count), leaving its duration."""
    return _halve(p, seed, ("vec",), ("rows", "cols"), "vec whose cost follows its extent")


def transfer_extent(p: Program, seed: int = 0) -> Program:
    """Halve the rows or columns (the byte count) of a load, move, fixpipe or store."""
    return _halve(
        p,
        seed,
        ("load", "move", "fixpipe", "store"),
        ("rows", "cols"),
        "transfer whose cost follows its bytes",
    )


def duration_off(p: Program, seed: int = 0) -> Program:
    """Give one kinded micro-op a duration one cycle longer than the cost model says."""
    s, i = _pick(_kinded(p, tuple(KINDS)), seed, "kinded micro-op")
    instrs = list(p.streams[s].instrs)
    instrs[i] = attrs.evolve(instrs[i], duration=instrs[i].duration + 1)
    return _with_stream(p, s, instrs)


def recost(p: Program) -> Program:
    """Every kinded micro-op's duration recomputed from the kind table (what an adversary who
    knows the cost model would write)."""
    hw, shapes = load_hardware(p.hw), _shapes(p)
    streams = []
    for st in p.streams:
        instrs = [
            attrs.evolve(ins, duration=_cost(hw, shapes, ins, dict(ins.attrs))) if ins.kind in KINDS else ins
            for ins in st.instrs
        ]
        streams.append(Stream(st.core, st.unit, instrs))
    return attrs.evolve(p, streams=streams)


def restate(p: Program, hw: Hardware | str | None = None) -> Program:
    """The program with every stated cycle, live range and the makespan rewritten from its own
    replay, so that conformance alone cannot catch a mutant."""
    return retime(p, hw if hw is not None else p.hw)


def reuse_is_legal(program, mutant) -> bool:
    """Independent oracle (networkx reachability over the original program): does the WAIT
    of the id the mutant reuses happen before the relabelled SET?"""
    g = nx.DiGraph()
    sets: dict[tuple, list] = {}
    waits: dict[tuple, list] = {}
    for s, stream in enumerate(program.streams):
        for i, ins in enumerate(stream.instrs):
            if i:
                g.add_edge((s, i - 1), (s, i))
            if ins.kind == "set_flag":
                sets.setdefault((stream.core, ins.src, ins.dst, ins.event), []).append((s, i))
            elif ins.kind == "wait_flag":
                waits.setdefault((stream.core, ins.src, ins.dst, ins.event), []).append((s, i))
    for key, ss in sets.items():
        for a, b in zip(ss, waits.get(key, []), strict=False):
            g.add_edge(a, b)
    for s, (old, new) in enumerate(zip(program.streams, mutant.streams, strict=True)):
        for i, (x, y) in enumerate(zip(old.instrs, new.instrs, strict=True)):
            if x.kind == "set_flag" and x.event != y.event:
                key = (old.core, x.src, x.dst, y.event)
                before = [w for w in sets.get(key, []) if w[0] == s and w[1] < i]
                if not before:
                    return False
                n = sets[key].index(before[-1])
                paired = waits.get(key, [])
                return n < len(paired) and nx.has_path(g, paired[n], (s, i))
    return False


#: program mutations and the (check, kind) each must be caught with
PROGRAM_MUTATIONS: dict[str, tuple[Callable[..., Program], tuple[str, str]]] = {
    "delete_wait": (delete_wait, ("flag", "unpaired_set")),
    "delete_set": (delete_set, ("flag", "unpaired_wait")),
    "change_event_id": (change_event_id, ("flag", "unpaired_set")),
    "hoist_above_wait": (hoist_above_wait, ("race", "")),
    "swap_ops": (swap_ops, ("race", "")),
    "overlap_items": (overlap_items, ("memory", "item_overlap")),
    "reuse_id_early": (reuse_id_early, ("flag", "reuse_rule")),
}

#: mutations of GM dataflow, extents and costs (issue 10), by the program mode they apply to,
#: with the (check, kind) each must be caught with
DATAFLOW_MUTATIONS: dict[str, tuple[Callable[..., Program], tuple[str, str], tuple[str, ...]]] = {
    "reverse_cross_pair": (reverse_cross_pair, ("dataflow", "read_before_write"), ("flags",)),
    "load_before_store": (load_before_store, ("dataflow", "read_before_write"), ("flags", "timed")),
    "store_later": (store_later, ("dataflow", "read_before_write"), ("timed",)),
    "mmad_extent": (mmad_extent, ("cost", "duration_mismatch"), ("flags", "timed")),
    "vec_extent": (vec_extent, ("cost", "duration_mismatch"), ("flags", "timed")),
    "transfer_extent": (transfer_extent, ("cost", "duration_mismatch"), ("flags", "timed")),
    "duration_off": (duration_off, ("cost", "duration_mismatch"), ("flags", "timed")),
}


#: a matmul whose output feeds two elementwise tasks on other cores (GM store -> load pairs)
MLP = {
    "format": "staticsched.taskgraph",
    "version": 1,
    "tensors": {
        "x": {"shape": [80, 48], "dtype": "float16"},
        "w": {"shape": [48, 72], "dtype": "float16"},
        "b": {"shape": [72], "dtype": "float16"},
        "h": {"shape": [80, 72], "dtype": "float16"},
        "r": {"shape": [80, 72], "dtype": "float16"},
        "s": {"shape": [80, 72], "dtype": "float16"},
        "o": {"shape": [80, 72], "dtype": "float16"},
    },
    "tasks": [
        {
            "id": "mm",
            "type": "matmul",
            "a": "x",
            "b": "w",
            "out": "h",
            "epilogue": [{"op": "bias", "tensor": "b"}, {"op": "gelu"}],
            "tiling": {"base_m": 32, "base_n": 32, "base_k": 32},
        },
        {"id": "res", "type": "elementwise", "op": "add", "inputs": ["h", "r"], "out": "s"},
        {"id": "act", "type": "elementwise", "op": "relu", "inputs": ["s"], "out": "o"},
    ],
}
