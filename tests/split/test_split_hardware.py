"""Split-core hardware (Ascend A2/A3 class): core types, clusters and cross-core flag fields
read from TOML, every bad definition one line; ops and items checked against the core type
they sit on; a TaskGraph on a split chip refused in one line; a split-core OpGraph scheduled
and verified."""

from __future__ import annotations

import copy
import json
import tomllib
from importlib import resources

import attrs
import pytest

from staticsched import cli
from staticsched.api import compile_graph
from staticsched.errors import GraphError, HardwareError, TilingError
from staticsched.frontend.lowering import plan_tasks
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_from_dict, load_hardware
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.verify import verify

_A2_TEXT = (resources.files("staticsched") / "presets" / "ascend-a2.toml").read_text()


def _a2() -> dict:
    return tomllib.loads(_A2_TEXT)


def _a2_file(path, *edits: tuple[str, str]) -> str:
    """The ascend-a2 preset with text ``edits`` (old, new) written to ``path``."""
    text = _A2_TEXT
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return str(path)


def test_ascend_a2_is_24_clusters_of_one_aic_and_two_aivs():
    hw = load_hardware("ascend-a2")
    assert hw.split and hw.clusters == 24 and hw.cluster_size == 3 and hw.cores == 72
    assert [t.name for t in hw.core_types] == ["AIC", "AIV"]
    aic, aiv = hw.core_types
    assert aic.units == ("MTE2", "MTE1", "CUBE", "FIXPIPE") and aiv.units == ("MTE2", "VECTOR", "MTE3")
    assert aic.spaces == ("L1", "L0A", "L0B", "L0C") and aiv.spaces == ("UB",)
    # cluster c is cores 3c (AIC), 3c+1, 3c+2 (AIVs)
    assert hw.cores_of_type("AIC") == tuple(range(0, 72, 3))
    assert len(hw.cores_of_type("AIV")) == 48 and hw.cluster_of(71) == 23
    assert not hw.core_has_unit(1, "CUBE") and hw.core_has_unit(0, "CUBE")
    assert hw.core_has_space(1, "UB") and not hw.core_has_space(0, "UB") and hw.core_has_space(0, "GM")
    # the published A2 numbers (graphs-and-split-cores.md §2.1)
    assert [hw.space(s).capacity for s in ("L1", "L0A", "L0B", "L0C", "UB")] == [
        512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024, 192 * 1024]
    assert hw.path("L1", "L0A").bytes_per_cycle == 256 and hw.path("L1", "L0B").bytes_per_cycle == 128
    assert not hw.has_path("L0C", "UB") and not hw.has_path("UB", "L1")  # no on-chip path AIC <-> AIV
    assert dict(hw.cube.macs_per_cycle) == {"bfloat16": 4096, "float16": 4096, "float32": 1024}
    s = hw.sync
    assert (s.cross_core_capacity, s.cross_core_modes, s.cross_core_wait_stalls_core) == (15, (0, 1, 2), True)
    assert s.cross_core_ids_per_core == 8


def test_the_coupled_preset_has_no_core_types():
    hw = load_hardware("seed-davinci")
    assert not hw.split and hw.cluster_size == 1 and hw.core_type(0) is None
    assert hw.core_has_unit(3, "CUBE") and hw.core_has_space(3, "UB")


def _bad(mutate) -> list[str]:
    d = copy.deepcopy(_a2())
    mutate(d)
    with pytest.raises(HardwareError) as exc:
        hardware_from_dict(d, "a2.toml")
    return exc.value.problems


def _path(unit, src, dst):
    return {"unit": unit, "src": src, "dst": dst, "bytes_per_cycle": 64}


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(clusters=0),
         "a2.toml: clusters = 0: a chip with core types needs at least one cluster"),
        (lambda d: d.update(cores=16), "cores = 16 disagrees with clusters = 24 of 3 cores each"),
        # FixPipe sits on the AIC, UB on the AIV: the 2201 chip has no L0C -> UB path
        (lambda d: d["paths"].append(_path("FIXPIPE", "L0C", "UB")),
         "paths[11] FIXPIPE L0C->UB: no core type has the unit and its on-chip spaces (unit FIXPIPE "
         "on AIC; space L0C on AIC; space UB on AIV): the chip has no path between core types"),
        (lambda d: d["paths"].append(_path("MTE3", "UB", "L1")), "paths[11] MTE3 UB->L1: no core type"),
        (lambda d: d["core_types"]["AIV"]["units"].append("CUBX"), "core_types.AIV: unknown unit 'CUBX'"),
        (lambda d: d["core_types"]["AIV"]["spaces"].append("GM"),
         "core_types.AIV: space 'GM' is global (unbounded): every core type reaches it"),
        (lambda d: d["core_types"]["AIV"]["spaces"].append("L9"), "core_types.AIV: unknown space 'L9'"),
        (lambda d: d["core_types"]["AIV"].update(per_cluster=0), "core_types.AIV: 'per_cluster' = 0"),
        (lambda d: d["core_types"]["AIV"].update(colour=1), "core_types.AIV: unknown key 'colour'"),
        (lambda d: d["core_types"]["AIC"]["units"].remove("MTE1"), "unit 'MTE1' is on no core type"),
        (lambda d: d["core_types"]["AIV"]["spaces"].remove("UB"), "on-chip space 'UB' is on no core type"),
        (lambda d: d["sync"].update(cross_core_modes=[2, 4]),
         "'cross_core_modes' = [2, 4] must list distinct modes"),
        (lambda d: d["sync"].update(cross_core_ids_per_core=-1), "'cross_core_ids_per_core' = -1"),
        (lambda d: d["sync"].update(cross_core_wait_stalls_core="yes"),
         "'cross_core_wait_stalls_core' must be"),
        (lambda d: d["sync"].update(gm_flag_latency=-5), "'gm_flag_latency' = -5"),
        (lambda d: d["core_types"]["AIC"].update(per_cluster=2),
         "cross_core_modes has 2, which joins a cluster's one core of a type to the others: exactly "
         "one core type needs per_cluster = 1 (the AIC), found 0"),
        (lambda d: (d.pop("clusters"), d.pop("core_types")),
         "'cross_core_modes', 'cross_core_ids_per_core' and 'cross_core_wait_stalls_core' "
         "describe split-core chips"),
    ],
)
def test_bad_split_definitions_are_one_line_each(mutate, needle):
    problems = _bad(mutate)
    hits = [p for p in problems if needle in p]
    assert len(hits) == 1, problems


def test_a_bad_split_hardware_file_exits_2_in_one_line(tmp_path, capsys):
    hw = _a2_file(tmp_path / "a2.toml", ("clusters = 24", "clusters = 0"))
    out = tmp_path / "out"
    code = cli.main(["schedule", "examples/split_pipeline_opgraph.json", "--hw", hw, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "clusters = 0: a chip with core types needs at least one cluster" in err
    assert "Traceback" not in err


def test_ops_and_items_must_sit_on_a_core_type_that_has_them():
    hw = load_hardware("ascend-a2")
    graph = OpGraph(
        [Item("u", "UB", 64), Item("c", "L0C", 64)],
        [Op("mm", "CUBE", 10, core=1, writes=["c"]),     # core 1 is an AIV
         Op("v", "VECTOR", 10, core=0, writes=["u"])],   # core 0 is an AIC
    )
    with pytest.raises(GraphError) as exc:
        graph.check(hw)
    lines = exc.value.problems
    assert "op 'mm': core 1 is an AIV, which has no unit 'CUBE' (AIV: MTE2, VECTOR, MTE3)" in lines
    assert "op 'v': core 0 is an AIC, which has no unit 'VECTOR' (AIC: MTE2, MTE1, CUBE, FIXPIPE)" in lines
    assert "item 'c' in space 'L0C' is accessed from core 1, an AIV, which has no L0C (AIV: UB)" in lines
    assert ("item 'u' in space 'UB' is accessed from core 0, an AIC, which has no UB "
            "(AIC: L1, L0A, L0B, L0C)") in lines


def _reduce_graph(m: int, epilogue) -> dict:
    graph = _matmul_graph(m, 192, 64, epilogue)
    graph["tensors"].update({t: {"shape": [192], "dtype": "float16"} for t in ("g", "be")})
    return graph


_REDUCTIONS = [
    [{"op": "bias", "tensor": "b"}, {"op": "softmax"}],
    [{"op": "bias", "tensor": "b"}, {"op": "layernorm", "gamma": "g", "beta": "be"}, {"op": "gelu"}],
    [{"op": "rmsnorm", "gamma": "g"}, {"op": "scale", "value": 0.5}],
]


@pytest.mark.parametrize("m", [1, 3, 100])
@pytest.mark.parametrize("epilogue", _REDUCTIONS, ids=["softmax", "layernorm", "rmsnorm"])
def test_a_row_reduction_in_a_split_epilogue_computes_the_reference_with_its_exact_op_count(m, epilogue):
    # each AIV keeps its half of a row panel (3 blocks of 64 columns) in its UB and reduces its
    # rows alone; a one-row panel's second AIV only loads its token. max_error checks the op
    # count against the estimate and the numbers of a sequential replay
    from taskcases import max_error

    hw = load_hardware("ascend-a2")
    assert max_error(_reduce_graph(m, epilogue), hw) < 2e-2


def test_a_row_reduction_in_a_split_epilogue_verifies_clean_with_numbers_and_jitter():
    from staticsched.api import compile_graph

    tg = taskgraph_from_dict(_reduce_graph(100, _REDUCTIONS[1]))
    compiled = compile_graph(tg, "ascend-a2", method="list")
    assert verify(compiled.program, "ascend-a2", jitter=3, numeric=True).ok
    ops = compiled.graph.ops
    # two panels (64 and 36 rows), each reduced by both AIVs of its AIC's cluster
    reducers = sorted({(op.id.split(".")[1], op.id.split(".")[2], op.core) for op in ops
                       if op.id.startswith("mm.r")})
    assert [(r, v) for r, v, _ in reducers] == [("r0", "v1"), ("r0", "v2"), ("r1", "v1"), ("r1", "v2")]
    aiv = {c for _, _, c in reducers}
    assert all(compiled.schedule.hw.core_type(c).name == "AIV" for c in aiv)


def test_each_aiv_s_ub_is_checked_for_its_half_of_the_rows():
    # a 64-row softmax panel of 1024 fp16 columns, double-buffered: 256 KiB, over a UB of
    # 192 KiB; each AIV holds 32 of the rows (tasks/matmul/split.py), 128 KiB. Refused on a
    # chip whose Vector core holds the whole panel, accepted, scheduled and verified on ascend-a2
    from staticsched.tasks.matmul.tiling import matmul_requirements

    graph = _matmul_graph(64, 1024, 64, [{"op": "softmax"}])
    graph["tasks"][0]["tiling"]["base_n"] = 128
    tg = taskgraph_from_dict(graph)
    a2 = load_hardware("ascend-a2")
    def vector(hw):
        return next(r for r in matmul_requirements(tg.tasks[0], 64, 128, 64, 2, hw) if r.role == "vector")

    assert vector(a2).formula.startswith("(ceil(base_m/2)*N")
    assert vector(a2).bytes <= 192 * 1024 < vector(None).bytes  # None: a core holding every row
    compiled = compile_graph(tg, a2, method="list")
    assert verify(compiled.program, a2, jitter=2, numeric=True).ok


def test_a_split_core_opgraph_schedules_and_verifies_on_ascend_a2(tmp_path, capsys):
    # the canonical AIC -> GM -> both AIVs pipeline of one tile, written as micro-ops: the
    # solver, the sync planner and the verifier take the split chip's cores as they are
    out = tmp_path / "out"
    code = cli.main(["schedule", "examples/split_pipeline_opgraph.json", "--hw", "ascend-a2",
                     "-o", str(out), "--jitter", "3"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "verification : clean" in text
    assert "c1.CUBE" not in text and "c1.VECTOR" in text  # an AIV lists only its own pipes
    program = json.loads((out / "program.json").read_text())
    cores = {(st["core"], st["unit"]) for st in program["streams"] if st["instrs"]}
    assert (0, "FIXPIPE") in cores and (1, "VECTOR") in cores and (2, "MTE3") in cores
    kinds = [i["kind"] for st in program["streams"] for i in st["instrs"]]
    assert "set_cross" in kinds and "wait_cross" in kinds
    # the pictures: AIC and AIV lanes, only the pipes each has, and cross-core flows
    gantt = (out / "gantt.svg").read_text()
    assert "c0 AIC.CUBE" in gantt and "c1 AIV.VECTOR" in gantt and "c1 AIV.CUBE" not in gantt
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names[0] == "core 0 AIC (cluster 0)" and names[2] == "core 2 AIV (cluster 0)"
    threads = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
    assert (1, "VECTOR") in threads and (1, "CUBE") not in threads
    starts = {e["id"]: e["pid"] for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e["pid"] for e in events if e.get("ph") == "f"}
    assert any(starts[i] != ends[i] for i in starts)  # a flow from one core to another


# --------------------------------------------------------------------------- matmul on split cores


def _small_a2(tmp_path, clusters: int = 2):
    return load_hardware(_a2_file(tmp_path / "a2small.toml", ("clusters = 24", f"clusters = {clusters}")))


def _matmul_graph(m: int, n: int, k: int, epilogue=()) -> dict:
    fp16 = "float16"
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"x": {"shape": [m, k], "dtype": fp16}, "w": {"shape": [k, n], "dtype": fp16},
                        "b": {"shape": [n], "dtype": fp16}, "y": {"shape": [m, n], "dtype": fp16}},
            "tasks": [{"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "y",
                       "epilogue": list(epilogue),
                       "tiling": {"base_m": 64, "base_n": 64, "base_k": 64, "double_buffer": True}}]}


@pytest.mark.parametrize("example", ["matmul_bias_gelu", "chain"])
def test_the_same_task_graph_schedules_and_verifies_on_both_presets(example):
    from staticsched.api import compile_graph
    from staticsched.verify import verify

    for preset in ("seed-davinci", "ascend-a2"):
        compiled = compile_graph(f"examples/{example}.json", preset, method="list")
        report = verify(compiled.program, preset, jitter=2, numeric=True)
        assert report.ok, report.text()
        assert dict(report.stats)["numeric"] == "ok"
    hw = load_hardware("ascend-a2")
    units = {(op.core, op.unit) for op in compiled.graph.ops}
    # Cube work on AICs only, Vector work on AIVs only, the block through the workspace
    assert all(hw.core_has_unit(c, u) for c, u in units)
    assert {u for _, u in units} >= {"CUBE", "FIXPIPE", "VECTOR", "MTE3"}
    assert any(t.workspace for t in compiled.graph.tensors)


def test_the_workspace_ring_reuses_slots_and_each_aiv_takes_half_the_rows(tmp_path):
    from staticsched.api import compile_graph
    from staticsched.frontend.taskgraph import taskgraph_from_dict
    from staticsched.verify import verify

    hw = _small_a2(tmp_path)  # 2 AICs: 6 blocks are 3 per AIC, so slot 0 is used twice
    tg = taskgraph_from_dict(_matmul_graph(192, 128, 64, [{"op": "relu"}]))
    compiled = compile_graph(tg, hw, method="list")
    ops = compiled.graph.ops
    stores = [op for op in ops if op.kind == "store" and op.attr["tensor"] == "mm.ws"]
    assert len(stores) == 6 and {op.unit for op in stores} == {"FIXPIPE"}
    regions = [op.attr["region"][0] for op in stores]
    assert len(set(regions)) == 4  # 2 stages x 2 AICs: two blocks came back to a slot
    reused = [op for op in stores if op.deps]
    assert len(reused) == 2 and all(len(op.deps) == 2 for op in reused)  # both halves' loads
    halves_loaded = [op for op in ops if op.kind == "load" and op.attr["tensor"] == "mm.ws"]
    assert sorted({hw.core_type(op.core).name for op in halves_loaded}) == ["AIV"]
    assert {r1 - r0 for op in halves_loaded for (r0, r1), _ in [op.attr["region"]]} == {32}
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()


def test_a_dropped_consumed_wait_is_a_workspace_race(tmp_path):
    # the AIC's FixPipe may overwrite a slot only after both AIVs loaded it: without the wait
    # that orders it, the verifier must see the race on the workspace
    import attrs

    from staticsched.api import compile_graph
    from staticsched.frontend.taskgraph import taskgraph_from_dict
    from staticsched.verify import verify

    hw = _small_a2(tmp_path)
    compiled = compile_graph(taskgraph_from_dict(_matmul_graph(192, 128, 64)), hw, method="list")
    program = compiled.program
    streams = list(program.streams)
    k = next(i for i, st in enumerate(streams) if (st.core, st.unit) == (0, "FIXPIPE"))
    kept = [ins for ins in streams[k].instrs if ins.kind != "wait_cross"]
    assert len(kept) < len(streams[k].instrs)
    streams[k] = attrs.evolve(streams[k], instrs=kept)
    report = verify(attrs.evolve(program, streams=streams), hw, jitter=0)
    races = [f for f in report.findings if f.check == "race"]
    assert races and any("mm.ws" in f.message for f in races), report.text()


@pytest.mark.parametrize("stages", [1, 3])
def test_workspace_stages_set_the_ring_and_round_trip(tmp_path, stages):
    from staticsched.api import compile_graph
    from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict
    from staticsched.verify import verify

    hw = _small_a2(tmp_path)
    graph = _matmul_graph(192, 128, 64)
    graph["tasks"][0]["tiling"]["workspace_stages"] = stages
    tg = taskgraph_from_dict(graph)
    assert taskgraph_from_dict(json.loads(dumps_taskgraph(tg))) == tg
    compiled = compile_graph(tg, hw, method="list")
    ws = next(t for t in compiled.graph.tensors if t.workspace)
    assert ws.shape == (stages * 2 * 64, 64)  # stages x 2 AICs x base_m rows
    stores = [op for op in compiled.graph.ops if op.kind == "store" and op.attr["tensor"] == "mm.ws"]
    assert len({op.attr["region"][0] for op in stores}) == min(6, 2 * stages)
    assert verify(compiled.program, hw, jitter=2, numeric=True).ok


def test_workspace_stages_out_of_range_is_one_line():
    from staticsched.errors import InputError
    from staticsched.frontend.taskgraph import taskgraph_from_dict

    graph = _matmul_graph(64, 64, 64)
    graph["tasks"][0]["tiling"]["workspace_stages"] = 0
    with pytest.raises(InputError) as exc:
        taskgraph_from_dict(graph)
    assert any("'workspace_stages' = 0 is below the minimum 1" in p for p in exc.value.problems)


def test_the_summary_profiles_each_core_type_and_the_workspace():
    from staticsched.api import compile_graph
    from staticsched.emit.split_summary import flag_peaks
    from staticsched.emit.summary import summary_lines

    compiled = compile_graph("examples/matmul_bias_gelu.json", "ascend-a2", method="list")
    lines = summary_lines(compiled.schedule, compiled.plan)
    aic = next(ln for ln in lines if ln.startswith("  AIC  x24"))
    aiv = next(ln for ln in lines if ln.startswith("  AIV  x48"))
    assert "cube" in aic and "vector" not in aic and "vector" in aiv and "cube" not in aiv
    assert "idle" in aic and "idle" in aiv
    # a lower bound per core type: its busiest core's busiest pipe, at the cost model's rates
    bound = int(aic.split("bound ")[1].split()[0])
    cube = max(sum(op.duration for op in compiled.graph.ops if (op.core, op.unit) == (c, u))
               for c in range(0, 72, 3) for u in ("MTE2", "MTE1", "CUBE", "FIXPIPE"))
    assert bound == cube <= compiled.schedule.makespan
    assert any(ln.startswith("workspace    : mm.ws 6144x128 float16, 1.50 MiB") for ln in lines)
    peaks = flag_peaks(compiled.schedule, compiled.plan)
    cross = [f for f in compiled.plan.flags if f.kind == "cross"]
    assert sum(n for n, _ in peaks.values()) == len(cross) > 0
    assert all(1 <= p <= n for n, p in peaks.values())
    assert any(ln.startswith(f"cross-core   : {len(cross)} flags") for ln in lines)


def _refused_matmul(tmp_path, capsys, hw_file: str) -> str:
    """stderr of scheduling matmul_bias_gelu on ``hw_file``, which must refuse it (exit 2,
    nothing written, no traceback)."""
    out = tmp_path / "out"
    code = cli.main(["schedule", "examples/matmul_bias_gelu.json", "--hw", hw_file, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and "Traceback" not in err
    return err


def test_no_cross_core_ids_is_refused_with_the_reason_and_one_id_suffices(tmp_path, capsys):
    none = _a2_file(tmp_path / "none.toml", ("cross_core_event_ids = 16 ", "cross_core_event_ids = 0 "))
    err = _refused_matmul(tmp_path, capsys, none)
    out = tmp_path / "out"
    assert ("edge 'mm.b0.fixpipe' -> 'mm.b0.v1.load' crosses from core 0 to core 1, but "
            "sync.cross_core_event_ids = 0 leaves no cross-core flag to carry it") in err
    one = _a2_file(tmp_path / "one.toml", ("cross_core_event_ids = 16 ", "cross_core_event_ids = 1 "),
                   ("cross_core_capacity = 15 ", "cross_core_capacity = 1 "))
    code = cli.main(["schedule", "examples/chain.json", "--hw", one, "-o", str(out)])
    assert code == 0 and "verification : clean" in capsys.readouterr().out


_STALL_PROGRAM = """format staticsched.program 1
hw ascend-a2
mode flags
makespan {makespan}
item u core=1 space=UB offset=0 bytes=64 live=0:200 dtype="" shape=-
stream 0 FIXPIPE 2
  {aic_wait} WAIT_CROSS 1 0 mode=gm
  {aic_set} SET_CROSS 1 0 mode=gm
stream 1 MTE2 1
  {aiv_wait} WAIT_CROSS 0 0 mode=gm
stream 1 MTE3 2
  {op} OP st 200 -> u
  {aiv_set} SET_CROSS 0 0 mode=gm
end
"""


def _stall_program(**cycles):
    from staticsched.formats.program_text import parse_program_text

    return parse_program_text(_STALL_PROGRAM.format(**cycles))


def test_a_whole_core_wait_holds_back_the_core_s_later_instructions(tmp_path):
    # AIV core 1 waits (MTE2) for the AIC, whose wait needs core 1's MTE3 set first. Per pipe
    # that runs; on A2 a cross-core wait stalls every pipe of its core, so when the program's
    # cycles put the wait first, core 1's MTE3 never issues: a deadlock through the stall
    from staticsched.verify import verify

    # the cycles of the nominal run (GM-word flags, latency 400 and a 200-cycle polling load;
    # a mode-2 flag would reach both AIVs): the AIV's wait placed in its core's order where it
    # passes, after the MTE3 op and set have issued
    ok = _stall_program(op=0, aiv_set=200, aic_wait=800, aic_set=800, aiv_wait=1400, makespan=1400)
    assert verify(ok, "ascend-a2").ok
    # the wait placed first: at cycle 0 it holds back the MTE3 op of cycle 1 (an instruction
    # of its own cycle comes before it in the core's order)
    hung = _stall_program(op=1, aiv_set=201, aic_wait=801, aic_set=801, aiv_wait=0, makespan=1400)
    report = verify(hung, "ascend-a2")
    dead = [f for f in report.findings if f.check == "deadlock"]
    assert dead and "held by the whole-core wait" in dead[0].message, report.text()
    per_pipe = _a2_file(tmp_path / "a2_per_pipe.toml",
                        ("cross_core_wait_stalls_core = true", "cross_core_wait_stalls_core = false"))
    # a per-pipe wait (as on the 950) holds back its own pipe only: no deadlock, only a late
    # wait (its cycle is not where the program put it)
    assert not [f for f in verify(hung, per_pipe).findings if f.check == "deadlock"]


def _attention_graph(lead, sq, sk, d, dv, causal, tiling=None) -> dict:
    task = {"id": "att", "type": "attention", "q": "q", "k": "k", "v": "v", "out": "o", "causal": causal}
    if tiling:
        task["tiling"] = {"block_q": tiling[0], "block_kv": tiling[1]}
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"q": {"shape": [*lead, sq, d]}, "k": {"shape": [*lead, sk, d]},
                        "v": {"shape": [*lead, sk, dv]}, "o": {"shape": [*lead, sq, dv]}},
            "tasks": [task]}


@pytest.mark.parametrize("case", [
    ((2,), 80, 80, 64, 40, True, (32, 32)),  # causal: masked diagonal blocks in both halves
    ((), 37, 70, 16, 16, False, (32, 64)),  # tails: the last Q block's second half is empty
    ((2, 2), 16, 48, 24, 64, False, None),  # derived tiling
])
def test_attention_on_split_cores_computes_the_reference_with_its_exact_op_count(tmp_path, case):
    from taskcases import max_error

    assert max_error(_attention_graph(*case), _small_a2(tmp_path)) < 2e-2


def test_attention_on_split_cores_runs_s_and_p_through_rings_and_verifies(tmp_path):
    hw = _small_a2(tmp_path)
    graph = taskgraph_from_dict(_attention_graph((2,), 80, 80, 64, 40, True, (32, 32)))
    compiled = compile_graph(graph, hw, method="list")
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()
    ops = compiled.graph.ops
    for name, writer_type, reader_type in (("att.ws_s", "AIC", "AIV"), ("att.ws_p", "AIV", "AIC"),
                                           ("att.ws_o", "AIC", "AIV")):
        touching = [op for op in ops if op.kind in ("load", "store") and op.attr["tensor"] == name]
        writers = {hw.core_type(op.core).name for op in touching if op.kind == "store"}
        readers = {hw.core_type(op.core).name for op in touching if op.kind == "load"}
        assert (writers, readers) == ({writer_type}, {reader_type}), name
    assert all(hw.core_type(op.core).name == "AIV" for op in ops if op.kind == "vec")
    # dropping a cross-core wait before the AIC's load of P is a race on the P ring
    program = compiled.program
    for k, st in enumerate(program.streams):
        instrs = list(st.instrs)
        for j in [j for j, ins in enumerate(instrs)
                  if ins.kind == "load" and dict(ins.attrs).get("tensor") == "att.ws_p"]:
            i = j - 1
            while i >= 0 and instrs[i].is_sync and instrs[i].kind != "wait_cross":
                i -= 1
            if i >= 0 and instrs[i].kind == "wait_cross":
                streams = list(program.streams)
                streams[k] = attrs.evolve(st, instrs=instrs[:i] + instrs[i + 1:])
                bad = verify(attrs.evolve(program, streams=streams), hw, jitter=0)
                assert any(f.check == "race" and "att.ws_p" in f.message for f in bad.findings), bad.text()
                return
    pytest.fail("no cross-core wait guards a load of P")


def test_split_attention_keeps_qk_lead_pairs_of_s_in_flight_and_verifies(tmp_path):
    from staticsched.tasks.attention.split import PV_LAG, QK_LEAD

    # one cluster: every Q block on one AIC, so its pairs chain across Q blocks (15 pairs)
    hw = _small_a2(tmp_path, clusters=1)
    graph = taskgraph_from_dict(_attention_graph((), 160, 160, 32, 32, True, (32, 32)))
    compiled = compile_graph(graph, hw, method="list")
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()
    ops = compiled.graph.ops
    order = {op.id: k for k, op in enumerate(ops)}
    aic = [op for op in ops if op.kind == "mmad"]
    qks = [op.id for op in aic if op.id.endswith(".qk")]
    pvs = [op.id for op in aic if op.id.endswith(".pv")]
    assert len(qks) == len(pvs) == 15
    # program order: S of pair t + QK_LEAD before P V of pair t; the AIVs' load of S of pair
    # t + 1 before P of pair t is cast, and the update by P V of pair t after the softmax of
    # pair t + PV_LAG
    for t in range(len(pvs) - QK_LEAD):
        assert order[qks[t + QK_LEAD]] < order[pvs[t]]
    for core in sorted({op.core for op in ops if op.id.endswith(".load_s")}):
        mine = [op.id for op in ops if op.core == core]
        loads = [i for i in mine if i.endswith(".load_s")]
        casts = [i for i in mine if i.endswith(".cast")]
        updates = [i for i in mine if i.endswith(".load_o")]
        rowmaxes = [i for i in mine if i.endswith(".rowmax")]
        assert len(loads) == len(casts) == len(updates) == 15
        for t in range(14):
            assert order[loads[t + 1]] < order[casts[t]]
        for t in range(15 - PV_LAG):
            assert order[rowmaxes[t + PV_LAG]] < order[updates[t]]
    tensors = {t.name: t.shape for t in compiled.graph.tensors}
    rows = 32  # block_q, a multiple of the fractal's 16 rows
    assert tensors["att.ws_s"][0] == QK_LEAD * rows
    assert tensors["att.ws_o"][0] == (PV_LAG + 1) * rows


def test_a_counter_of_capacity_0_refuses_only_graphs_that_need_a_cross_core_flag(tmp_path, capsys):
    # capacity 0: no cross-core flag can be set, so the solver's explanation names the first
    # edge that needs one; a graph whose dependencies all stay on one core still schedules
    zero = _a2_file(tmp_path / "zero.toml", ("cross_core_capacity = 15 ", "cross_core_capacity = 0 "))
    err = _refused_matmul(tmp_path, capsys, zero)
    out = tmp_path / "out"
    assert ("edge 'mm.b0.fixpipe' -> 'mm.b0.v1.load' crosses from core 0 to core 1, but "
            "sync.cross_core_capacity = 0 (a counter that holds no set) leaves no cross-core flag "
            "to carry it") in err
    graph = tmp_path / "add.json"
    graph.write_text(json.dumps({
        "format": "staticsched.taskgraph", "version": 1,
        "tensors": {n: {"shape": [64, 256], "dtype": "float16"} for n in ("x", "y", "z")},
        "tasks": [{"id": "add", "type": "elementwise", "op": "add", "inputs": ["x", "y"], "out": "z"}],
    }))
    code = cli.main(["schedule", str(graph), "--hw", zero, "-o", str(out)])
    assert code == 0 and "verification : clean" in capsys.readouterr().out


def test_split_attention_tiling_counts_what_the_split_lowering_holds():
    from staticsched.tasks.attention.tiling import requirements

    # GPT-2-small's attention (12 heads, 1,024 tokens, d 64, causal): on ascend-a2 each AIV
    # holds half a Q block's rows and the AIC's accumulator is drained to GM, so 128 x 128
    # blocks fit (half the K/V re-reads of 64 x 128); the coupled formula refuses them
    a2, seed = load_hardware("ascend-a2"), load_hardware("seed-davinci")
    tg = taskgraph_from_dict(_attention_graph((12,), 1024, 1024, 64, 64, True))
    (plan,) = plan_tasks(tg, a2)
    assert (plan.tiling.block_q, plan.tiling.block_kv) == (128, 128)
    (coupled,) = plan_tasks(tg, seed)
    assert (coupled.tiling.block_q, coupled.tiling.block_kv) == (64, 128)
    need = {role: (text, n) for role, text, n in requirements(plan.task, 128, 128, a2)}
    assert need["cube_a"] == ("Q 128x64*2 B*2 buffers + P 128x128*2 B", 65536)
    assert need["accumulator"] == ("(S 128x128 + PV 128x64)*4 B", 98304)
    assert need["vector"][0].startswith("(S 64x128*4 B + P 64x128*2 B + PV 64x64*4 B)*2 buffers")
    # a 128 x 128 block with d 128 still misfits L0A on the split chip: the check says so
    wide = taskgraph_from_dict(_attention_graph((2,), 256, 256, 128, 128, True, (128, 128)))
    with pytest.raises(TilingError, match=r"block_q 128, block_kv 128: Q 128x128\*2 B\*2 buffers "
                                          r"\+ P 128x128\*2 B = 98304 B > L0A 65536 B"):
        plan_tasks(wide, a2)


def test_split_attention_with_128_row_q_blocks_verifies_with_numbers(tmp_path):
    from taskcases import max_error

    hw = _small_a2(tmp_path)
    d = _attention_graph((3,), 300, 300, 64, 64, True)  # a tail Q block of 44 rows
    graph = taskgraph_from_dict(d)
    (plan,) = plan_tasks(graph, hw)
    assert (plan.tiling.block_q, plan.tiling.block_kv) == (128, 128)
    compiled = compile_graph(graph, hw, method="list")
    report = verify(compiled.program, hw, jitter=3, numeric=True)
    assert report.ok, report.text()
    # each AIV holds half a block's rows of S (64 of the padded 128)
    s_rows = {it.shape[0] for it in compiled.graph.items if it.name.endswith(".s")}
    assert max(s_rows) == 64
    assert max_error(d, hw) < 2e-2
