"""The coupled link plan stops at the gap limit (docs/design.md, refinement 31)."""

from __future__ import annotations

from staticsched.api import compile_graph
from staticsched.verify import verify


def test_a_split_within_the_gap_is_kept_without_the_chips_search():
    # on ascend-a2 the 72 cores share the L2 link (a coupled plan); with a gap of 5% the best
    # static split's list schedule is close enough to the chip's bound, so the chip is not
    # searched as one problem; with gap 0 it is. Either way the program keeps to the link
    # and verifies
    lines: list[str] = []
    loose = compile_graph("examples/awkward_gemm.json", "ascend-a2", method="list", gap=0.05,
                          progress=lines.append)
    # the splits' shares are named by a core's place in its cluster: identical clusters stay
    # one problem in every pass, as without the link (4 distinct of 24, not 24: the clusters
    # whose row of blocks is three whole blocks (x14), three in the M tail (x2), the one N
    # tail block (x7), and that block in the M tail)
    passes = [ln.split(", ")[1] for ln in lines if "core group(s)" in ln]
    assert len(passes) >= 3 and set(passes) == {"4 distinct"}
    note = dict(loose.schedule.stats)["links"]
    assert "within the gap limit 0.05 of the chip's lower bound" in note
    assert note.startswith(("equal split", "weighted split"))
    span, bound = loose.schedule.makespan, loose.schedule.lower_bound
    assert span - bound <= 0.05 * span
    assert verify(loose.program, "ascend-a2", jitter=1).ok
    exact = compile_graph("examples/awkward_gemm.json", "ascend-a2", method="list", gap=0.0)
    assert "solved as one problem (72 cores)" in dict(exact.schedule.stats)["links"]
    assert "within the gap limit" not in dict(exact.schedule.stats)["links"]
