"""Split-K across cores (``tiling.split_k``): K chunks on several cores, fp32 partials in a GM
workspace, a reduction in chunk order on the Vector engine; on the coupled and the split
preset alike."""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import attrs
import pytest
from common import SEED, preset
from taskcases import graph, max_error

from staticsched.api import compile_graph
from staticsched.emit.summary import summary_lines
from staticsched.errors import StaticschedError
from staticsched.explore.bounds import solver_bound
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_from_dict
from staticsched.tasks.bounds import bound_of
from staticsched.tasks.matmul.splitk import chunks, pieces
from staticsched.tasks.matmul.workbound import MatmulBounds
from staticsched.tasks.space import candidates
from staticsched.verify import verify

_A2 = tomllib.loads((resources.files("staticsched") / "presets" / "ascend-a2.toml").read_text())


def _a2(clusters: int = 4):
    d = json.loads(json.dumps(_A2))
    d["clusters"] = clusters
    return hardware_from_dict(d, f"a2-{clusters}clusters")


A2 = _a2()


BIAS_GELU = ({"op": "bias", "tensor": "b"}, {"op": "gelu"})


def _mm(m, n, k, split, epilogue=BIAS_GELU, base=(32, 32, 64), batch=()):
    tensors = {"x": (*batch, m, k), "w": (k, n), "b": (n,), "y": (*batch, m, n)}
    tiling = {"base_m": base[0], "base_n": base[1], "base_k": base[2], "double_buffer": True}
    if split is not None:
        tiling["split_k"] = split
    return graph(tensors, {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                           "epilogue": list(epilogue), "tiling": tiling})


def test_chunks_are_contiguous_with_the_remainder_first_and_pieces_even():
    spans = [(i, i + 1) for i in range(14 + 13 + 13)]
    assert [len(c) for c in chunks(spans, 3)] == [14, 13, 13]
    assert [s for c in chunks(spans, 3) for s in c] == spans
    assert pieces(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert pieces(3, 8) == [(0, 1), (1, 2), (2, 3)]  # never an empty piece


@pytest.mark.parametrize("hw", [SEED, A2], ids=["seed-davinci", "a2-4clusters"])
@pytest.mark.parametrize("case", [
    (40, 48, 1000, 3, {}),  # uneven K chunks, uneven pieces, tail blocks
    (64, 32, 512, 4, {"batch": (2,)}),
    (16, 16, 640, 5, {"epilogue": ()}),
])
def test_split_k_lowering_computes_the_matmul_with_its_exact_op_count(hw, case):
    m, n, k, split, kw = case
    assert max_error(_mm(m, n, k, split, **kw), hw) < 2e-2


@pytest.mark.parametrize("hw", [SEED, A2], ids=["seed-davinci", "a2-4clusters"])
def test_split_k_programs_verify_clean_with_numbers_and_jitter(hw):
    compiled = compile_graph(taskgraph_from_dict(_mm(40, 48, 1000, 3)), hw, method="list")
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()
    ops = compiled.schedule.graph.ops
    # each chunk's partial on its own core, the reduction on the Vector engine of others
    chunk_cores = {op.core for op in ops if op.kind == "mmad" and ".b0." in op.id}
    assert len(chunk_cores) == 3
    reducers = {op.core for op in ops if op.kind == "vec" and ".b0.r" in op.id}
    assert reducers and all(hw.core_has_unit(c, hw.vector.unit) for c in reducers)
    # the adds read the partials in chunk order into the first one
    adds = [op for op in ops if op.id.startswith("mm.b0.r0.add")]
    assert [op.reads for op in adds] == [("mm.b0.r0.p0", "mm.b0.r0.p1"), ("mm.b0.r0.p0", "mm.b0.r0.p2")]


def test_the_summary_reports_the_workspace_and_the_reduction():
    compiled = compile_graph(taskgraph_from_dict(_mm(40, 48, 1000, 3)), SEED, method="list")
    text = "\n".join(summary_lines(compiled.schedule, compiled.plan))
    assert "workspace    : mm.partials 120x48 float32" in text
    assert "split-K      : reduction of mm.partials:" in text and "cycles after the last partial" in text


@pytest.mark.parametrize("split, needle", [
    (17, "tiling split_k = 17 exceeds the 16 K steps (K = 1000, base_k = 64)"),
    (0, "'split_k' = 0 is below the minimum 1"),
    (65, "'split_k' = 65 is above the maximum 64"),
])
def test_bad_split_k_is_one_line(split, needle):
    with pytest.raises(StaticschedError) as exc:
        lower(taskgraph_from_dict(_mm(40, 48, 1000, split)), SEED)
    assert any(needle in p for p in exc.value.problems), exc.value.problems


def test_split_k_with_steps_or_a_row_reduction_is_refused_in_one_line():
    d = _mm(64, 64, 1000, 2)
    d["tasks"][0]["tiling"]["step_m"] = 2
    with pytest.raises(StaticschedError) as exc:
        lower(taskgraph_from_dict(d), SEED)
    assert any("split-K chunks are single blocks" in p for p in exc.value.problems)
    d = _mm(64, 64, 1000, 2, epilogue=({"op": "softmax"},), base=(32, 64, 64))
    with pytest.raises(StaticschedError) as exc:
        lower(taskgraph_from_dict(d), SEED)
    assert any("a row reduction in the epilogue needs whole row panels" in p for p in exc.value.problems)


def test_split_k_round_trips_through_the_task_graph():
    tg = taskgraph_from_dict(_mm(40, 48, 1000, 3))
    again = taskgraph_from_dict(json.loads(dumps_taskgraph(tg)))
    assert again.tasks[0].tiling.split_k == 3
    assert '"split_k"' not in dumps_taskgraph(taskgraph_from_dict(_mm(40, 48, 1000, None)))


@pytest.mark.parametrize("hw", [SEED, A2], ids=["seed-davinci", "a2-4clusters"])
def test_tune_searches_split_k_only_where_blocks_leave_cube_cores_idle(hw):
    few = taskgraph_from_dict(_mm(32, 32, 2048, None)).tasks[0]  # 1 block of 32x32 and more
    found = candidates(few, hw)
    splits = {t.split_k for t in found}
    assert splits > {1} and max(splits) <= len(hw.engine_cores("cube"))
    assert {t.split_k for t in candidates(few, hw, split_k=False)} == {1}
    many = taskgraph_from_dict(_mm(512, 512, 64, None)).tasks[0]
    for t in candidates(many, hw):
        blocks = -(-512 // t.base_m) * -(-512 // t.base_n)
        assert t.split_k == 1 or blocks * t.split_k <= len(hw.engine_cores("cube"))


@pytest.mark.parametrize("hw", [SEED, A2], ids=["seed-davinci", "a2-4clusters"])
def test_the_cheap_bound_of_split_k_tilings_never_exceeds_the_solvers(hw):
    tg = taskgraph_from_dict(_mm(48, 40, 1500, None))
    task = tg.tasks[0]
    bounds = MatmulBounds(task, hw)
    split = [t for t in candidates(task, hw) if t.split_k > 1]
    assert split
    for tiling in split[:: max(1, len(split) // 12)]:
        og = lower(attrs.evolve(tg, tasks=(attrs.evolve(task, tiling=tiling),)), hw)
        cheap = bound_of([bounds.work(tiling)], hw.cores)
        exact, source = solver_bound(og, hw)
        assert 0 < cheap <= exact, (tiling, cheap, exact, source)


def test_the_cheap_bound_prices_an_nd_operands_load_at_the_derated_rate():
    # the lowering derates every ND operand's load on ascend-a2 (nd2nz, by its tile's shape and
    # its tensor's row stride); a cheap bound that did not sat far under every candidate there,
    # so tune lowered them all before scheduling one. B's 256 x 16 tiles of rows 64 apart
    # convert at about 1/10 of the rate (the chip's ND2NZ model), A's at the full rate
    tg = taskgraph_from_dict(_mm(64, 64, 8192, None, epilogue=(), base=(16, 16, 256)))
    task = tg.tasks[0]
    assert task.load_ratio(A2, "b", 256, 16) > 10 and task.load_ratio(A2, "a", 16, 256) == 1.0
    d = json.loads(json.dumps(_A2))
    d["clusters"] = 4
    d["cube"].pop("nd2nz")
    plain_hw = hardware_from_dict(d, "a2-no-derate")
    tiling = task.tiling
    derated = bound_of([MatmulBounds(task, A2).work(tiling)], A2.cores)
    plain = bound_of([MatmulBounds(task, plain_hw).work(tiling)], plain_hw.cores)
    exact, _ = solver_bound(lower(tg, A2), A2)
    assert plain * 3 < derated <= exact, (plain, derated, exact)


def test_split_k_beats_the_best_tiling_without_it_on_a_long_k():
    # a small decode-like shape: one 16x16 output block would stream all of K on one core
    tg = taskgraph_from_dict(_mm(16, 16, 8192, None, epilogue=(), base=(16, 16, 256)))
    plain = compile_graph(tg, SEED, method="list").schedule.makespan
    d = _mm(16, 16, 8192, 16, epilogue=(), base=(16, 16, 256))
    split = compile_graph(taskgraph_from_dict(d), SEED, method="list").schedule.makespan
    assert split * 2 < plain, (split, plain)


def test_a_dropped_cross_core_wait_before_a_partials_load_is_a_race():
    hw = preset("seed-davinci")
    program = compile_graph(taskgraph_from_dict(_mm(40, 48, 1000, 3)), hw, method="list").program
    for k, st in enumerate(program.streams):
        instrs = list(st.instrs)
        for j, ins in enumerate(instrs):
            if ins.is_sync or dict(ins.attrs).get("tensor") != "mm.partials" or ins.kind != "load":
                continue
            waits = [i for i in range(j - 1, -1, -1) if instrs[i].kind == "wait_cross"
                     and all(x.is_sync for x in instrs[i:j])]
            if waits:
                broken = instrs[:waits[0]] + instrs[waits[0] + 1:]
                streams = list(program.streams)
                streams[k] = attrs.evolve(st, instrs=broken)
                report = verify(attrs.evolve(program, streams=streams), hw, jitter=0)
                assert any(f.check == "race" and "mm.partials" in f.message for f in report.findings), \
                    report.text()
                return
    pytest.fail("no cross-core wait guards a load of the partials")
