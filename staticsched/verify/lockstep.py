"""Lockstep numeric replay: the micro-ops of identical cores run once over a lanes axis.

A chip's cores often run one program on different GM regions (the 4096^3 GEMM's 16 cores,
10^4 micro-ops each). When no data flows between cores (no core reads GM another writes, no
two write overlapping regions, no item is shared: :func:`staticsched.verify.numeric._groups`
finds every core alone), what a core computes depends only on the order of its own events.
Cores whose event sequences match position for position -- the same kinds in the same end
and start order, every operand at the same place (space, offset, dtype, shape), the same
attributes where an op's values do not depend on its core -- then form a class, replayed
together:

- each bounded space gets one byte buffer with a row per lane (core), so an item of the
  leader core is a typed view with a leading lanes axis, and items sharing bytes still share
  data in every lane;
- a kind whose semantics accept that axis (:attr:`~staticsched.model.opkinds.OpKind.lanes`:
  on-chip moves and ``mmad``) runs once for all lanes, the others (GM loads and stores, whose
  regions differ per core, and vector ops, whose attributes may) once per lane with that
  lane's own instruction, on its lane's views.

The values are those of the per-op replay, bit for bit: the same NumPy calls on the same
operand values in the same per-core order (``np.matmul`` over a stack calls the same
kernel per matrix as over one matrix). Any failure returns False, and the caller replays
op by op, which reports it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from staticsched.model.opkinds import KINDS
from staticsched.verify import buffers
from staticsched.verify.index import ProgramIndex


@attrs.frozen
class LaneClass:
    """Cores replayed together: ``events`` are the leader's ``(phase, gid, k)`` in replay
    order (``k`` numbers its ops by start), ``lanes[k]`` the k-th op's gid on every core."""

    cores: tuple[int, ...]
    events: tuple[tuple[int, int, int], ...]
    lanes: tuple[tuple[int, ...], ...]
    #: the ops (by ``k``) whose results may be written at their start (:func:`_direct`)
    direct: frozenset[int] = frozenset()


def classes(ix: ProgramIndex, events: list[tuple[int, int, int, int]]) -> list[LaneClass]:
    """The cores of ``events`` (:func:`staticsched.verify.numeric._events`) in classes of
    identical event sequences, by first core. The caller guarantees no data flows between
    the cores."""
    core = ix.core_per_gid()
    per_core: dict[int, list[tuple[int, int]]] = {c: [] for c in sorted({core[e[3]] for e in events})}
    for _, phase, _, g in events:
        per_core[core[g]].append((phase, g))
    # where a bounded item lies is the same key on every core; an unbounded one is numbered
    # per core (:func:`_signature`). These cores' items only: an op's bounded item lies on its
    # own core, else the index has an input finding and no numeric replay runs
    by_core = ix.bounded_items()
    places = {it.name: (it.space, it.offset, it.dtype, it.shape)
              for c in per_core for it in by_core.get(c, ())}
    lane_kinds = frozenset(name for name, kind in KINDS.items() if kind.lanes)
    by_sig: dict[tuple, list[int]] = {}
    seqs: dict[int, tuple[list[tuple[int, int, int]], list[int]]] = {}
    for c in per_core:
        sig, seq, starts = _signature(ix, per_core[c], places, lane_kinds)
        by_sig.setdefault(sig, []).append(c)
        seqs[c] = (seq, starts)
    out = []
    for cores in sorted(by_sig.values()):
        seq, starts = seqs[cores[0]]
        lanes = tuple(zip(*(seqs[c][1] for c in cores), strict=True))
        out.append(LaneClass(tuple(cores), tuple(seq), lanes, _direct(ix, seq, starts)))
    return out


def _direct(ix: ProgramIndex, seq: list[tuple[int, int, int]], starts: list[int]) -> frozenset[int]:
    """The ops of a core's events whose targets no other op reads or writes between their start
    and their end: writing their results at their start, without a copy to commit at their
    end, changes nothing any op sees (the replay defers every other op's writes to its end, as
    the hardware makes them visible). The same for every lane of a class, whose operands lie
    alike."""
    instr, items = ix.instr, ix.items

    def spans(names: tuple[str, ...]) -> list[tuple[str, int, int]]:
        out = []
        for name in names:
            it = items.get(name)
            if it is not None and ix.is_bounded(name):
                out.append((it.space, it.offset, it.offset + it.bytes))
            else:  # an item of its own buffer (or none): only its own name reaches it
                out.append((name, 0, 1))
        return out

    def touches(a: list[tuple[str, int, int]], b: list[tuple[str, int, int]]) -> bool:
        return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)

    targets: dict[int, list[tuple[str, int, int]]] = {}
    operands: dict[int, list[tuple[str, int, int]]] = {}
    open_: dict[int, bool] = {}  # started, not yet ended: whether still untouched
    for phase, g, k in seq:
        if k not in operands:
            ins = instr[g]
            targets[k] = spans(ins.writes)
            operands[k] = spans((*ins.reads, *ins.writes))
        for other in open_:
            if other != k and open_[other] and touches(targets[other], operands[k]):
                open_[other] = False
        if phase == 1:
            open_[k] = True
        else:
            clean = open_.pop(k, False)
            if not clean:
                targets.pop(k, None)
                operands.pop(k, None)
    return frozenset(k for k in range(len(starts)) if k in targets)


def _signature(
    ix: ProgramIndex, seq: list[tuple[int, int]], places: dict[str, tuple], lane_kinds: frozenset[str]
) -> tuple[tuple, list[tuple[int, int, int]], list[int]]:
    """A core's event sequence with the names of its core taken out: what must be equal for
    two cores to replay in lockstep; the events as ``(phase, gid, k)`` and the ops by start."""
    instr, items = ix.instr, ix.items
    local: dict[str, tuple] = {}

    def place(name: str) -> tuple:
        key = places.get(name) or local.get(name)
        if key is None:
            it = items.get(name)
            key = ("?", name) if it is None else ("", len(local), it.bytes, it.dtype, it.shape)
            local[name] = key
        return key

    number: dict[int, int] = {}
    starts: list[int] = []
    sig: list[Any] = []
    out: list[tuple[int, int, int]] = []
    for phase, g in seq:
        if phase == 1:
            k = number[g] = len(starts)
            starts.append(g)
            ins = instr[g]
            try:
                reads = tuple([places[n] for n in ins.reads])
                writes = tuple([places[n] for n in ins.writes])
            except KeyError:
                reads = tuple(map(place, ins.reads))
                writes = tuple(map(place, ins.writes))
            # a lanes kind runs once with the leader's attributes, which must then be every
            # lane's; the others run per lane with their own (GM regions, masks' offsets)
            sig.append((ins.kind, ins.attrs if ins.kind in lane_kinds else None, reads, writes))
        else:
            k = number[g]
            sig.append(k)
        out.append((phase, g, k))
    return tuple(sig), out, starts


def replay(ix: ProgramIndex, cls: LaneClass, gm: dict[str, np.ndarray]) -> bool:
    """Run one class's events on fresh lane buffers, committing GM writes into ``gm``; False
    when an op failed (``gm`` is then partly written)."""
    instr = ix.instr
    used = {n for _, g, _ in cls.events for n in (*instr[g].reads, *instr[g].writes)}
    views = buffers.views(ix, used, cls.cores)
    pending: dict[int, tuple[list[np.ndarray], list[np.ndarray], list]] = {}
    for phase, g, k in cls.events:
        if phase == 0:
            buffers.commit(*pending.pop(k))
            continue
        ins = instr[g]
        kind = KINDS[ins.kind]
        reads = [views[n] for n in ins.reads]
        targets = [views[n] for n in ins.writes]
        log: list = []
        if k in cls.direct:
            # nothing reads or writes its targets before it ends: its results go there now
            copies, targets = targets, []
        else:
            copies = [np.array(v, copy=True) for v in targets]
        try:
            if kind.lanes:
                kind.semantics(dict(ins.attrs), reads, copies, gm)
            else:
                target_gm = buffers.DeferredGM(gm, log) if "w" in kind.gm else gm
                for lane, gl in enumerate(cls.lanes[k]):
                    kind.semantics(dict(instr[gl].attrs), [r[lane] for r in reads],
                                   [c[lane] for c in copies], target_gm)
        except buffers.ERRORS:
            return False
        pending[k] = (targets, copies if targets else [], log)
    return True
