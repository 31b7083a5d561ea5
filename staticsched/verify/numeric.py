"""Numeric replay: run every micro-op's NumPy semantics on byte buffers, in replay order.

Each bounded ``(core, space)`` gets one byte buffer of its capacity, each item of
an unbounded space its own; an item is a typed view (``dtype``, ``shape``) at its
offset, so items sharing bytes really share data and a reuse bug corrupts
numbers. Buffers and never-written GM outputs start as all-ones bytes (NaN in
float dtypes), so reading data nobody wrote shows up in the output.

An op reads its operands (and GM) when it starts and commits its results when it
ends: the semantics from :data:`staticsched.model.opkinds.KINDS` run at the start
on copies of the written views, and GM writes are recorded and applied at the
end. Ends at a cycle are applied before starts at that cycle, matching
happens-before (a consumer may start when its producer ends). Ops without a
kind (``"op"``) are opaque and skipped.

What the replay's outputs are compared with, and how (tolerances, mismatches), is
:mod:`staticsched.verify.compare`'s.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
from threadpoolctl import threadpool_limits

from staticsched._workers import Mapped
from staticsched.model import layouts
from staticsched.model.dtypes import numpy_dtype
from staticsched.model.opkinds import KINDS
from staticsched.verify import buffers, lockstep
from staticsched.verify.compare import DEFAULT_TOLERANCES
from staticsched.verify.index import OP, ProgramIndex
from staticsched.verify.index_state import GmAccess
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding

# DEFAULT_TOLERANCES: docs/verification.md names it here, beside the replay it judges
__all__ = ["DEFAULT_TOLERANCES", "WORKER_SHARE", "Order", "Pending", "order", "replayable", "run", "start"]

#: the worker's share of a split numeric replay: the calling process has the other checks to
#: run first (races, memory, conformance: about as long as half the numbers on a chip), so
#: the worker takes more (the 4096^3 GEMM's two parts end within a second of each other)
WORKER_SHARE = 0.75


def _finding(kind: str, message: str, ix: ProgramIndex | None = None, gid: int = -1, **kw: Any) -> Finding:
    if ix is not None and gid >= 0:
        kw.setdefault("ops", (ix.op_label(gid),))
        kw.setdefault("core", ix.core_of(gid))
        kw.setdefault("pipes", (ix.unit_of(gid),))
    return Finding("numeric", kind, message, **kw)


def replayable(ix: ProgramIndex) -> list[Finding]:
    """Why the program cannot be replayed numerically (empty when it can)."""
    if all(it.dtype and it.shape for it in ix.items.values()):
        return []  # the usual case, without a walk over every instruction
    out = []
    untyped: dict[str, int] = {}
    for g in range(ix.n):
        if ix.role[g] != OP or ix.instr[g].kind not in KINDS:
            continue
        ins = ix.instr[g]
        for name in (*ins.reads, *ins.writes):
            it = ix.items.get(name)
            if it is not None and (not it.dtype or not it.shape) and name not in untyped:
                untyped[name] = g
    for name, g in untyped.items():
        out.append(
            _finding(
                "untyped_item",
                f"item '{name}' used by {ix.describe(g)} has no dtype/shape, so its data cannot be replayed",
                ix,
                g,
            )
        )
    return out


def run(
    ix: ProgramIndex, rep: Replay, inputs: Mapping[str, np.ndarray], processes: int = 0
) -> tuple[dict[str, np.ndarray], list[Finding]]:
    """Replay the data flow of ``rep`` starting from GM ``inputs`` (:func:`start`, then
    :meth:`Pending.finish`).

    Returns
    -------
    gm, findings
        Every GM tensor after the run (inputs copied where an op writes them, read-only
        views of the caller's arrays otherwise; outputs allocated from the program's
        tensor declarations) and ``numeric``/``error`` findings for ops whose semantics failed.
    """
    return start(ix, rep, inputs, processes).finish()


@attrs.frozen
class Order:
    """How :func:`start` replays (:func:`order`): what it decides before it needs the inputs."""

    #: whether no data flows between any two cores, so that identical cores replay in
    #: lockstep (:mod:`staticsched.verify.lockstep`)
    lockstep: bool
    #: the two parts of a replay split between this process and a worker (None: one part,
    #: here); the first is empty when the worker replays every core
    halves: tuple[set[int], set[int]] | None


def order(ix: ProgramIndex, rep: Replay, processes: int = 0) -> Order:
    """What :func:`start` decides before it needs the inputs (a caller waiting for its inputs
    decides it first)."""
    grouped = _groups(ix)
    halves = _halves(ix, WORKER_SHARE, grouped) if processes else None
    if processes and halves is None:
        # data flows between the cores (a separate epilogue reading every core's blocks): no
        # split, so the worker replays them all while this process runs the other checks
        halves = (set(), {c for grp in grouped[0] for c in grp})
    return Order(all(len(grp) == 1 for grp in grouped[0]), halves)


def start(
    ix: ProgramIndex, rep: Replay, inputs: Mapping[str, np.ndarray], processes: int = 0,
    ordered: Order | None = None,
) -> Pending:
    """Start the replay of :func:`run`; with ``processes`` (at most one is used), part of it
    (:data:`WORKER_SHARE` of the micro-ops) in a forked worker now, so that the caller can go
    on with other work meanwhile. ``ordered`` is :func:`order`'s result, when computed before.

    Cores that share no GM data -- no core reads a tensor another writes, no two write
    overlapping regions of one, no item is accessed from two cores -- are split in two parts:
    each sees exactly the values it would see in one replay, since nothing of the other reaches
    it. Where no such split exists, the worker replays every core and this process none.
    Should either part fail, the whole program is replayed again in one piece, so the
    findings never depend on the split. When every core is alone in that sense, what a core
    computes depends only on the order of its own events, and identical cores replay in
    lockstep (:mod:`staticsched.verify.lockstep`)."""
    return Pending(ix, rep, ordered if ordered is not None else order(ix, rep, processes), inputs)


class Pending:
    """A numeric replay under way (:func:`start`)."""

    def __init__(
        self, ix: ProgramIndex, rep: Replay, ordered: Order, inputs: Mapping[str, np.ndarray]
    ) -> None:
        self.ix, self.rep, self.inputs, self.ordered = ix, rep, inputs, ordered
        self.side: Mapped | None = None
        if ordered.halves is not None:
            task = functools.partial(_replay_written, ix, rep, inputs, ordered.lockstep)
            self.side = Mapped(task, [ordered.halves[1]], 1)

    def finish(self) -> tuple[dict[str, np.ndarray], list[Finding]]:
        """The replay's GM tensors, row-major whatever their layout, and findings (replays
        this process's part now)."""
        gm, findings = self._finish()
        return {name: layouts.logical(arr) for name, arr in gm.items()}, findings

    def _finish(self) -> tuple[dict[str, Any], list[Finding]]:
        ix, rep, inputs, ordered = self.ix, self.rep, self.inputs, self.ordered
        if self.side is None or ordered.halves is None:
            return _replay_part(ix, rep, inputs, ordered.lockstep)
        try:
            mine = ordered.halves[0]
            gm, findings = _replay_part(ix, rep, inputs, ordered.lockstep and bool(mine), mine)
            ((written, failed),) = self.side.get()
        finally:
            self.close()
        if findings or failed:
            return _replay_part(ix, rep, inputs, ordered.lockstep)
        core = ix.core_per_gid()
        for g in ix.gm_accesses:
            if g.write and core[g.gid] in ordered.halves[1]:
                (r0, r1), (c0, c1) = g.region
                gm[g.tensor][r0:r1, c0:c1] = written[g.tensor][r0:r1, c0:c1]
        return gm, findings

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        if self.side is not None:
            self.side.close()
            self.side = None


def _replay_part(
    ix: ProgramIndex, rep: Replay, inputs: Mapping[str, np.ndarray], lockstep_: bool,
    cores: set[int] | None = None,
) -> tuple[dict[str, np.ndarray], list[Finding]]:
    """The replay of ``rep``'s micro-ops on ``cores`` (None: all), in lockstep over identical
    cores when ``lockstep_``."""
    events = _events(ix, rep, cores)
    return _replay(ix, events, inputs, lockstep.classes(ix, events) if lockstep_ else None)


def _replay_written(
    ix: ProgramIndex, rep: Replay, inputs: Mapping[str, np.ndarray], lockstep_: bool, cores: set[int]
) -> tuple[dict[str, np.ndarray], bool]:
    """A worker's part: the GM tensors its ops write, and whether any op failed."""
    gm, findings = _replay_part(ix, rep, inputs, lockstep_, cores)
    written = {g.tensor for g in ix.gm_accesses if g.write}
    return {name: gm[name] for name in sorted(written)}, bool(findings)


def _events(ix: ProgramIndex, rep: Replay, cores: set[int] | None = None) -> list[tuple[int, int, int, int]]:
    """The replay's kinded micro-ops (on ``cores``; None: all) as ``(cycle, phase, seq, gid)``,
    sorted: ends (phase 0) before starts (phase 1) at a cycle, as happens-before has it (a
    consumer may start when its producer ends)."""
    # in arrays: a chip's replay order holds ~10^6 instructions, of which a part keeps 10^4-10^5
    order = np.asarray(rep.order, dtype=np.int64)
    if not order.size:
        return []
    kinded = np.asarray(ix.op_shapes()[0], dtype=np.int64)[order] >= 0
    start = np.asarray(rep.start, dtype=np.int64)[order]
    keep = kinded & (start >= 0)
    if cores is not None:
        core = np.asarray(ix.core_per_gid(), dtype=np.int64)[order]
        keep &= np.isin(core, np.fromiter(cores, dtype=np.int64, count=len(cores)))
    seq = np.flatnonzero(keep)
    gid = order[seq]
    times = np.concatenate([np.asarray(rep.end, dtype=np.int64)[gid], start[seq]])
    phase = np.repeat(np.array([0, 1], dtype=np.int64), len(seq))
    seqs = np.concatenate([seq, seq])
    gids = np.concatenate([gid, gid])
    # (cycle, phase, seq) is unique per event: the sort is the tuples' sort
    by = np.lexsort((seqs, phase, times))
    return list(zip(times[by].tolist(), phase[by].tolist(), seqs[by].tolist(), gids[by].tolist(),
                    strict=True))


def _groups(ix: ProgramIndex) -> tuple[list[list[int]], dict[int, int]]:
    """The cores in groups no GM data or item flows between (each sorted, by first core),
    and the micro-ops of each group by its first core."""
    cores = sorted({st.core for st in ix.streams})
    core = ix.core_per_gid()
    parent = {c: c for c in cores}

    def find(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    by_tensor: dict[str, list[GmAccess]] = {}
    for g in ix.gm_accesses:
        by_tensor.setdefault(g.tensor, []).append(g)
    for accs in by_tensor.values():
        # a core that reads a tensor another core writes (anywhere in it) joins that core
        readers = {core[g.gid] for g in accs if not g.write}
        writers = {core[g.gid] for g in accs if g.write}
        for cr in sorted(readers):
            for cw in sorted(writers):
                if cr != cw:
                    parent[find(cr)] = find(cw)
        # two cores writing overlapping regions join: each distinct (region, core) once (a ring
        # slot is written thousands of times), swept by first row so that only regions whose
        # rows overlap are compared
        written = sorted({(g.region, core[g.gid]) for g in accs if g.write})
        open_: list[tuple[tuple[tuple[int, int], tuple[int, int]], int]] = []
        for region, c in written:
            open_ = [(r, co) for r, co in open_ if r[0][1] > region[0][0]]
            for r, co in open_:
                if co != c and _overlap(r, region):
                    parent[find(c)] = find(co)
            open_.append((region, c))
    # an item two cores access (one in an unbounded space) joins them too; an op's item of a
    # bounded space always lives on the op's core (else the index has a wrong_core input
    # finding, and no numeric replay runs), so the cores' buffers hold only their own items
    role, instr = ix.role, ix.instr
    ops = [g for g in range(ix.n) if role[g] == OP]
    size = Counter(core[g] for g in ops)
    unbounded = {name for name in ix.items if not ix.is_bounded(name)}
    core_of_item: dict[str, int] = {}
    for g in ops if unbounded else ():
        c = core[g]
        ins = instr[g]
        for name in (*ins.reads, *ins.writes):
            if name in unbounded:
                other = core_of_item.setdefault(name, c)
                if other != c:
                    parent[find(c)] = find(other)
    groups: dict[int, list[int]] = {}
    for c in cores:
        groups.setdefault(find(c), []).append(c)
    out = sorted(groups.values())
    return out, {grp[0]: sum(size.get(c, 0) for c in grp) for grp in out}


def _halves(
    ix: ProgramIndex, share: float = 0.5, grouped: tuple[list[list[int]], dict[int, int]] | None = None
) -> tuple[set[int], set[int]] | None:
    """Two sets of cores no GM data flows between, or None; the second holds about ``share``
    of the micro-ops. ``grouped`` is :func:`_groups`' result, when computed before."""
    groups, size = grouped if grouped is not None else _groups(ix)
    if len(groups) < 2:
        return None
    # the largest groups first, each to the half further below its share
    halves: tuple[set[int], set[int]] = (set(), set())
    load = [0, 0]
    weight = (1.0 - share, share)
    for grp in sorted(groups, key=lambda grp: (-size[grp[0]], grp[0])):
        k = 0 if load[0] * weight[1] <= load[1] * weight[0] else 1
        halves[k].update(grp)
        load[k] += size[grp[0]]
    return halves if halves[0] and halves[1] else None


def _overlap(a: tuple[tuple[int, int], tuple[int, int]], b: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    (ar0, ar1), (ac0, ac1) = a
    (br0, br1), (bc0, bc1) = b
    return ar0 < br1 and br0 < ar1 and ac0 < bc1 and bc0 < ac1


def _fresh_gm(
    ix: ProgramIndex, inputs: Mapping[str, np.ndarray], findings: list[Finding]
) -> dict[str, np.ndarray]:
    """GM at the start: copies of the inputs some op writes, read-only views of the others
    (a chip's inputs are 10^7-10^8 bytes that loads only read), poison for the rest of the
    declared tensors."""
    gm: dict[str, Any] = {}
    for t in ix.tensors.values():
        if t.name in inputs:
            arr = _initial(ix, t.name, inputs[t.name])
            if arr.shape != tuple(t.shape):
                findings.append(
                    _finding(
                        "error",
                        f"input tensor '{t.name}' has shape {list(arr.shape)}, the program declares "
                        f"{list(t.shape)}",
                    )
                )
            elif t.layout == "NZ":
                # an NZ input is converted once before the program runs (a weight cast at load
                # time): its bytes are the fractal layout's, its padding zero
                arr = layouts.NZArray.from_logical(arr)
            gm[t.name] = arr
        elif t.layout == "NZ":
            gm[t.name] = layouts.NZArray.poisoned((t.shape[0], t.shape[1]), numpy_dtype(t.dtype))
        else:
            gm[t.name] = buffers.poison(tuple(t.shape), t.dtype)
    for name, arr in inputs.items():
        if name not in gm:
            gm[name] = _initial(ix, name, arr)
    return gm


def _initial(ix: ProgramIndex, name: str, arr: Any) -> np.ndarray:
    """An input as GM starts with it: a copy when some op writes the tensor (the index's
    ``gm_grid`` holds exactly the written ones), else a read-only view of the caller's array."""
    if name in ix.gm_grid:
        return np.array(arr, copy=True)
    view = np.asarray(arr).view()
    view.flags.writeable = False
    return view


def _replay(
    ix: ProgramIndex, events: list[tuple[int, int, int, int]], inputs: Mapping[str, np.ndarray],
    lanes: list[lockstep.LaneClass] | None = None,
) -> tuple[dict[str, np.ndarray], list[Finding]]:
    """Run ``events`` (:func:`_events`) on fresh buffers from GM ``inputs``: in lockstep, by
    the ``lanes`` classes of the events' cores (:func:`staticsched.verify.lockstep.classes`),
    else, or should an op fail there, op by op."""
    findings: list[Finding] = []
    gm = _fresh_gm(ix, inputs, findings)
    if not _placeable(ix, findings):
        return gm, findings
    # one BLAS thread: the replay runs 10^4-10^5 tile products, between which a threaded BLAS's
    # idle threads spin against this process's other work and the replay's worker
    with np.errstate(all="ignore"), threadpool_limits(1, user_api="blas"):
        if lanes is not None and not findings:
            if all(lockstep.replay(ix, cls, gm) for cls in lanes):
                return gm, findings
            gm = _fresh_gm(ix, inputs, findings)
        return gm, _replay_ops(ix, events, gm, findings)


def _replay_ops(
    ix: ProgramIndex, events: list[tuple[int, int, int, int]], gm: dict[str, np.ndarray],
    findings: list[Finding],
) -> list[Finding]:
    """Run ``events`` op by op on fresh buffers, committing GM writes into ``gm``."""
    instr = ix.instr
    views = buffers.views(ix, {n for _, _, _, g in events for n in (*instr[g].reads, *instr[g].writes)})
    pending: dict[int, tuple[list[np.ndarray], list[np.ndarray], list]] = {}
    failed = False
    for _, phase, _, g in events:
        if phase == 1:
            ins = instr[g]
            kind = KINDS[ins.kind]
            try:
                reads = [views[n] for n in ins.reads]
                targets = [views[n] for n in ins.writes]
                copies = [np.array(v, copy=True) for v in targets]
                log: list = []
                # only a kind that writes GM needs its writes deferred to its end; the
                # others read GM now, as they would through the deferring view
                kind.semantics(dict(ins.attrs), reads, copies,
                               buffers.DeferredGM(gm, log) if "w" in kind.gm else gm)
            except buffers.ERRORS as exc:
                if not failed:
                    findings.append(
                        _finding(
                            "error",
                            f"{ix.describe(g)} ({ins.kind}) failed in numeric replay: "
                            f"{type(exc).__name__}: {exc}",
                            ix,
                            g,
                        )
                    )
                failed = True
                continue
            pending[g] = (targets, copies, log)
        elif g in pending:
            buffers.commit(*pending.pop(g))
    return findings


def _placeable(ix: ProgramIndex, findings: list[Finding]) -> bool:
    """Whether every typed item of a bounded space can be viewed at its offset (a finding for
    the first, in declaration order, that cannot)."""
    bad = [it for items in ix.bounded_items().values() for it in items
           if it.dtype and it.shape and (it.offset < 0 or it.offset % numpy_dtype(it.dtype).itemsize)]
    if not bad:
        return True
    position = {name: k for k, name in enumerate(ix.items)}
    it = min(bad, key=lambda it: position[it.name])
    findings.append(
        _finding("error", f"item '{it.name}' at offset {it.offset} cannot hold {it.dtype} data", core=it.core)
    )
    return False
