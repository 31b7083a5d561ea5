"""GM dataflow: every read of GM data written inside the program happens after a write of it.

Race freedom is not enough. Reverse the cross-core flag around a store -> load
dependency and the load is ordered *before* the store: no access is unordered, so
there is no race, yet the load reads a tensor nobody has written. The same
happens in timed mode when a load is issued before the store it depends on.

GM data is tracked per *cell*: a written tensor is cut into the grid of all row
and column boundaries of the regions that touch it (:class:`ProgramIndex`), so a
cell is either wholly written by a store or not at all; an item of an unbounded
space (GM, or no space) is one cell. The rules:

- A cell that some micro-op of the program writes has no initial contents the
  program may read: each read of it must *happen after* a write of it (flags mode:
  happens-before from vector clocks; timed mode: the write ends no later than the
  read starts). The op's own write does not count.
- Cells no micro-op writes are program inputs; reading them is always allowed.
- In-place GM updates (reading a cell's input value, then writing the cell) are
  therefore not expressible: TaskGraphs cannot state them (one writer per tensor, no
  task reads its own output); a program that does so is reported here. When a cell
  is written more than once, a read sees the latest write that happens before it;
  the race check guarantees that write is unique.

Like the race detector this is linear: per cell it keeps the first write of each
stream (a later write of the same stream cannot happen before a read that the first
does not), and reads are checked when the replay's issue order (a linear extension
of happens-before) reaches them, when every write that can precede them is known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from staticsched.model.opkinds import KINDS
from staticsched.verify.index import OP, ProgramIndex
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding

#: an access epoch as in :mod:`hb`: (gid, stream, clock, label)
Epoch = tuple[int, int, int, str]


class Dataflow:
    """Per written GM cell the first write epoch of each stream; collects reads that no write
    happens before."""

    def __init__(self, written: set[int]) -> None:
        self.written = written
        self.first: dict[int, dict[int, Epoch]] = {}
        #: read gid -> (access label, cells no write happens before)
        self.unsatisfied: dict[int, list[tuple[str, list[int]]]] = {}

    def access(self, me: Epoch, segs: Sequence[int], write: bool, hb: Callable[[Epoch], bool]) -> None:
        """Record a write, or check a read against the writes recorded so far."""
        first = self.first
        if write:
            s = me[1]
            for seg in segs:
                d = first.get(seg)
                if d is None:
                    first[seg] = {s: me}
                elif s not in d:
                    d[s] = me
            return
        written, gid = self.written, me[0]
        bad = [
            seg
            for seg in segs
            if seg in written
            and not any(e[0] != gid and hb(e) for e in first.get(seg, {}).values())
        ]
        if bad:
            self.unsatisfied.setdefault(gid, []).append((me[3], bad))


class SeenWrites:
    """Which write each read of an item several ops write sees, against the one the program
    says it must see (``Instr.sees``: its producer in the OpGraph's sequential order).

    Per such item the writes in the replay's issue order (a linear extension of
    happens-before); a read sees the latest of them that happens before it. When the race check
    is clean the writes of an item are totally ordered, so that write is unique; the race check
    reports the rest.
    """

    def __init__(self, ix: ProgramIndex) -> None:
        self.ix = ix
        self.multi = ix.multi_written
        self.on = ix.records_sees
        self.writes: dict[str, list[Epoch]] = {}
        #: (read gid, read position, item, intended op id, gid of the write it sees or -1)
        self.wrong: list[tuple[int, int, str, str, int]] = []
        #: reads of such items with no intended write recorded: (gid, position, item)
        self.unstated: list[tuple[int, int, str]] = []

    def op(self, me: Epoch, hb: Callable[[Epoch], bool]) -> None:
        """Check micro-op ``me``'s reads (before its own writes: a read-modify-write op reads
        first), then record its writes."""
        if not self.on:
            return
        g = me[0]
        ins = self.ix.instr[g]
        multi = self.multi
        for k, name in enumerate(ins.reads):
            if name not in multi:
                continue
            want = ins.sees[k] if ins.sees else ""
            if not want:
                self.unstated.append((g, k, name))
                continue
            seen = -1
            for e in reversed(self.writes.get(name, ())):
                if e[0] != g and hb(e):
                    seen = e[0]
                    break
            if seen < 0 or self.ix.instr[seen].id != want:
                self.wrong.append((g, k, name, want, seen))
        for name in ins.writes:
            if name in multi:
                self.writes.setdefault(name, []).append(me)


def seen_write_findings(ix: ProgramIndex, sw: SeenWrites, rep: Replay) -> list[Finding]:
    """``wrong_write``: a read that sees another write than the program's ``sees`` names;
    ``no_intended_write``: a read of an item several ops write whose intended write a program
    that records them leaves out."""
    out = []
    for g, k, name, want, seen in sw.wrong:
        wanted = ix.op_gid.get(want, -1)
        who = f"{ix.describe(wanted)}" if wanted >= 0 else f"'{want}' (no such op)"
        if seen >= 0:
            got = (f"but the last write of it that happens before the read is {ix.describe(seen)} "
                   f"at cycles [{rep.start[seen]}, {rep.end[seen]})")
        else:
            got = "but no write of it happens before the read"
        out.append(Finding(
            "dataflow", "wrong_write",
            f"{ix.describe(g)} reads item '{name}' (read #{k}) at cycle {rep.start[g]} and must see "
            f"the write of {who}, {got}",
            ops=tuple(ix.op_label(x) for x in (g, wanted, seen) if x >= 0),
            core=ix.core_of(g), pipes=(ix.unit_of(g),), cycle=rep.start[g],
        ))
    for g, k, name in sw.unstated:
        out.append(Finding(
            "input", "no_intended_write",
            f"{ix.describe(g)}: read #{k} of item '{name}', which {ix.multi_written[name]} ops write, "
            "names no write it must see (the program records them for its other reads)",
            ops=(ix.op_label(g),), core=ix.core_of(g),
        ))
    return out


def dataflow_findings(
    ix: ProgramIndex, df: Dataflow, rep: Replay, *, check: str = "dataflow", skip: frozenset = frozenset(),
    note: str = "",
) -> list[Finding]:
    """One ``read_before_write`` finding per (reading op, access), naming the cells, the reader and
    the ops that write those cells (except reads in ``skip``), in issue order."""
    todo = [g for g in df.unsatisfied if g not in skip]
    if not todo:
        return []
    wanted = {seg for g in todo for _, segs in df.unsatisfied[g] for seg in segs}
    writers: dict[int, list[int]] = {}
    for gid in range(ix.n):
        if ix.role[gid] == OP:
            for acc in ix.accesses[gid]:
                if acc.write and acc.gm:
                    for seg in acc.segs:
                        if seg in wanted:
                            writers.setdefault(seg, []).append(gid)
    out = []
    for g in todo:
        for label, segs in df.unsatisfied[g]:
            who = sorted({w for seg in segs for w in writers.get(seg, ())})
            shown = "; ".join(
                f"{ix.describe(w)} writes it at cycles [{rep.start[w]}, {rep.end[w]})" for w in who[:3]
            )
            more = f" and {len(who) - 3} more writers" if len(who) > 3 else ""
            cells = ix.gm_text(segs)
            out.append(
                Finding(
                    check,
                    "read_before_write",
                    f"{ix.describe(g)} reads {label} at cycles [{rep.start[g]}, {rep.end[g]}), but no write "
                    f"of {cells} happens before it: {shown}{more}{note}",
                    ops=(ix.op_label(g), *(ix.op_label(w) for w in who)),
                    core=ix.core_of(g),
                    pipes=tuple(dict.fromkeys(ix.unit_of(x) for x in (g, *who))),
                    cycle=rep.start[g],
                )
            )
    return out


def tensor_space_findings(ix: ProgramIndex) -> list[Finding]:
    """A GM tensor lives in one global space: every load and store of it names the same
    ``space`` (absent: the hardware's global space), and that space is unbounded.

    One ``space_mismatch`` per tensor whose transfers disagree (the first transfer that differs
    from the tensor's first one) and one ``not_global`` per transfer naming an on-chip or
    unknown space: either would let a placement's link traffic be dropped or invented."""
    hw = ix.hw
    glob = hw.role_space("global") or "GM"
    first: dict[str, tuple[str, int]] = {}
    out: list[Finding] = []
    for gid in range(ix.n):
        ins = ix.instr[gid]
        kind = KINDS.get(ins.kind)
        if ix.role[gid] != OP or kind is None or not kind.gm:
            continue
        a = dict(ins.attrs)
        tensor = a.get("tensor")
        if not isinstance(tensor, str):
            continue
        space = a.get("space") or glob
        if not hw.has_space(space) or hw.space(space).capacity > 0:
            what = "is not a space of the hardware" if not hw.has_space(space) else "is on-chip"
            out.append(Finding("dataflow", "not_global",
                               f"{ix.describe(gid)}: tensor '{tensor}' in space '{space}', which {what}; "
                               f"a tensor lives in an unbounded global space",
                               ops=(ix.op_label(gid),), core=ix.core_of(gid)))
            continue
        seen = first.setdefault(tensor, (space, gid))
        if seen[0] != space and seen[1] != -1:
            out.append(Finding("dataflow", "space_mismatch",
                               f"tensor '{tensor}': {ix.describe(gid)} names space '{space}' but "
                               f"{ix.describe(seen[1])} names '{seen[0]}'; a tensor lives in one space",
                               ops=(ix.op_label(gid), ix.op_label(seen[1])), core=ix.core_of(gid)))
            first[tensor] = (seen[0], -1)  # one finding per tensor
    return out
