"""Shared links: at no cycle of a timed program's replay may the transfers on a link move more
than its bandwidth. In a flags program the hardware shares a link (:mod:`.fluid`): an overflow
cannot happen, and only the rates are checked.

Every transfer op (load, store, move, fixpipe) whose path a hardware link carries holds its
rate on that link during its data phase ``[start + overhead, end)`` of the replay; the rate is
its ``rate`` attribute (bytes per cycle), or its path's rate when it has none (derated for a
load converting ND to NZ, ``opkinds.path_units``). The bytes and
the path come from the kind table (``transfer_route``), the rate units from the hardware
model, the cycles from the verifier's own replay: nothing from the solver. A rate above the
path's, below zero, or not a multiple of ``1/RATE_DENOM`` is a finding too.

Only the nominal replay is checked: a jittered replay stretches a transfer over more cycles,
and a transfer cannot beat its rate, so the nominal timing is the one whose link use is a
claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from staticsched.model.hardware import RATE_DENOM
from staticsched.model.links import overflows, rate_text
from staticsched.model.opkinds import KINDS, TRANSFER_KINDS, path_units
from staticsched.verify.fluid import transfer_route_of
from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding

#: overflows listed per link before the rest are counted
SHOWN = 5


def link_findings(ix: ProgramIndex, rep: Replay) -> list[Finding]:
    """``link`` findings: ``overflow`` (a link over its bandwidth, first cycle of each stretch)
    and ``bad_rate`` (a rate no transfer of that path can have)."""
    hw = ix.hw
    if not hw.links:
        return []
    out: list[Finding] = []
    holds: dict[str, list[tuple[int, int, int, str]]] = {lk.name: [] for lk in hw.links}
    skip = {op for f in ix.problems for op in f.ops}
    # ~10^5 transfers of a handful of shapes: what a transfer holds is worked out once per shape
    shape_of, first = ix.op_shapes()
    memo = [_hold(ix, ix.instr[g]) if ix.instr[g].kind in TRANSFER_KINDS else None for g in first]
    start, end = rep.start, rep.end
    for gid in range(ix.n):
        k = shape_of[gid]
        if k < 0 or start[gid] < 0:
            continue
        got = memo[k]
        if got is None or ix.instr[gid].id in skip:
            continue
        if isinstance(got, str):
            out.append(Finding(
                "link", "bad_rate", f"{ix.describe(gid)}: {got}",
                ops=(ix.op_label(gid),), core=ix.core_of(gid), pipes=(ix.unit_of(gid),),
            ))
            continue
        links, overhead, units = got
        begin = start[gid] + min(overhead, max(0, end[gid] - start[gid] - 1))
        label = ix.op_label(gid)
        for name in links:
            holds[name].append((begin, end[gid], units, label))
    for lk in hw.links:
        if not ix.timed:
            # a flags program's transfers share the links as the hardware does: no overflow
            continue
        over = overflows(lk.units, holds[lk.name])
        for cycle, level, who in over[:SHOWN]:
            out.append(Finding(
                "link", "overflow",
                f"link {lk.name} carries {rate_text(level)} B/cycle at cycle {cycle}, above its "
                f"{rate_text(lk.units)} B/cycle: {_names(who)}",
                ops=tuple(who), cycle=cycle,
            ))
        if len(over) > SHOWN:
            out.append(Finding(
                "link", "overflow",
                f"link {lk.name}: {len(over) - SHOWN} further stretches over its bandwidth are not listed",
            ))
    return out


def _hold(ix: ProgramIndex, ins) -> tuple[tuple[str, ...], int, int] | str | None:
    """What a transfer of this shape holds: ``(link names, path overhead, rate units)``; None when
    it uses no link (or has no route: other checks report that); the ``bad_rate`` text when its
    rate is one no transfer of its path can have."""
    route = transfer_route_of(ix, ins)
    if route is None:
        return None
    hw = ix.hw
    src, dst, _ = route
    links = hw.links_of(src, dst)
    if not links or not hw.has_path(src, dst):
        return None
    path = hw.path(src, dst)
    kind = KINDS[ins.kind]
    # the path's rate, derated for a load converting ND -> NZ (``nd2nz``)
    full = path_units(hw, {**dict(kind.defaults), **dict(ins.attrs)}, src, dst)
    rate = float(dict(ins.attrs).get("rate", 0.0) or 0.0)
    units = rate * RATE_DENOM
    if rate < 0 or units != int(units) or units > full:
        return (
            f"rate {rate!r} B/cycle is not a multiple of 1/{RATE_DENOM} in "
            f"(0, {rate_text(full)}] (path {src}->{dst})"
        )
    return tuple(lk.name for lk in links), path.overhead, int(units) or full


def _names(who: Sequence[str]) -> str:
    shown = ", ".join(who[:6])
    return shown + (f" and {len(who) - 6} more" if len(who) > 6 else "")
