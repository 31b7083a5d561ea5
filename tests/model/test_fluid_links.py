"""Links shared by the hardware in flags programs (docs/program-format.md, "Shared links"): the
emitter's and the verifier's fluid models against a plain event-by-event oracle, and the
properties every fair sharing must have."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import fluid_segments

from staticsched.model.fluid import FluidLinks, FluidTransfer, fair_rates
from staticsched.verify.fluid import LinkShare


@st.composite
def transfer_sets(draw):
    """1-3 links of 1-300 units; 1-12 transfers, each on a non-empty subset of the links, with
    a cap, some work and a data start (issued ``overhead`` cycles before it)."""
    links = draw(st.integers(1, 3))
    caps = [draw(st.integers(1, 300)) for _ in range(links)]
    out = []
    for _ in range(draw(st.integers(1, 12))):
        on = draw(st.lists(st.integers(0, links - 1), min_size=1, max_size=links, unique=True))
        out.append((draw(st.integers(0, 40)), draw(st.integers(1, 3000)), draw(st.integers(1, 200)),
                    tuple(sorted(on)), draw(st.integers(0, 5))))
    return caps, out


def _emitter_ends(caps, xs) -> dict[int, int]:
    links = FluidLinks(caps)
    for i, (d, work, cap, on, ov) in enumerate(xs):
        links.issue(i, FluidTransfer(work, ov, cap, on), d - ov)
    ends = {}
    while links.busy():
        key, end = links.completion(1 << 62)
        ends[key] = end
    return ends


def _verifier_ends(caps, xs) -> dict[int, int]:
    links = LinkShare(caps)
    for i, (d, work, cap, on, ov) in enumerate(xs):
        links.begin(i, d - ov, (work, ov, cap, on))
    ends = {}
    while not links.idle():
        got = links.finish(1 << 62)
        assert got is not None
        ends[got[0]] = got[1]
    return ends


@settings(max_examples=300, deadline=None)
@given(transfer_sets())
def test_fluid_sharing_matches_the_oracle_and_keeps_its_promises(case):
    caps, xs = case
    segments, ended = fluid_segments(caps, [(d, w, c, on) for d, w, c, on, _ in xs])
    moved = dict.fromkeys(range(len(xs)), Fraction(0))
    for t0, t1, rates in segments:
        assert t0 < t1 and isinstance(t0, int) and isinstance(t1, int)  # shares change at whole cycles
        for k, cap in enumerate(caps):
            on_k = [i for i in rates if k in xs[i][3]]
            # no link above its capacity
            assert sum(rates[i] for i in on_k) <= cap
            # work conserved: on a link whose transfers ask for more than it has, it is full
            if len(caps) == 1 and sum(xs[i][2] for i in on_k) >= cap:
                assert sum(rates[i] for i in on_k) == cap
        for i, r in rates.items():
            assert 0 < r <= xs[i][2]  # no transfer above its path rate
            # max-min fair: at its cap, or at the top rate of a link that is full
            full = [k for k in xs[i][3]
                    if sum(rates[j] for j in rates if k in xs[j][3]) == caps[k]
                    and all(rates[j] <= r for j in rates if k in xs[j][3])]
            assert r == xs[i][2] or full
            # a transfer ends in the first whole cycle by which it has moved its work
            before = moved[i]
            moved[i] += r * (t1 - t0)
            if t1 == ended[i]:
                assert before + r * (t1 - t0 - 1) < xs[i][1] <= moved[i]
            else:
                assert moved[i] < xs[i][1]
    assert set(ended) == set(range(len(xs)))
    assert all(ended[i] >= d + 1 for i, (d, *_) in enumerate(xs))
    assert _emitter_ends(caps, xs) == ended
    assert _verifier_ends(caps, xs) == ended


def test_one_transfer_alone_takes_the_cost_models_cycles():
    # 32 KiB at 240 B/cycle: the path's rate when nothing else moves (ceil(32768 / 240) = 137)
    work = 32768 * 64
    assert _emitter_ends([3888 * 64], [(32, work, 240 * 64, (0,), 32)]) == {0: 32 + 137}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=3).flatmap(
    lambda caps: st.tuples(st.just(caps), st.lists(
        st.tuples(st.integers(1, 50), st.lists(st.integers(0, len(caps) - 1), min_size=1,
                                                max_size=len(caps), unique=True).map(sorted).map(tuple),
                  st.integers(1, 4)),
        min_size=1, max_size=6))))
def test_a_class_of_identical_transfers_gets_each_members_fair_rate(case):
    # the replay keeps transfers of one cap and links as one class with a count: its rate must
    # be what each of them gets when they are listed one by one
    capacity, classes = case
    one_by_one = fair_rates(capacity, [(c, on) for c, on, m in classes for _ in range(m)])
    grouped = fair_rates(capacity, [(c, on) for c, on, _ in classes], [m for _, _, m in classes])
    assert one_by_one == [r for r, (_, _, m) in zip(grouped, classes, strict=True) for _ in range(m)]


def test_fair_rates_split_a_full_link_and_respect_caps():
    assert fair_rates([10], [(8, (0,)), (8, (0,))]) == [5, 5]
    assert fair_rates([10], [(2, (0,)), (8, (0,))]) == [2, 8]
    assert fair_rates([9], [(8, (0,)), (8, (0,))]) == [Fraction(9, 2)] * 2
    # the second link bottlenecks transfer 1, whose unused share goes to transfer 0
    assert fair_rates([10, 2], [(10, (0,)), (10, (0, 1))]) == [8, 2]
