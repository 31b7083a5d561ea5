"""Jitter replays in worker processes give exactly the findings of replays in this process."""

from __future__ import annotations

import attrs
from common import SEED
from mutations import reuse_id_early

from benchmarks.samples import matmul_program
from staticsched.verify.index import ProgramIndex
from staticsched.verify.jitter import collect, start
from staticsched.verify.replay import simulate

HW = SEED


def _findings(program, processes: int):
    ix = ProgramIndex(program, HW)
    rep = simulate(ix)
    return collect(start(ix, 4, 7, processes=processes), ix, rep, frozenset())


def test_parallel_jitter_equals_sequential_jitter():
    flags = reuse_id_early(matmul_program(HW, 256, 256, 256, base=(64, 64, 64), cores=2), 0)
    # a timed program replayed with jittered durations races everywhere: many findings to merge
    timed = attrs.evolve(
        flags,
        mode="timed",
        streams=[attrs.evolve(st, instrs=[i for i in st.instrs if not i.is_sync]) for st in flags.streams],
    )
    for program in (flags, timed):
        inline = _findings(program, 0)
        assert _findings(program, 2) == inline
        assert _findings(program, 3) == inline
    assert len(_findings(timed, 0)) > 100


def test_jitter_along_the_nominal_order_equals_the_event_replay():
    """A statically paired flags program that keeps the reuse rule replays its jitter in one
    pass along the nominal issue order: the same cycles as the event-driven replay."""
    import numpy as np

    from staticsched.verify.hb import flags_pass
    from staticsched.verify.jitter import StaticPairs, jitter_durations

    program = matmul_program(HW, 512, 256, 512, base=(64, 64, 64), cores=2)
    ix = ProgramIndex(program, HW)
    rep = simulate(ix)
    _, reuse, _, _ = flags_pass(ix, rep)
    assert not reuse and StaticPairs.applies(ix, rep, reuse_rule_kept=True)
    assert not StaticPairs.applies(ix, rep, reuse_rule_kept=False)
    pairs = StaticPairs(ix, rep)
    rng = np.random.default_rng(5)
    for _ in range(5):
        dur = jitter_durations(ix, rng)
        fast, slow = pairs.replay(ix, dur), simulate(ix, dur)
        assert fast is not None
        assert (fast.start, fast.end) == (slow.start, slow.end)
        assert not slow.double_sets and not slow.stuck


def test_a_program_breaking_the_reuse_rule_is_replayed_event_by_event():
    from staticsched.verify.hb import flags_pass
    from staticsched.verify.jitter import StaticPairs

    mutant = reuse_id_early(matmul_program(HW, 256, 256, 256, base=(64, 64, 64), cores=2), 0)
    ix = ProgramIndex(mutant, HW)
    rep = simulate(ix)
    _, reuse, _, _ = flags_pass(ix, rep)
    assert reuse
    assert not StaticPairs.applies(ix, rep, reuse_rule_kept=not reuse)


def test_reference_worker_gives_the_same_report(monkeypatch):
    """The numeric reference computed in a spawned worker (a big program's) gives the same
    report as in this process, a numeric mismatch and findings of other checks included."""
    from mutations import mmad_extent, overlap_items

    from staticsched.verify import api, verify

    program = overlap_items(mmad_extent(matmul_program(HW, 256, 256, 256, base=(64, 64, 64), cores=2), 0), 0)
    program = reuse_id_early(program, 0)
    inline = verify(program, HW, jitter=2, numeric=True)
    monkeypatch.setattr(api, "PARALLEL_MIN_INSTRUCTIONS", 0)
    forked = verify(program, HW, jitter=2, numeric=True)
    assert forked.text() == inline.text()
    assert {c for c, _ in inline.kinds()} >= {"flag", "cost", "memory", "numeric"}


def test_jitter_along_the_nominal_order_gives_the_same_findings_in_workers():
    """The fast jitter path in worker processes, in this process, and the event replays: one
    result (here: nothing, on a clean program whose replays all take the fast path)."""
    from staticsched.verify.jitter import StaticPairs

    program = matmul_program(HW, 512, 256, 512, base=(64, 64, 64), cores=2)
    ix = ProgramIndex(program, HW)
    rep = simulate(ix)
    assert StaticPairs.applies(ix, rep, reuse_rule_kept=True)
    event = collect(start(ix, 3, 7, processes=0), ix, rep, frozenset())
    for processes in (0, 2):
        fast = start(ix, 3, 7, nominal=rep, reuse_rule_kept=True, processes=processes)
        assert collect(fast, ix, rep, frozenset()) == event == []
