"""The link family's algorithms on their own: usage profiles, resource-flow edges, the
one-machine bound."""

from __future__ import annotations

import itertools
import random

from common import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from staticsched.model.links import flow_edges, overflows, peak_usage
from staticsched.solver.families.links import LinkTracker, link_bound
from staticsched.solver.link_values import LinkSpec, Xfer


def _per_cycle(intervals, horizon):
    use = [0] * horizon
    for b, e, u in intervals:
        for t in range(b, e):
            use[t] += u
    return use


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(1, 9)), max_size=12))
def test_peak_usage_is_the_per_cycle_maximum(raw):
    intervals = [(b, b + d, u) for b, d, u in raw]
    use = _per_cycle(intervals, 60)
    peak, at = peak_usage(intervals)
    assert peak == max(use, default=0)
    if peak:
        assert use[at] == peak
    cap = max(1, peak - 1)
    over = overflows(cap, [(b, e, u, f"x{k}") for k, (b, e, u) in enumerate(intervals)])
    assert bool(over) == (peak > cap)
    for t, level, labels in over:
        assert use[t] == level > cap and labels


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(-1, 10), st.integers(0, 6)), max_size=14),
    st.integers(0, 12),
)
def test_overflows_are_the_per_cycle_stretches_above_capacity(raw, cap):
    """Every maximal stretch of cycles above the capacity, at its first cycle, with the level
    and the holders there; empty and zero-rate intervals hold nothing."""
    intervals = [(b, b + d, u, f"x{k}") for k, (b, d, u) in enumerate(raw)]
    use = _per_cycle([(b, e, u) for b, e, u, _ in intervals], 50)
    want = []
    for t in range(50):
        if use[t] > cap and (t == 0 or use[t - 1] <= cap):
            holders = sorted(x for b, e, u, x in intervals if b <= t < e and u)
            want.append((t, use[t], holders))
    assert overflows(cap, intervals) == want


def _greedy(xs, units, seed):
    """A feasible timetable by the tracker: transfers start in a random order, each when the
    link has room (as the list scheduler does)."""
    rng = random.Random(seed)
    spec = [LinkSpec("L", units)]
    tracker = LinkTracker(spec, True)
    starts, rates, durs = {}, {}, {}
    t = 0
    for x in rng.sample(xs, len(xs)):
        while True:
            tracker.prune(t)
            r = tracker.rate(x, t)
            if r:
                break
            t = tracker.next_change(t)
        starts[x.op], rates[x.op] = t, r
        durs[x.op] = tracker.take(x, t, r) - t
        t += rng.randint(0, 3)
    n = len(xs)
    return [starts[i] for i in range(n)], [rates[i] for i in range(n)], [durs[i] for i in range(n)]


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 9))
def test_flow_edges_keep_any_earlier_timetable_within_the_link(seed, n):
    rng = random.Random(seed)
    units = rng.choice([64 * 100, 64 * 37, 64 * 555])
    xs = [Xfer(i, rng.randint(100, 5000), rng.randint(0, 30), 64 * rng.choice([40, 128, 240]), (0,))
          for i in range(n)]
    starts, rates, durs = _greedy(xs, units, seed)
    holds = [(x.op, starts[x.op] + x.overhead, starts[x.op] + durs[x.op], rates[x.op], (0,)) for x in xs]
    edges = [(a, b, -xs[b].overhead) for a, b in flow_edges([units], holds)]

    def holds(st_):
        return [(st_[x.op] + x.overhead, st_[x.op] + durs[x.op], rates[x.op]) for x in xs]

    assert peak_usage(holds(starts))[0] <= units
    # the earliest timetable that keeps only the edges (no other constraint) still fits
    early = [0] * n
    for _ in range(n):
        for a, b, lat in edges:
            early[b] = max(early[b], early[a] + durs[a] + lat)
    assert peak_usage(holds(early))[0] <= units


def _best_serial(jobs):
    """Exact non-preemptive optimum of max(C + q) on one machine, by trying every order."""
    best = None
    for order in itertools.permutations(jobs):
        t = worst = 0
        for r, p, q in order:
            t = max(t, r) + p
            worst = max(worst, t + q)
        best = worst if best is None else min(best, worst)
    return best


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20), st.integers(0, 25)),
                min_size=1, max_size=6))
def test_link_bound_never_exceeds_the_exact_serial_optimum(raw):
    # one unit of bandwidth and transfers of p bytes: the bound is the preemptive optimum
    xs = [Xfer(i, p, 0, 64 * 1000, (0,)) for i, (_, p, _) in enumerate(raw)]
    heads = [r for r, _, _ in raw]
    tails = [q for _, _, q in raw]
    ((_, bound),) = link_bound([LinkSpec("L", 64)], xs, heads, tails)
    assert bound <= _best_serial(raw)
    # and it is at least the trivial bounds
    assert bound >= max(r + p + q for r, p, q in raw)
    assert bound >= min(heads) + sum(p for _, p, _ in raw) + min(tails)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(2, 24), st.integers(1, 5000), st.integers(64, 1000 * 64), st.integers(0, 40))
def test_link_bound_never_exceeds_transfers_sharing_the_link_at_fractional_rates(n, nbytes, units, over):
    # n equal transfers started together, each at an n-th of the link: a feasible timetable
    # whose makespan the bound must not exceed (rounding each transfer's time at the whole
    # bandwidth up to a cycle added up to n cycles too many)
    rate = units // n
    if rate == 0:
        return
    xs = [Xfer(i, nbytes, over, units, (0,)) for i in range(n)]
    feasible = xs[0].cycles(rate)
    ((_, bound),) = link_bound([LinkSpec("L", units)], xs, [0] * n, [0] * n)
    assert bound <= feasible
    assert bound >= over + -(-n * nbytes * 64 // units)
