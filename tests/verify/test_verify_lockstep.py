"""The numeric replay in lockstep over identical cores gives the per-op replay's numbers, bit for
bit, and falls back to it where the cores are not alike or an op fails."""

from __future__ import annotations

import json

import attrs
import numpy as np
from common import examples
from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st
from mutations import delete_wait, first_load_of
from strategies import seed_hw, taskgraphs

from benchmarks.samples import matmul_program
from staticsched.api import compile_graph
from staticsched.frontend.reference import make_inputs
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.dtypes import as_float32
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.program import Stream
from staticsched.tasks import KINDS
from staticsched.verify import lockstep, numeric
from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import simulate

HW = "seed-davinci"


def _both(program, hw=HW):
    """The replay op by op and in lockstep: (gm, findings) each, and the classes."""
    ix = ProgramIndex(program, load_hardware(hw))
    rep = simulate(ix)
    inputs = make_inputs(taskgraph_from_dict(json.loads(program.source)), seed=0)
    events = numeric._events(ix, rep)
    classes = lockstep.classes(ix, events)
    return numeric._replay(ix, events, inputs), numeric._replay(ix, events, inputs, classes), classes


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].tobytes() == b[name].tobytes(), name


def test_half_to_float_table_is_numpys_conversion_bit_for_bit():
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    want = every.astype(np.float32)
    got = as_float32(every)
    assert got.dtype == np.float32 and got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    # a strided view with a lanes axis, as the lockstep replay has them
    tiles = every.reshape(16, 64, 64)[:, ::2, 1:33]
    assert as_float32(tiles).tobytes() == tiles.astype(np.float32).tobytes()
    x = np.ones((3, 3), np.float32)
    assert as_float32(x) is not x


def test_identical_cores_form_one_class_and_give_the_same_numbers():
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=4)
    (one, found_one), (lanes, found_lanes), classes = _both(program)
    assert [c.cores for c in classes] == [(0, 1, 2, 3)]
    assert not found_one and not found_lanes
    _same(one, lanes)
    assert not np.isnan(one["C"].astype(np.float32)).any()
    # a race-free program: no op's targets are touched while it runs, so every op writes its
    # results at its start
    assert len(classes[0].direct) == len(classes[0].lanes)


def test_an_op_whose_targets_are_touched_before_it_ends_keeps_its_copy():
    # without a wait, an op may start on a buffer another op is still writing: that writer
    # commits at its end as before, and the numbers stay the per-op replay's
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=2)
    kept = 0
    for seed in range(6):
        (one, found_one), (lanes, found_lanes), classes = _both(delete_wait(program, seed))
        assert [f.message for f in found_lanes] == [f.message for f in found_one]
        _same(one, lanes)
        kept += sum(len(c.lanes) - len(c.direct) for c in classes)
    assert kept > 0


def test_cores_with_other_work_form_classes_of_their_own():
    # 5 x 3 blocks of 32 over 4 cores: cores with 4 blocks and with 3
    program = matmul_program(m=160, n=96, k=64, base=(32, 32, 32), cores=4)
    (one, found_one), (lanes, found_lanes), classes = _both(program)
    assert len(classes) >= 2 and sorted(c for cls in classes for c in cls.cores) == [0, 1, 2, 3]
    assert not found_one and not found_lanes
    _same(one, lanes)


def _moved(program, core: int, delta: int):
    """``program`` with the L0A items of ``core`` at another offset (still in its space)."""
    items = [
        attrs.evolve(it, offset=it.offset + delta) if it.core == core and it.space == "L0A" else it
        for it in program.items
    ]
    return attrs.evolve(program, items=items)


def test_an_operand_elsewhere_makes_another_class():
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=2)
    moved = _moved(program, 1, 2048)
    (one, _), (lanes, _), classes = _both(moved)
    assert [c.cores for c in classes] == [(0,), (1,)]
    _same(one, lanes)


def test_a_failing_op_falls_back_to_the_per_op_replay_and_its_finding():
    # core 1's first load reads outside its tensor: the lanes run it, fail, and the whole
    # replay runs op by op, which names the op
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=2)
    bad = first_load_of(program, 1, region=((0, 32), (5000, 5032)))
    (one, found_one), (lanes, found_lanes), classes = _both(bad)
    assert [c.cores for c in classes] == [(0, 1)]
    assert found_one and [f.message for f in found_lanes] == [f.message for f in found_one]
    for name in one:
        assert np.array_equal(one[name], lanes[name], equal_nan=True), name
    # and through run(), which picks the lockstep replay for independent cores
    ix = ProgramIndex(bad, load_hardware(HW))
    inputs = make_inputs(taskgraph_from_dict(json.loads(bad.source)), seed=0)
    assert numeric.order(ix, simulate(ix)).lockstep
    _, found_run = numeric.run(ix, simulate(ix), inputs)
    assert [f.message for f in found_run] == [f.message for f in found_one]


def test_cores_joined_by_data_replay_op_by_op():
    program = matmul_program(m=64, n=64, k=64, cores=2)
    ix = ProgramIndex(program, load_hardware(HW))
    assert numeric.order(ix, simulate(ix)).lockstep
    moved = first_load_of(program, 1, tensor="C", region=((0, 32), (0, 32)))
    joined = ProgramIndex(moved, load_hardware(HW))
    assert not numeric.order(joined, simulate(joined)).lockstep


def test_an_item_declared_on_another_core_is_an_input_finding():
    # what lets lanes and parts give each core its own buffers: an op never reaches a bounded
    # item of another core without the index saying so, and then no numeric replay runs
    program = matmul_program(m=64, n=64, k=64, cores=2)
    name = next(it.name for it in program.items if it.core == 1 and it.space == "L0A")
    items = [attrs.evolve(it, core=0) if it.name == name else it for it in program.items]
    ix = ProgramIndex(attrs.evolve(program, items=items), load_hardware(HW))
    assert "wrong_core" in {f.kind for f in ix.problems}


def test_an_unbounded_item_two_cores_access_joins_them():
    program = matmul_program(m=64, n=64, k=64, cores=2)
    ix = ProgramIndex(program, load_hardware(HW))
    assert numeric._groups(ix)[0] == [[0], [1]]
    # core 0's first L0A item made unbounded (no space), and read by core 1's first mmad
    name = next(it.name for it in program.items if it.core == 0 and it.space == "L0A")
    items = [attrs.evolve(it, space="") if it.name == name else it for it in program.items]
    s = next(j for j, st_ in enumerate(program.streams) if st_.core == 1 and st_.unit == "CUBE")
    instrs = list(program.streams[s].instrs)
    i = next(j for j, ins in enumerate(instrs) if ins.kind == "mmad")
    instrs[i] = attrs.evolve(instrs[i], reads=(name, *instrs[i].reads[1:]))
    streams = list(program.streams)
    streams[s] = Stream(1, "CUBE", instrs)
    ix = ProgramIndex(attrs.evolve(program, items=items, streams=streams), load_hardware(HW))
    assert numeric._groups(ix)[0] == [[0, 1]]
    assert not numeric.order(ix, simulate(ix)).lockstep


@settings(max_examples=examples(8), deadline=None)
@given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
def test_lockstep_replay_equals_the_per_op_replay(data, kind):
    """Generated task graphs of every kind first (vector epilogues, row reductions, attention):
    the two replays' tensors are bit-identical."""
    tg = data.draw(taskgraphs(first=kind), label="graph")
    hw = seed_hw()
    program = compile_graph(tg, hw, method="list").program
    ix = ProgramIndex(program, hw)
    rep = simulate(ix)
    # only cores no data flows between may run in lockstep (a chain of tasks on different
    # cores may not)
    assume(numeric.order(ix, rep).lockstep)
    events = numeric._events(ix, rep)
    classes = lockstep.classes(ix, events)
    note(f"classes {[c.cores for c in classes]}")
    event(f"widest class: {max(len(c.cores) for c in classes)} cores")
    inputs = make_inputs(taskgraph_from_dict(json.loads(program.source)), seed=0)
    one, found_one = numeric._replay(ix, events, inputs)
    lanes, found_lanes = numeric._replay(ix, events, inputs, classes)
    assert [f.message for f in found_lanes] == [f.message for f in found_one]
    for name in one:
        assert one[name].tobytes() == lanes[name].tobytes(), name
