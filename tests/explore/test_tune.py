"""Tuning: the enumerated tilings are exactly the legal ones, the cheap bound never exceeds the
solver's, pruning skips what cannot win, tune.csv is deterministic (whatever the number of
workers), bad input exits 2 with one line, the API returns the best, and the awkward GEMM
beats its hand tiling."""

from __future__ import annotations

import copy
import itertools
import json

import attrs
import pytest
from common import ROOT, SEED

import staticsched
from staticsched.cli import main
from staticsched.errors import InputError
from staticsched.explore.bounds import memory_bound, solver_bound
from staticsched.explore.tune_report import TUNE_FILES
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.tasks.bounds import bound_of
from staticsched.tasks.matmul import Tiling
from staticsched.tasks.matmul.workbound import MatmulBounds
from staticsched.tasks.space import candidates, count_candidates, legal, split_values

EX = ROOT / "examples"
HW = SEED


def _matmul(m: int, k: int, n: int, epilogue=(), *, transpose_b=False, batch=()) -> dict:
    tensors = {"x": {"shape": [*batch, m, k]}, "w": {"shape": [n, k] if transpose_b else [k, n]},
               "y": {"shape": [*batch, m, n]}, "b": {"shape": [n]}, "r": {"shape": [*batch, m, n]}}
    task = {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y", "transpose_b": transpose_b,
            "epilogue": list(epilogue)}
    return {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": [task]}


#: a small matmul with tails and a bias: 120 legal tilings, each a few hundred ops
SMALL = _matmul(64, 80, 48, [{"op": "bias", "tensor": "b"}, {"op": "relu"}])


def _in_dtype(graph: dict, dtype: str, out: str | None = None) -> dict:
    """``graph`` with every tensor of ``dtype``, the output of ``out``."""
    tensors = {name: dict(t, dtype=out if out and name == "y" else dtype)
               for name, t in graph["tensors"].items()}
    return dict(graph, tensors=tensors)


def _with(tg, tiling):
    return attrs.evolve(tg, tasks=[attrs.evolve(tg.tasks[0], tiling=tiling)])


def _no_seconds(text: str) -> list[str]:
    return [line.rsplit(",", 1)[0] for line in text.splitlines()]


def test_enumeration_is_exactly_the_legal_tilings():
    task = taskgraph_from_dict(_matmul(256, 256, 256)).tasks[0]
    sizes = range(16, 257, 16)
    steps = (1, 2, 4)
    every = [Tiling(m, n, k, double_buffer=db, step_m=sm, step_n=sn)
             for db, m, n, k, sm, sn in itertools.product((True, False), sizes, sizes, sizes, steps, steps)]
    ok = [t for t in every if legal(task, t, HW)]
    found = candidates(task, HW, steps=True, split_k=False)
    assert len(set(found)) == len(found)
    assert set(found) == set(ok)
    plain = {t for t in ok if (t.step_m, t.step_n) == (1, 1)}
    assert set(candidates(task, HW, split_k=False)) == plain  # steps only when asked
    # split-K: each tiling whose blocks leave cores idle, with every legal value split_values names
    with_split = candidates(task, HW, steps=True)
    assert len(set(with_split)) == len(with_split)
    splits = {t for t in every if (t.step_m, t.step_n) == (1, 1) and legal(task, t, HW)
              for t in (attrs.evolve(t, split_k=s) for s in split_values(task, HW, t)) if legal(task, t, HW)}
    assert splits and set(with_split) == set(ok) | splits
    assert count_candidates(task, HW, checks=10**6, steps=True) == (len(with_split), True)
    assert len(ok) < len(every)  # the L0 buffers refuse the large tiles
    big = Tiling(256, 256, 256, double_buffer=True)
    assert not legal(task, big, HW) and big not in found
    assert Tiling(128, 128, 64, double_buffer=True) in found
    # a count that runs out of checks says so
    n, exact = count_candidates(task, HW, checks=10, steps=True)
    assert not exact and n < len(ok)


@pytest.mark.parametrize(
    "graph",
    [
        SMALL,
        _matmul(100, 70, 90, [{"op": "add", "tensor": "r"}], transpose_b=True),
        _matmul(40, 48, 56, [{"op": "softmax"}], batch=(2,)),
        _in_dtype(SMALL, "float32"),
        _in_dtype(SMALL, "float32", "float16"),
    ],
    ids=["bias", "transposed-add", "batched-softmax", "fp32", "fp32-to-fp16"],
)
def test_cheap_bound_never_exceeds_the_solvers(graph):
    tg = taskgraph_from_dict(graph)
    task = tg.tasks[0]
    bounds = MatmulBounds(task, HW)
    found = candidates(task, HW)
    for tiling in found[:: max(1, len(found) // 25)]:
        og = lower(_with(tg, tiling), HW)
        cheap = bound_of([bounds.work(tiling)], HW.cores)
        exact, source = solver_bound(og, HW)
        assert 0 < cheap <= exact, (tiling, cheap, exact, source)


def test_memory_bound_holds_for_schedules():
    # single-buffered tiles over half of L0B: their lives cannot overlap on a core
    tg = taskgraph_from_dict(_matmul(128, 192, 256))
    tiling = Tiling(64, 128, 192, double_buffer=False)
    task = tg.tasks[0]
    assert legal(task, tiling, HW) and not legal(task, attrs.evolve(tiling, double_buffer=True), HW)
    og = lower(_with(tg, tiling), HW)
    value, where = memory_bound(og, HW)
    assert where.startswith("memory L0B") and value > 0
    res = staticsched.compile_graph(_with(tg, tiling), HW, method="list")
    assert value <= res.schedule.makespan


def test_pruning_skips_what_cannot_win():
    tuned = staticsched.tune(taskgraph_from_dict(SMALL), HW, method="list", max_candidates=8)
    best = tuned.best.schedule.makespan
    statuses = {r.status for r in tuned.rows}
    assert "pruned" in statuses and "best" in statuses
    scheduled = [r for r in tuned.rows if r.list_makespan is not None and r.same_as is None]
    assert len(scheduled) <= 8
    for r in tuned.rows:
        bound = r.bound if r.bound is not None else r.work_bound
        if r.status == "pruned":  # never scheduled
            assert bound >= best and r.makespan is None and r.list_makespan is None
        if r.status in ("best", "scheduled"):
            assert r.makespan >= bound
    assert any(r.status == "pruned" and r.work_bound > best for r in tuned.rows)
    # each bound (the solver's once lowered) is at least the cheap one
    assert all(r.bound >= r.work_bound for r in tuned.rows if r.bound is not None)
    # the baseline (the derived tiling) is scheduled first, and the best beats it here
    base = tuned.baseline_row
    assert base.index == next(r.index for r in tuned.rows if r.baseline) and base.makespan > best


def test_tune_csv_is_deterministic_and_the_same_for_two_workers():
    tg = taskgraph_from_dict(SMALL)
    one = staticsched.tune(tg, HW, method="list", max_candidates=6)
    again = staticsched.tune(tg, HW, method="list", max_candidates=6)
    two = staticsched.tune(tg, HW, method="list", max_candidates=6, jobs=2)
    text = one.csv_text()
    assert text.splitlines()[0].split(",")[-1] == "seconds"
    assert _no_seconds(text) == _no_seconds(again.csv_text()) == _no_seconds(two.csv_text())
    assert one.picture() == again.picture()
    assert len(text.splitlines()) == 1 + len(candidates(tg.tasks[0], HW))


def test_api_returns_the_best_and_cli_writes_its_files(tmp_path, capsys):
    src = tmp_path / "small.json"
    src.write_text(json.dumps(SMALL))
    tuned = staticsched.tune(src, "seed-davinci", method="list", max_candidates=6)
    done = [r for r in tuned.rows if r.makespan is not None]
    best = tuned.best_row
    assert tuned.best.schedule.makespan == best.makespan == min(r.makespan for r in done)
    assert tuned.graph.tasks[0].tiling == best.tiling
    out = tmp_path / "out"
    code = main(["tune", str(src), "--hw", "seed-davinci", "-o", str(out), "--method", "list",
                 "--max-candidates", "6", "--quiet"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert f"makespan     : {best.makespan} cycles" in stdout and "best tiling  : mm: " in stdout
    names = {p.name for p in out.iterdir()}
    assert set(TUNE_FILES) | {"timetable.json", "program.txt", "gantt.svg"} <= names
    assert _no_seconds((out / "tune.csv").read_text()) == _no_seconds(tuned.csv_text())
    assert (out / "tune.png").read_bytes()[:4] == b"\x89PNG"
    # the tuned graph schedules to the same makespan with `schedule`
    again = staticsched.schedule(out / "tuned.json", "seed-davinci", method="list")
    assert again.makespan == best.makespan
    # and a plain schedule run says how many candidates there are
    code = main(["schedule", str(src), "--hw", "seed-davinci", "-o", str(tmp_path / "s"), "--method",
                 "list", "--quiet", "--no-verify"])
    assert code == 0
    assert f"candidates   : legal tilings mm {len(tuned.rows)} " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--max-candidates", "0"], "--max-candidates must be >= 1, got 0"),
        (["--polish", "-1"], "--polish must be >= 0, got -1"),
        (["--jobs", "0"], "--jobs must be >= 1, got 0"),
        (["--hw", "no-such-hw"], "no-such-hw"),
        (["--opgraph"], "tune needs a TaskGraph, got an OpGraph"),
        (["--missing"], "nope.json"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, args, needle):
    src = tmp_path / "small.json"
    src.write_text(json.dumps(SMALL))
    if args == ["--opgraph"]:
        assert main(["lower", str(src), "--hw", "seed-davinci", "-o", str(tmp_path / "ops.json")]) == 0
        capsys.readouterr()
        src, args = tmp_path / "ops.json", []
    elif args == ["--missing"]:
        src, args = tmp_path / "nope.json", []
    argv = ["tune", str(src), "--hw", "seed-davinci", "-o", str(tmp_path / "out"), "--method", "list",
            "--quiet"]
    if args and args[0] == "--hw":
        argv[3] = args[1]
        args = []
    code = main([*argv, *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("staticsched: error: ") and needle in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_api_refuses_bad_options_all_at_once():
    with pytest.raises(InputError) as err:
        staticsched.tune(taskgraph_from_dict(SMALL), HW, method="nope", max_candidates=0, jobs=0)
    assert len(err.value.problems) == 3


def test_a_graph_without_a_tunable_task_is_scheduled_as_it_is():
    graph = copy.deepcopy(SMALL)
    graph["tasks"] = [{"id": "act", "type": "elementwise", "op": "relu", "inputs": ["r"], "out": "y"}]
    tuned = staticsched.tune(taskgraph_from_dict(graph), HW, method="list")
    assert tuned.rows == () and tuned.best.schedule.makespan > 0
    assert set(tuned.files()) == {"tuned.json"}


def test_tune_beats_the_hand_tiling_of_the_awkward_gemm():
    # 1000x333 . 333x777 + relu: the derived 128/128/128 tiling, and the hand tiling 128/208/64
    # (5759 cycles, optimal for that tiling), are beaten within a few list schedules
    tuned = staticsched.tune(EX / "awkward_gemm.json", HW, method="list", max_candidates=6)
    assert tuned.best.schedule.makespan <= 5759
    assert tuned.baseline_row.tiling == Tiling(128, 128, 128, double_buffer=True)
    assert len(tuned.rows) == 7453


def test_l1_reuse_steps_are_enumerated_when_asked():
    from staticsched.tasks.space import tiling_label

    tg = taskgraph_from_dict(SMALL)
    task = tg.tasks[0]
    found = candidates(task, HW, steps=True)
    steps = {(t.step_m, t.step_n) for t in found}
    assert {(1, 1), (2, 1), (2, 2), (4, 2)} <= steps  # 4x4 groups overflow L0C here
    assert all(legal(task, t, HW) for t in found)
    assert count_candidates(task, HW, steps=True) == (len(found), True)
    # 64 rows in 4 blocks of 16: steps 1, 2, 4; one block of 48 columns: step 1 only
    narrow = {(t.step_m, t.step_n) for t in found if (t.base_m, t.base_n) == (16, 48)}
    assert narrow == {(1, 1), (2, 1), (4, 1)}
    # the cheap bound stays below the solver's bound of the lowering (which does reuse)
    bounds = MatmulBounds(task, HW)
    for t in found[:: max(1, len(found) // 10)]:
        assert bound_of([bounds.work(t)], HW.cores) <= solver_bound(lower(_with(tg, t), HW), HW)[0]
    assert tiling_label(Tiling(64, 48, 80, step_m=2, step_n=1)) == "64/48/80 s2x1"
