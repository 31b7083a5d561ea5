"""Program mutations that inject one known bug each, for testing the verifier.

Every helper is a pure function ``Program -> Program`` (``Hardware -> Hardware`` for
:func:`shrink_capacity`). Where it has to choose a target it draws from
``np.random.default_rng(seed)`` over the candidates in a fixed order, so the same seed
gives the same mutant. Cycles are left as they were (a mutant usually also fails
conformance); nothing here consults the verifier.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs
import numpy as np

from staticsched.model.hardware import Hardware
from staticsched.model.program import Instr, Program, Stream

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
