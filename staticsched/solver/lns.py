"""Windowed large-neighbourhood search over a list schedule, for problems too large for one
CP-SAT model (a rolling horizon).

Windows of consecutive ops in start order are visited from the first to the last, half a
window apart. Each window's ops are re-solved by CP-SAT with everything else pinned: a window
op may start as soon as the fixed ops before it on its pipe and its fixed predecessors allow
(so earlier windows' gains carry forward) and must end by the window's old end (so the fixed
ops after it stay valid). The fixed ops that touch the window -- neighbours by an edge, ops on
its pipes in its span, first and last accesses of items held in the span, the ops of flag
lifetimes live in it or, in a pool, up to where the window's own flags may live -- enter the
model with their starts pinned; an item keeps its address unless the window accesses it and
its hold stays in the span (outside it the model does not see the other items' bytes). The
objective is the window's end. Every intermediate timetable satisfies the model, and the
caller's semi-active normalisation moves the ops after the last window forward.

Passes repeat until the budget is spent, each shifted by a third of the stride so windows cut
the schedule elsewhere; a pass that improves nothing grows the windows by half (up to
:data:`MAX_WINDOW`), and a pass without gain at the largest size ends the search
(``"lns_converged"``). Measured on a 3,000-op heterogeneous tile pipeline: windows of 60 ops
are proven optimal in ~0.1 s; windows of 600 ops did not improve in 15 s.

The budget is in calibrated seconds (:mod:`.budget`): each window is charged its CP-SAT
deterministic time over the window rate plus a fixed charge per op for the Python work. The
charge is deterministic, so the number of windows, and the result, are reproducible unless
the wall clock stops the search first (or wall-clock mode is on).
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from staticsched.solver.addresses import colour_slots
from staticsched.solver.budget import (
    STOP_CONVERGED,
    STOP_DETERMINISTIC,
    STOP_GAP,
    STOP_WALL_MODE,
    STOP_WALL_NET,
    TARGET,
    Clock,
    det_rate,
    spent_seconds,
    window_overhead,
)
from staticsched.solver.cpmodel import solve_cpsat
from staticsched.solver.feasibility import model_violations
from staticsched.solver.list_sched import Timetable
from staticsched.solver.problem import ItemSpec, Problem, Token

#: ops per window at the start, and the largest window a pass without gain may grow to
WINDOW = 90
MAX_WINDOW = 300
#: deterministic units a window of :data:`WINDOW` ops may use (larger windows in proportion).
#: Small is better per CPU second: on a 3,000-op tile pipeline, 150 windows gained 0.83% in
#: 12 CPU s at 0.005 units each, 0.53% in 21 s at 0.01, 0.63% in 26 s at 0.02 and 0.13% in
#: 60 s at 0.05 (a window rarely proves its optimum; the first improvements are the gain)
WINDOW_DET = 0.005


def covers_one_pass(n: int, seconds: float, workers: int = 1) -> bool:
    """Whether ``seconds`` of calibrated budget can pay for one pass of windows over an
    ``n``-op problem, counting only each window's Python overhead (a lower bound on its
    charge, CP-SAT's own time left out).

    A window moves its ops only within its old span, so a pass that stops early improves the
    start of the schedule and leaves its end, which decides the makespan, as the list
    scheduler made it. On the chip-wide problems of ``ascend-a2`` (38,056 ops for the
    GPT-2-small block, 138,240 for ``matmul_gelu.json``) 60 s paid for 130 of a pass's 846
    windows and gained 8 cycles of 134,940 on the first, none on the second, for a minute of
    search each (docs/design.md, refinement 62)."""
    stride = max(1, WINDOW // 2)
    windows = -(-max(n - WINDOW, 0) // stride) + 1
    charge = window_overhead(n, WINDOW) / TARGET
    return seconds * max(1, workers) >= windows * charge


@attrs.frozen
class LnsResult:
    """The best timetable found, why the search stopped, how many windows ran and improved,
    and the calibrated seconds spent."""

    timetable: Timetable
    stop_reason: str
    rounds: int = 0
    improved: int = 0
    spent: float = 0.0
    passes: int = 0


def improve_lns(
    prob: Problem,
    tt: Timetable,
    *,
    seconds: float,
    clock: Clock,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    label: str = "",
    max_windows: int | None = None,
    target: int = 0,
) -> LnsResult:
    """Improve the model-feasible timetable ``tt`` window by window within ``seconds``.

    With ``clock.workers = w > 1`` the windows of a pass are split into ``w`` contiguous runs
    ("lanes") solved side by side, one window per lane at a time, each by one CP-SAT worker
    in its own thread. The lanes' results are merged in lane order, each kept only if the
    merged timetable still satisfies the model (:func:`.feasibility.model_violations`), so
    the outcome does not depend on which thread finishes first.

    Parameters
    ----------
    seconds
        Calibrated seconds granted (deterministic mode) or wall seconds (wall-clock mode).
    clock
        Mode, workers and the wall-clock deadline.
    max_windows
        Stop after this many windows (tests, calibration).
    target
        Stop as soon as the model makespan is at most this (the gap limit,
        :func:`.budget.gap_target`).
    progress
        Called after every tenth window with the model makespan so far.
    """
    rate = det_rate("window", "lp", WINDOW)
    width = max(1, clock.workers)
    best, improved, spent, r, passes = tt, 0, 0.0, 0, 0
    size = WINDOW
    t_wall = clock.remaining()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=width) if width > 1 else None

    def out_of_budget() -> str | None:
        if best.makespan <= target:
            return STOP_GAP
        if clock.expired():
            return STOP_WALL_NET if clock.deterministic else STOP_WALL_MODE
        if clock.deterministic and spent >= seconds:
            return STOP_DETERMINISTIC
        if not clock.deterministic and t_wall - clock.remaining() >= seconds:
            return STOP_WALL_MODE
        if max_windows is not None and r >= max_windows:
            return STOP_DETERMINISTIC
        return None

    try:
        while True:
            stride = max(1, size // 2)
            shift = (passes * max(1, stride // 3)) % stride
            starts = list(range(shift, max(prob.n - size, 0) + stride, stride)) or [0]
            per_lane = -(-len(starts) // width)
            runs = [starts[k * per_lane : (k + 1) * per_lane] for k in range(width)]
            gained = False
            for step in range(per_lane):
                why = out_of_budget()
                if why is not None:
                    return LnsResult(best, why, r, improved, spent, passes)
                order = sorted(range(prob.n), key=lambda i: (best.starts[i], i))
                los = [run[step] for run in runs if step < len(run)]
                if max_windows is not None:
                    los = los[: max(1, max_windows - r)]
                windows = [order[min(lo, max(0, prob.n - size)) :][:size] for lo in los]
                det_cap = WINDOW_DET * size / WINDOW
                if clock.deterministic:
                    det_cap = min(det_cap, max(1e-3, TARGET * rate * (seconds - spent)))
                args = (det_cap, clock.remaining(), seed)
                if pool is None:
                    outs = [_solve_window(prob, best, windows[0], *args)]
                else:
                    futs = [pool.submit(_solve_window, prob, best, w, *args) for w in windows]
                    outs = [f.result() for f in futs]
                r += len(outs)
                charge = [spent_seconds(d, rate) + window_overhead(prob.n, k) / TARGET for _, d, k in outs]
                # side by side, a step takes about the mean of its windows
                spent += sum(charge) / width if width > 1 else charge[0]
                merged, kept = _merge(prob, best, [moved for moved, _, _ in outs])
                if kept:
                    best, improved, gained = merged, improved + kept, True
                if progress is not None and r % 10 < len(outs):
                    progress(f"{label}window {r} (pass {passes + 1}, {size} ops): best makespan "
                             f"{best.makespan} before normalisation")
            passes += 1
            if not gained:
                if size >= min(MAX_WINDOW, prob.n):
                    return LnsResult(best, STOP_CONVERGED, r, improved, spent, passes)
                size = min(MAX_WINDOW, size + size // 2)
    finally:
        if pool is not None:
            pool.shutdown()


def _merge(prob: Problem, base: Timetable, moved: list[Timetable | None]) -> tuple[Timetable, int]:
    """``base`` with the changes of each window result applied in lane order; a result whose
    changes break the model together with the ones kept before it is dropped. Returns the
    merged timetable and how many results were kept."""
    found = [m for m in moved if m is not None and m.starts != base.starts]
    if not found:
        return base, 0
    if len(found) == 1 and len(moved) == 1:
        return found[0], 1  # one window solved on ``base`` itself: valid by construction
    merged, kept = base, 0
    for m in found:
        starts = list(merged.starts)
        offsets = list(merged.offsets)
        for i, (a, b) in enumerate(zip(base.starts, m.starts, strict=True)):
            if a != b:
                starts[i] = b
        for k, (a, b) in enumerate(zip(base.offsets, m.offsets, strict=True)):
            if a != b and not prob.spaces[prob.items[k].space].slot:
                offsets[k] = b
        coloured = colour_slots(prob, starts, offsets)
        if coloured is None or model_violations(prob, starts, coloured):
            continue
        ends = (a + d for a, d in zip(starts, prob.dur, strict=True))
        merged, kept = Timetable(starts, coloured, max(ends, default=0), base.rule), kept + 1
    return merged, kept


def _solve_window(
    prob: Problem,
    tt: Timetable,
    window: Sequence[int],
    det_limit: float,
    wall_limit: float,
    seed: int,
) -> tuple[Timetable | None, float, int]:
    """``tt`` with ``window`` re-solved (None if CP-SAT found nothing), the deterministic
    time CP-SAT used and the number of ops in the window model."""
    s, dur = tt.starts, prob.dur
    inside = set(window)
    t_end = max(s[i] + dur[i] for i in window)
    # a window op may move forward up to the last fixed op that started before it on its pipe
    first = min(s[i] for i in window)
    last_fixed: dict[int, int] = {}
    for i in range(prob.n):
        if i not in inside and s[i] <= first:
            p = prob.pipe_of[i]
            last_fixed[p] = max(last_fixed.get(p, 0), s[i] + dur[i])
    release_of = {i: last_fixed.get(prob.pipe_of[i], 0) for i in window}
    for a, b, lat in prob.edges:
        if b in inside and a not in inside:
            release_of[b] = max(release_of[b], s[a] + dur[a] + lat)
    t_begin = min(release_of.values())
    keep = set(inside)
    for a, b, _ in prob.edges:
        if a in inside or b in inside:
            keep.add(a)
            keep.add(b)
    pipes = {prob.pipe_of[i] for i in window}
    for i in range(prob.n):
        if prob.pipe_of[i] in pipes and s[i] < t_end and s[i] + dur[i] > t_begin:
            keep.add(i)
    items = _items_in_span(prob, tt, inside, t_begin, t_end)
    for k in items:
        keep.add(prob.items[k].first)
        keep.update(prob.items[k].tails)
    tokens = _tokens_in_span(prob, s, inside, t_begin, t_end)
    for k in tokens:
        tok = prob.tokens[k]
        keep.add(tok.producer)
        keep.update(tok.consumers)
        for rv in tok.triggers:
            keep.update(rv)
    # transfers whose link holds overlap the window's span share its bandwidth: pinned
    for x in prob.xfers:
        b = x.hold_start(s[x.op], prob.link_overhead_holds)
        if x.op in inside or (b < t_end and s[x.op] + dur[x.op] > t_begin):
            keep.add(x.op)
    ops = sorted(keep)
    sub = _subproblem(prob, ops, items, tokens)
    local = {g: k for k, g in enumerate(ops)}
    release = [release_of[g] if g in inside else s[g] for g in ops]
    deadline = [t_end if g in inside else s[g] + dur[g] for g in ops]
    hint = Timetable([s[g] for g in ops], [tt.offsets[k] for k in items], max(s[g] + dur[g] for g in ops))
    # items whose accesses are all fixed keep their addresses (mixed spaces; uniform ones are
    # recoloured from the new timetable), and so do items whose hold may reach outside the
    # span [t_begin, t_end + reuse_gap) -- a fixed first access before it or a fixed tail after
    # it: only the items held in the span are in the model, so a new address there could
    # take bytes an item held outside it uses
    fixed = {
        j: tt.offsets[k]
        for j, k in enumerate(items)
        if not prob.spaces[prob.items[k].space].slot
        and not _may_move(prob.items[k], inside, s, dur, t_begin, t_end)
    }
    res = solve_cpsat(
        sub,
        hint,
        0,
        det_limit=det_limit,
        wall_limit=wall_limit,
        seed=seed,
        release=release,
        deadline=deadline,
        objective_ops=[local[g] for g in window],
        fixed_offsets=fixed,
        search="lp",
    )
    if res.timetable is None:
        return None, res.det_time, len(ops)
    starts = list(s)
    for j, g in enumerate(ops):
        starts[g] = res.timetable.starts[j]
    offsets = list(tt.offsets)
    for j, k in enumerate(items):
        if not prob.spaces[prob.items[k].space].slot:
            offsets[k] = res.timetable.offsets[j]
    coloured = colour_slots(prob, starts, offsets)
    if coloured is None:
        return None, res.det_time, len(ops)
    return (
        Timetable(starts, coloured, max(a + d for a, d in zip(starts, dur, strict=True)), tt.rule,
                  tt.rates),
        res.det_time,
        len(ops),
    )


def _may_move(
    it: ItemSpec, inside: set[int], s: Sequence[int], dur: Sequence[int], t0: int, t1: int
) -> bool:
    """Whether a window may give ``it`` a new address: the window accesses it, and its hold
    stays within the span ``[t0, t1 + reuse_gap)`` wherever the window moves its accesses (window
    ops start at ``t0`` or later and end by ``t1``; fixed ones keep their starts)."""
    if it.first not in inside and not inside.intersection(it.tails):
        return False
    if it.first not in inside and s[it.first] < t0:
        return False
    return all(a in inside or s[a] + dur[a] <= t1 for a in it.tails)


def _items_in_span(prob: Problem, tt: Timetable, inside: set[int], t0: int, t1: int) -> list[int]:
    """Binding items accessed by the window or held during its span."""
    begin, end = prob.holds(tt.starts)
    binding = np.fromiter((prob.spaces[it.space].binding for it in prob.items), bool, len(prob.items))
    held = binding & (begin < t1 + prob.reuse_gap) & (end > t0)
    out = set(np.flatnonzero(held).tolist())
    # an item the window accesses is in the model wherever its hold lies
    for k in _items_of(prob, inside):
        if binding[k]:
            out.add(k)
    return sorted(out)


def _items_of(prob: Problem, ops: set[int]) -> set[int]:
    """Items some op of ``ops`` first writes or accesses last."""
    by_op = _item_ops(prob)
    return {k for i in ops for k in by_op.get(i, ())}


@functools.lru_cache(maxsize=8)
def _item_ops(prob: Problem) -> dict[int, tuple[int, ...]]:
    """Per op, the items it first writes or accesses last (once per problem)."""
    out: dict[int, list[int]] = {}
    for k, it in enumerate(prob.items):
        for a in {it.first, *it.tails}:
            out.setdefault(a, []).append(k)
    return {i: tuple(ks) for i, ks in out.items()}


def _tokens_in_span(prob: Problem, s: Sequence[int], inside: set[int], t0: int, t1: int) -> list[int]:
    """Binding tokens that involve the window, and those that may be live while one of them
    is: during the span or, in its pool, up to the end the window's tokens may reach past the
    span (reordering the window can switch on a token whose consumer comes after the span)."""
    dur = prob.dur
    involved: set[int] = set()
    reach: dict[int, int] = {}
    for k, tok in enumerate(prob.tokens):
        if not prob.budgets[tok.budget].binding:
            continue
        ops = (tok.producer, *tok.consumers)
        if any(o in inside for o in ops) or any(r in inside for rv in tok.triggers for r in rv):
            involved.add(k)
            # a window op starts before t1
            end = tok.end(min(t1 if c in inside else s[c] for c in tok.consumers))
            reach[tok.budget] = max(reach.get(tok.budget, t1), end)
    out = []
    for k, tok in enumerate(prob.tokens):
        if k in involved:
            out.append(k)
            continue
        if not prob.budgets[tok.budget].binding:
            continue
        begin = s[tok.producer] + dur[tok.producer]
        end = tok.end(min(s[c] for c in tok.consumers))
        if begin < reach.get(tok.budget, t1) and end > t0:
            out.append(k)
    return out


def _subproblem(prob: Problem, ops: list[int], items: list[int], tokens: list[int]) -> Problem:
    """``prob`` restricted to ``ops`` (sorted), the given items and tokens."""
    local = {g: k for k, g in enumerate(ops)}
    edges = [(local[a], local[b], lat) for a, b, lat in prob.edges if a in local and b in local]
    sub_items = []
    for k in items:
        it = prob.items[k]
        sub_items.append(attrs.evolve(it, first=local[it.first], tails=[local[a] for a in it.tails]))
    sub_tokens = []
    for k in tokens:
        tok = prob.tokens[k]
        sub_tokens.append(
            Token(
                local[tok.producer],
                tok.budget,
                [local[c] for c in tok.consumers],
                tok.latency,
                [tuple(local[r] for r in rv) for rv in tok.triggers],
            )
        )
    sub_xfers = [attrs.evolve(x, op=local[x.op]) for x in prob.xfers if x.op in local]
    return attrs.evolve(
        prob,
        dur=[prob.dur[g] for g in ops],
        pipe_of=[prob.pipe_of[g] for g in ops],
        edges=edges,
        items=sub_items,
        tokens=sub_tokens,
        xfers=sub_xfers,
    )
