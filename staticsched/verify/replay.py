"""Timed replay of a program: an event-driven executor of the DESIGN §2 semantics.

Each (core, pipe) stream issues in order; a micro-op holds its pipe for its
duration; ``set`` fires when its pipe is free (everything before it finished)
and is visible ``latency`` cycles later; the n-th ``wait`` of a flag key is
satisfied by the n-th ``set`` of that key and releases the pipe at
``max(pipe free, set visible)`` (a GM-word wait ``sync.gm_flag_poll`` cycles later: its
final polling load). That is a binary flag (intra-core) and a
counting semaphore (cross-core) alike: a wait takes the oldest set not yet
waited. In timed mode every instruction also waits for its ``cycle``. Keeping
the pairing n-th-to-n-th even after a double set makes the happens-before
relation the same in every replay, which is what the race check relies on; a
set that finds its key at capacity (a binary flag still set, a counter full) is
recorded as a double set.

On a split chip whose cross-core wait stalls its whole core
(``sync.cross_core_wait_stalls_core``, Ascend A2/A3), a core's instructions issue in the
core-level order the program's cycles give (cycle, then stream, then position: the order
the nominal run issued them in), and a cross-core wait not yet passed holds back every
later instruction of its core, on every pipe; instructions already issued keep running
(docs/program-format.md, "Whole-core waits").

When every unfinished stream waits, the replay records a :class:`Stuck` state
with its wait-for chain, force-releases one wait (matched to nothing) and goes
on, so that one deadlock does not hide every later problem.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.program import ProgItem, Program, Stream
from staticsched.verify.fluid import LinkShare, Shared
from staticsched.verify.index import OP, SET, WAIT, Key, ProgramIndex, key_text

#: stuck states recorded per replay before only counting them
MAX_STUCK = 10


@attrs.frozen
class Stuck:
    """A state where every unfinished stream waits.

    ``waits`` are the blocked wait gids, ``chain`` the wait-for chain in words, ``cyclic``
    whether the chain closes (a cycle in happens-before) rather than ending at a wait that
    no set can satisfy, ``released`` the wait the replay forced open to go on.
    """

    time: int
    waits: tuple[int, ...] = attrs.field(converter=tuple)
    chain: str
    cyclic: bool
    released: int
    involved: tuple[int, ...] = attrs.field(converter=tuple, default=())


class Replay:
    """What one replay produced: per-gid ``start``/``end``, the issue ``order``, the set each
    wait consumed (``matched``, -1 when force-released), double sets and stuck states."""

    def __init__(self, n: int) -> None:
        self.start = [-1] * n
        self.end = [-1] * n
        self.order: list[int] = []
        self.matched = [-1] * n
        #: (set gid, earlier unconsumed set gid, cycle)
        self.double_sets: list[tuple[int, int, int]] = []
        self.stuck: list[Stuck] = []
        self.stuck_count = 0

    @property
    def makespan(self) -> int:
        return max(self.end, default=0)


def simulate(
    ix: ProgramIndex, dur: Sequence[int] | None = None, shared: Mapping[int, Shared] | None = None
) -> Replay:
    """Replay ``ix`` with micro-op durations ``dur`` (per gid; default: the program's).

    ``shared`` (:func:`.fluid.shared_transfers`) are the transfers that share links: each
    ends when link sharing (:class:`.fluid.LinkShare`) has moved its bytes, not after its
    duration (the nominal replay of a flags program; a jittered replay draws durations).

    Returns
    -------
    Replay
        Deterministic for the same input: ties are broken by stream index.
    """
    dur = ix.dur if dur is None else dur
    shared = shared or {}
    links = LinkShare([lk.units for lk in ix.hw.links]) if shared else None
    rep = Replay(ix.n)
    nstreams = len(ix.streams)
    gids = ix.stream_gids
    pc = [0] * nstreams
    free = [0] * nstreams
    fired: dict[Key, list[tuple[int, int]]] = {}  # key -> [(set gid, visible cycle)]
    done: dict[Key, int] = {}  # key -> waits completed (including forced)
    blocked: dict[Key, list[int]] = {}
    heap: list[tuple[int, int]] = []
    timed = ix.timed
    cycle = ix.cycle
    role = ix.role
    key_of = ix.key_of
    capacity = ix.capacity
    stream_of = ix.stream_of
    hold = ix.hold
    polled: set[int] = set()
    stall = _CoreStall(ix) if ix.hw.split and ix.hw.sync.cross_core_wait_stalls_core else None

    def schedule(s: int) -> None:
        if pc[s] >= len(gids[s]):
            return
        g = gids[s][pc[s]]
        if stall is not None and stall.holds(s, g):
            return
        t = free[s]
        if timed and cycle[g] > t:
            t = cycle[g]
        if role[g] == WAIT:
            k = key_of[g]
            i = done.get(k, 0)
            sets = fired.get(k, ())
            if len(sets) <= i:
                blocked.setdefault(k, []).append(s)
                return
            t = max(t, sets[i][1])
        heapq.heappush(heap, (t, s))

    def issue(s: int, g: int) -> None:
        rep.order.append(g)
        pc[s] += 1
        schedule(s)

    for s in range(nstreams):
        schedule(s)
    now = 0
    never = 1 << 62
    while True:
        while heap or (links is not None and not links.idle()):
            if links is not None:
                finished = links.finish(heap[0][0] if heap else never)
                if finished is not None:
                    g, end = finished
                    s = stream_of[g]
                    rep.end[g] = free[s] = now = end
                    schedule(s)
                    continue
                if not heap:
                    break
            t, s = heapq.heappop(heap)
            g = gids[s][pc[s]]
            r = role[g]
            now = t
            if r == OP:
                rep.start[g] = t
                moving = shared.get(g)
                if moving is not None:
                    # the pipe is busy until link sharing has moved the bytes
                    links.begin(g, t, moving)  # type: ignore[union-attr]
                    rep.order.append(g)
                    pc[s] += 1
                    continue
                rep.end[g] = free[s] = t + dur[g]
            elif r == SET:
                k = key_of[g]
                sets = fired.setdefault(k, [])
                i = len(sets)
                waited = done.get(k, 0)
                if i - waited >= capacity(k):
                    # a binary flag still set, or a counter at its capacity
                    rep.double_sets.append((g, sets[waited][0], t))
                sets.append((g, t + ix.latency[g]))
                rep.start[g] = rep.end[g] = free[s] = t
                for s2 in blocked.pop(k, ()):
                    schedule(s2)
            else:
                k = key_of[g]
                i = done.get(k, 0)
                sets = fired.get(k, ())
                if len(sets) <= i:  # another waiter of the key took it first
                    blocked.setdefault(k, []).append(s)
                    continue
                if sets[i][1] > t:
                    heapq.heappush(heap, (sets[i][1], s))
                    continue
                if g in hold and g not in polled:
                    # a GM-word wait's final polling load, once the word is visible
                    polled.add(g)
                    heapq.heappush(heap, (t + hold[g], s))
                    continue
                rep.matched[g] = sets[i][0]
                done[k] = i + 1
                rep.start[g] = rep.end[g] = free[s] = t
                if stall is not None:
                    issue(s, g)
                    for s2 in stall.passed(s, g):
                        schedule(s2)
                    continue
            issue(s, g)
        waiting = [s for s in range(nstreams) if pc[s] < len(gids[s])]
        if not waiting:
            break
        # every waiting pipe is blocked from the moment it became free; the state is final then
        now = max(now, *(free[x] for x in waiting))
        s, stuck = _stuck_state(ix, waiting, pc, fired, done, now, stall)
        rep.stuck_count += 1
        if len(rep.stuck) < MAX_STUCK:
            rep.stuck.append(stuck)
        g = gids[s][pc[s]]
        k = key_of[g]
        done[k] = done.get(k, 0) + 1
        blocked[k] = [x for x in blocked.get(k, ()) if x != s]
        rep.start[g] = rep.end[g] = free[s] = now
        issue(s, g)
        if stall is not None:
            for s2 in stall.passed(s, g):
                schedule(s2)
    return rep


class _CoreStall:
    """The whole-core stall of a cross-core wait: per core, its cross-core waits not yet
    passed in core-level order, and the streams held back by the first of them."""

    def __init__(self, ix: ProgramIndex) -> None:
        self.ix = ix
        self.order: dict[int, tuple[int, int, int, int]] = {}
        self.pending: dict[int, list[tuple[tuple[int, int, int, int], int]]] = {}
        self.held: dict[int, list[int]] = {}
        self.done: set[int] = set()
        for s, gl in enumerate(ix.stream_gids):
            core = ix.streams[s].core
            for pos, g in enumerate(gl):
                if ix.role[g] == WAIT and ix.key_of[g] is not None and ix.key_of[g][0] == "cross":
                    # a wait sits after every other instruction of its cycle: it is placed in
                    # the core's order as late as it can be (a zero-latency flag between two
                    # of the core's pipes may order same-cycle instructions against the
                    # streams' listing order)
                    key = (ix.cycle[g], 1, s, pos)
                    self.order[g] = key
                    self.pending.setdefault(core, []).append((key, g))
        for lst in self.pending.values():
            heapq.heapify(lst)
        self.pos_of = ix.pos_of

    def first(self, core: int) -> int | None:
        """The first cross-core wait of ``core`` (core-level order) not yet passed."""
        h = self.pending.get(core)
        while h and h[0][1] in self.done:
            heapq.heappop(h)
        return h[0][1] if h else None

    def holds(self, s: int, g: int) -> bool:
        """Whether the next instruction ``g`` of stream ``s`` is held back (and ``s`` parked)."""
        if self.holder(s, g) is None:
            return False
        self.held.setdefault(self.ix.streams[s].core, []).append(s)
        return True

    def holder(self, s: int, g: int) -> int | None:
        """The wait that holds back ``g`` on stream ``s``, if one does."""
        w = self.first(self.ix.streams[s].core)
        if w is None or w == g:
            return None
        if self.order.get(g, (self.ix.cycle[g], 0, s, self.pos_of[g])) < self.order[w]:
            return None
        return w

    def passed(self, s: int, g: int) -> list[int]:
        """Wait ``g`` of stream ``s`` has passed: the streams of its core to reschedule."""
        if g not in self.order:
            return []
        self.done.add(g)
        return self.held.pop(self.ix.streams[s].core, [])


def _stuck_state(
    ix: ProgramIndex,
    waiting: list[int],
    pc: list[int],
    fired: dict[Key, list[tuple[int, int]]],
    done: dict[Key, int],
    now: int,
    stall: _CoreStall | None = None,
) -> tuple[int, Stuck]:
    """Explain a state where every stream in ``waiting`` is blocked; pick the wait to force open.

    The chain starts at the lowest blocked stream and follows "waits for a set that only
    stream X issues, after X's own blocked wait" until it reaches a wait no remaining set can
    satisfy, or comes back to a stream already in the chain (a happens-before cycle).
    """
    gids = ix.stream_gids
    head = {s: gids[s][pc[s]] for s in waiting}
    parts: list[str] = []
    seen: dict[int, int] = {}
    order: list[int] = []
    s = waiting[0]
    cyclic = False
    while True:
        if s in seen:
            cyclic = True
            cycle_streams = order[seen[s] :]
            parts.append(f"back to {ix.describe(head[s])}")
            break
        seen[s] = len(order)
        order.append(s)
        g = head[s]
        w = stall.holder(s, g) if stall is not None else None
        if w is not None:  # held back by its core's first cross-core wait not yet passed
            parts.append(f"{ix.describe(g)} is held by the whole-core wait {ix.describe(w)}, and")
            s = ix.stream_of[w]
            continue
        k = ix.key_of[g]
        i = done.get(k, 0)
        setter = _next_setter(ix, k, pc, len(fired.get(k, ())), i)
        if setter is None:
            total = len(ix.sets_of.get(k, ()))
            parts.append(
                f"{ix.describe(g)} waits for set #{i} of {key_text(k)}, but the program has only "
                f"{total} set{'s' * (total != 1)} of it"
            )
            break
        s2, set_gid = setter
        if s2 not in head:  # cannot happen: a stream with a set still ahead is unfinished
            parts.append(f"{ix.describe(g)} waits for {ix.describe(set_gid)}")
            break
        parts.append(f"{ix.describe(g)} waits for {ix.describe(set_gid)}, which comes after")
        s = s2
    chain = f"at cycle {now} every unfinished pipe waits: " + " ".join(parts)
    if cyclic:
        # force open a wait of the cycle (a stream held by a whole-core wait has no wait ahead)
        waits = [x for x in cycle_streams if ix.role[head[x]] == WAIT and
                 (stall is None or stall.holder(x, head[x]) is None)]
        release = min(waits or cycle_streams)
        involved = [head[x] for x in cycle_streams]
    else:
        release = order[-1]
        involved = [head[x] for x in order]
    stuck = Stuck(now, [head[x] for x in waiting], chain, cyclic, head[release], involved)
    return release, stuck


def _next_setter(
    ix: ProgramIndex, k: Key, pc: list[int], fired_count: int, want: int
) -> tuple[int, int] | None:
    """The stream and gid of the set that would become set #``want`` of ``k``, if any remains."""
    remaining = []
    for g in ix.sets_of.get(k, ()):
        s = ix.stream_of[g]
        if ix.pos_of[g] >= pc[s]:
            remaining.append(g)
    need = want - fired_count
    if need >= len(remaining):
        return None
    # with one setter stream this is exact; with several, the first pending set in gid order
    g = remaining[need] if len({ix.stream_of[x] for x in remaining}) == 1 else remaining[0]
    return ix.stream_of[g], g


def retime(program: Program, hw: Hardware | str) -> Program:
    """The same program with every ``cycle``, item live range and the makespan taken from a
    nominal replay: what an emitter's normalised timetable must equal.

    Useful to build hand-written programs and to re-time mutated ones; the verifier itself
    never calls it. Stuck programs keep the cycles of the forced replay.
    """
    ix = ProgramIndex(program, load_hardware(hw))
    rep = simulate(ix)
    streams = []
    for s, st in enumerate(program.streams):
        instrs = [
            attrs.evolve(ins, cycle=rep.start[g]) for ins, g in zip(st.instrs, ix.stream_gids[s], strict=True)
        ]
        streams.append(Stream(st.core, st.unit, instrs))
    live: dict[str, tuple[int, int]] = {}
    for g in range(ix.n):
        if ix.role[g] != OP:
            continue
        ins = ix.instr[g]
        for name in (*ins.reads, *ins.writes):
            lo, hi = live.get(name, (rep.start[g], rep.end[g]))
            live[name] = (min(lo, rep.start[g]), max(hi, rep.end[g]))
    items: list[ProgItem] = []
    for it in program.items:
        lo, hi = live.get(it.name, (it.live_start, it.live_end))
        items.append(attrs.evolve(it, live_start=lo, live_end=hi))
    return attrs.evolve(program, streams=streams, items=items, makespan=rep.makespan)
