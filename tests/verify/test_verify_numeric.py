"""Numeric replay against the NumPy reference of the program's source TaskGraph."""

from __future__ import annotations

import json
import re

import attrs
import numpy as np
from mutations import corrupt_load_region, first_load_of

from benchmarks.samples import matmul_program, pingpong_program
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.program import Instr, Stream
from staticsched.verify import jitter, numeric, retime, verify
from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import simulate

HW = "seed-davinci"


def test_tiny_matmul_with_tails_matches_the_reference():
    p = matmul_program(m=80, n=48, k=96)
    report = verify(p, HW, numeric=True, jitter=3)
    assert report.ok, report.text()
    st = report.stat
    assert st["numeric"] == "ok"
    # the rounding error itself depends on the BLAS kernel's summation order (exactly 0 with
    # OpenBLAS' Haswell/Zen kernels): only its bound is a property of the replay
    assert 0 <= st["numeric_max_error"] < 2e-2


def test_tolerance_is_applied():
    # an error of O(1) that does not come from summation order: one load reads the wrong tile
    p = corrupt_load_region(matmul_program(m=32, n=32, k=64), 0)
    err = verify(p, HW, numeric=True, tolerance=1e9).stat["numeric_max_error"]
    assert err > 0.05
    loose = verify(p, HW, numeric=True, tolerance=2 * err)
    assert loose.ok and loose.stat["numeric_max_error"] == err
    tight = verify(p, HW, numeric=True, tolerance=err / 2)
    (f,) = tight.by_check("numeric")
    assert f.kind == "mismatch" and f"differ by more than {err / 2:g}" in f.message


def _elements(message: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"\[(\d+), (\d+)\] = ", message)]


def test_corrupted_load_fails_naming_the_wrong_output_elements():
    p = matmul_program(m=64, n=64, k=96)
    mutant = corrupt_load_region(p, 0)
    report = verify(mutant, HW, numeric=True)
    (f,) = report.by_check("numeric")
    assert f.kind == "mismatch"
    assert f.message.startswith("tensor 'C': ")
    count = int(re.search(r"(\d+) of 4096 elements differ", f.message).group(1))
    assert count > 0
    shown = _elements(f.message.split("first: ")[1])
    assert 1 <= len(shown) <= 5
    # the named elements really are wrong: recompute the replay's output independently
    tg = taskgraph_from_dict(json.loads(p.source))
    inputs = make_inputs(tg, 0)
    want = reference(tg, inputs)["C"].astype(np.float64)
    for (i, j), got in zip(shown, re.findall(r"= (\S+) want", f.message), strict=True):
        assert abs(float(got) - want[i, j]) > 2e-2 * max(1.0, abs(want[i, j]))
    # and the store that wrote them is named; its region holds the first element
    (store,) = [ins for st in mutant.streams for ins in st.instrs if ins.id == f.ops[0]]
    (r0, r1), (c0, c1) = dict(store.attrs)["region"]
    assert r0 <= shown[0][0] < r1 and c0 <= shown[0][1] < c1
    # sync, memory and timing are untouched by this bug
    assert {x.check for x in report.findings} == {"numeric"}


def test_program_without_source_reports_numeric_not_applicable():
    p = attrs.evolve(matmul_program(m=32, n=32, k=32), source="")
    report = verify(p, HW, numeric=True)
    assert report.kinds() == {("input", "numeric_not_applicable")}
    assert report.stat["numeric"].startswith("not applicable")
    assert verify(p, HW).ok


def test_outputs_the_program_never_writes_are_reported():
    # a sync-only program claiming to compute a matmul: nothing is compared, which must fail
    p = attrs.evolve(pingpong_program(), source=matmul_program(m=32, n=32, k=32).source)
    report = verify(p, "double-buffer-demo", numeric=True)
    assert report.kinds() == {("numeric", "missing_output")}


def test_bad_source_is_an_input_finding():
    p = attrs.evolve(matmul_program(m=32, n=32, k=32), source='{"format": "nope"}')
    report = verify(p, HW, numeric=True)
    assert report.kinds() == {("input", "bad_source")}


def test_semantics_failure_is_a_finding_not_a_crash():
    p = matmul_program(m=32, n=32, k=32)
    # same bytes, wrong shape: the Cube's a @ b no longer lines up
    items = [attrs.evolve(it, shape=(16, 64)) if it.name == "c0_a0" else it for it in p.items]
    report = verify(attrs.evolve(p, items=items), HW, numeric=True)
    (f,) = [x for x in report.by_check("numeric") if x.kind == "error"]
    assert f.ops == ("c0_mvA0",)  # the move into the reshaped item fails first
    assert "failed in numeric replay: ValueError" in f.message


def _racy_matmul():
    """Drop MTE1's "data ready" waits and hide the race behind a slow first op on MTE1:
    nominally the moves still read loaded tiles, but a slower load or a faster MTE1 breaks it."""
    p = matmul_program(m=32, n=32, k=32)
    streams = []
    for st in p.streams:
        instrs = [i for i in st.instrs if not (i.kind == "wait_flag" and i.src == "MTE2")]
        if st.unit == "MTE2":
            instrs = [i for i in instrs if i.kind != "set_flag" or i.dst != "MTE1"]
        if st.unit == "MTE1":
            instrs = [Instr("op", 0, id="busy", duration=100), *instrs]  # loads take 82
        streams.append(Stream(st.core, st.unit, instrs))
    return retime(attrs.evolve(p, streams=streams), "seed-davinci")


def test_jitter_changes_the_data_of_a_racy_program():
    # what keeps "numbers once, on the nominal replay" honest (docs/verification.md, "Numbers
    # under jitter"): a program with a race does compute other numbers under other timings,
    # and the race check, which covers every timing, is what reports it
    racy = _racy_matmul()
    nominal = verify(racy, HW, numeric=True)
    assert nominal.stat["numeric"] == "ok"
    assert ("race", "RAW") in nominal.kinds()
    ix = ProgramIndex(racy, load_hardware(HW))
    rep = simulate(ix)
    tg = taskgraph_from_dict(json.loads(racy.source))
    inputs = make_inputs(tg, seed=0)
    gm, errors = numeric.run(ix, rep, inputs)
    assert not errors
    pending = jitter.start(ix, 10, 0, data=(inputs, gm), nominal=rep)
    try:
        found = jitter.collect(pending, ix, rep, frozenset())
    finally:
        pending.close()
    mism = [f for f in found if f.kind == "mismatch"]
    assert mism and "tensor 'C'" in mism[0].message


def test_verify_replays_the_numbers_once_and_the_race_check_covers_every_timing():
    racy = _racy_matmul()
    jittered = verify(racy, HW, numeric=True, jitter=10, seed=0)
    assert ("race", "RAW") in jittered.kinds()
    assert not [f for f in jittered.findings if f.kind == "mismatch"]
    assert jittered.stat["numeric"] == "ok"
    clean = verify(matmul_program(m=32, n=32, k=32), HW, numeric=True, jitter=3)
    assert clean.ok and clean.stat["numeric"] == "ok"


def _replay_both_ways(program):
    ix = ProgramIndex(program, load_hardware(HW))
    rep = simulate(ix)
    inputs = make_inputs(taskgraph_from_dict(json.loads(program.source)), seed=0)
    one, found_one = numeric.run(ix, rep, inputs)
    split, found_split = numeric.run(ix, rep, inputs, processes=1)
    return ix, one, found_one, split, found_split


def test_cores_sharing_no_data_replay_in_two_processes_with_the_same_numbers():
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=4)
    ix, one, found_one, split, found_split = _replay_both_ways(program)
    halves = numeric._halves(ix)
    assert halves is not None and halves[0] and halves[1]
    assert not found_one and not found_split
    assert one.keys() == split.keys()
    for name in one:
        assert one[name].tobytes() == split[name].tobytes(), name


def test_the_worker_part_takes_its_share_of_the_micro_ops():
    # four cores of equal work: an even split, or three to the worker at the default share
    ix = ProgramIndex(matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=4), load_hardware(HW))
    assert [len(h) for h in numeric._halves(ix, 0.5)] == [2, 2]
    assert [len(h) for h in numeric._halves(ix, numeric.WORKER_SHARE)] == [1, 3]


def test_a_part_replays_its_cores_events_in_the_whole_replays_order():
    ix = ProgramIndex(matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=4), load_hardware(HW))
    rep = simulate(ix)
    whole = numeric._events(ix, rep)
    core = ix.core_per_gid()
    assert whole and sorted(whole) == whole
    assert len(whole) == 2 * sum(1 for g in range(ix.n) if ix.op_shapes()[0][g] >= 0)
    for cores in ({0}, {1, 3}, {0, 1, 2, 3}):
        assert numeric._events(ix, rep, cores) == [e for e in whole if core[e[3]] in cores]


def test_inputs_no_op_writes_are_read_not_copied():
    program = matmul_program(m=64, n=64, k=64, cores=1)
    ix = ProgramIndex(program, load_hardware(HW))
    inputs = make_inputs(taskgraph_from_dict(json.loads(program.source)), seed=0)
    kept = {name: arr.copy() for name, arr in inputs.items()}
    gm, found = numeric.run(ix, simulate(ix), inputs)
    assert not found and set(inputs) <= set(gm)
    for name, arr in inputs.items():
        # the caller's array, seen read-only (a store into it would be an error finding)
        assert np.shares_memory(gm[name], arr) and not gm[name].flags.writeable, name
        assert arr.tobytes() == kept[name].tobytes(), name


def test_a_failing_half_replays_the_whole_program_in_one_piece():
    # a load of core 1 reads outside its tensor: the same finding with or without the split
    program = matmul_program(m=128, n=128, k=64, base=(32, 32, 32), cores=2)
    bad = first_load_of(program, 1, region=((0, 32), (5000, 5032)))
    _, one, found_one, split, found_split = _replay_both_ways(bad)
    assert found_one and [f.message for f in found_split] == [f.message for f in found_one]
    for name in one:
        assert np.array_equal(one[name], split[name], equal_nan=True), name


def test_cores_joined_by_gm_data_are_not_split():
    assert numeric._halves(ProgramIndex(matmul_program(cores=1), load_hardware(HW))) is None
    ix = ProgramIndex(matmul_program(m=64, n=64, k=64, cores=2), load_hardware(HW))
    assert numeric._halves(ix) is not None
    # the same program with a load of core 1 reading a region of C that core 0 writes
    program = matmul_program(m=64, n=64, k=64, cores=2)
    program = first_load_of(program, 1, tensor="C", region=((0, 32), (0, 32)))
    assert numeric._halves(ProgramIndex(program, load_hardware(HW))) is None


class _Given:
    """A stand-in for a Reference started by the caller: records whether verify used it."""

    def __init__(self, source: str, seed: int) -> None:
        self.source, self.seed = source, seed
        self.got = self.closed = 0

    def get(self):
        from staticsched.verify.reference import reference as compute

        self.got += 1
        return compute(self.source, self.seed)

    def close(self) -> None:
        self.closed += 1


def test_a_reference_started_by_the_caller_is_used_only_for_its_own_source_and_seed():
    p = matmul_program(m=32, n=48, k=64)
    plain = verify(p, HW, numeric=True, seed=3)
    assert plain.ok and plain.stat["numeric"] == "ok"

    def verdict(given: _Given) -> tuple:
        r = verify(p, HW, numeric=True, seed=3, reference=given)  # type: ignore[arg-type]
        return r.findings, r.stats

    same = _Given(p.source, 3)
    assert verdict(same) == (plain.findings, plain.stats)
    assert same.got == 1 and same.closed >= 1
    for other in (_Given(p.source, 4), _Given(p.source.replace("[32, 64]", "[16, 64]"), 3)):
        assert other.source != p.source or other.seed != 3
        assert verdict(other) == (plain.findings, plain.stats)
        assert other.got == 0 and other.closed >= 1


def test_the_reference_child_gives_the_values_computed_here_and_leaves_no_file():
    import os

    from staticsched.verify.reference import Reference
    from staticsched.verify.reference import reference as compute

    source = matmul_program(m=32, n=48, k=64).source
    child = Reference(source, 5, beside=True)
    path = child.path
    assert child.proc is not None and path is not None and os.path.exists(path)
    inputs, ref = child.get()  # type: ignore[misc]
    want_inputs, want_ref = compute(source, 5)  # type: ignore[misc]
    for got, want in ((inputs, want_inputs), (ref, want_ref)):
        assert got.keys() == want.keys()
        assert all(got[k].tobytes() == want[k].tobytes() for k in got)
    assert not os.path.exists(path)
    stopped = Reference(source, 5, beside=True)
    path = stopped.path
    stopped.close()
    stopped.close()
    assert path is not None and not os.path.exists(path)


def test_cores_joined_by_gm_data_replay_in_the_worker_with_the_same_numbers():
    # core 1 reads what core 0 writes: no split, so the worker replays both cores
    program = first_load_of(matmul_program(m=64, n=64, k=64, cores=2), 1, tensor="C",
                            region=((0, 32), (0, 32)))
    ix, one, found_one, split, found_split = _replay_both_ways(program)
    assert numeric.order(ix, simulate(ix), processes=1).halves == (set(), {0, 1})
    assert numeric.order(ix, simulate(ix)).halves is None
    assert [f.message for f in found_split] == [f.message for f in found_one]
    assert one.keys() == split.keys()
    for name in one:
        assert np.array_equal(one[name], split[name], equal_nan=True), name
