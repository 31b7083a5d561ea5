"""Jitter replays in worker processes give exactly the findings of replays in this process."""

from __future__ import annotations

import attrs
from mutations import reuse_id_early

from benchmarks.samples import matmul_program
from staticsched.model.hardware import load_hardware
from staticsched.verify.index import ProgramIndex
from staticsched.verify.jitter import collect, start
from staticsched.verify.replay import simulate

HW = load_hardware("seed-davinci")


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
