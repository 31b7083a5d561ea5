"""Output files: contents, golden texts, trace and Gantt structure, atomic writing, summary."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest
from common import EXAMPLES, GOLDEN, ROOT, preset
from schedcases import double_buffer_schedule, make_schedule, tiny_hw

from staticsched.emit import (
    OUTPUT_FILES,
    dumps_bundles,
    dumps_trace,
    finalize,
    render_gantt,
    summary_lines,
    write_outputs,
)
from staticsched.emit import files as files_module
from staticsched.emit import gantt as gantt_module
from staticsched.errors import InputError
from staticsched.formats import jsonfmt
from staticsched.model.opgraph import Op, OpGraph

UPDATE = os.environ.get("STATICSCHED_UPDATE_GOLDEN") == "1"


def assert_golden(name: str, text: str) -> None:
    """Compare with ``tests/golden/<name>``; ``STATICSCHED_UPDATE_GOLDEN=1`` rewrites it."""
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}; run with STATICSCHED_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.fixture(scope="module")
def double_buffer():
    return finalize(double_buffer_schedule())


def test_write_outputs_writes_every_file(tmp_path, double_buffer):
    schedule, program, plan = double_buffer
    out = tmp_path / "deep" / "out"
    paths = write_outputs(out, schedule, program, plan)
    assert [p.name for p in paths] == list(OUTPUT_FILES)
    assert sorted(os.listdir(out)) == sorted(OUTPUT_FILES)
    assert not [p for p in out.parent.iterdir() if p.name != "out"], "temporary directory left behind"

    tt = json.loads((out / "timetable.json").read_text())
    assert (tt["format"], tt["version"], tt["hw"]) == ("staticsched.timetable", 1, "double-buffer-demo")
    assert (tt["makespan"], tt["lower_bound"], tt["gap"], tt["status"]) == (1060, 1060, 0.0, "optimal")
    assert tt["ops"] == [
        {"id": t.id, "core": 0, "unit": t.unit, "start": t.start, "end": t.end} for t in schedule.ops
    ]
    assert tt["items"]["t2"] == {
        "core": 0,
        "space": "L1",
        "offset": 0,
        "bytes": 32768,
        "start": 160,
        "end": 360,
    }
    assert len(tt["events"]) == len(schedule.events) == 18
    assert tt["sync"]["flags_kept"] == 18 and tt["sync"]["ids_used"] == {"c0 DMA->CUBE": 2, "c0 CUBE->DMA": 2}
    assert "time" not in json.dumps(tt["sync"]) and "stats" not in tt

    rows = list(csv.DictReader(io.StringIO((out / "timetable.csv").read_text())))
    assert [(r["id"], int(r["start"]), int(r["end"])) for r in rows] == [
        (t.id, t.start, t.end) for t in schedule.ops
    ]

    assert (out / "program.txt").read_text().startswith("# staticsched.program 1")
    assert json.loads((out / "program.json").read_text())["format"] == "staticsched.program"


def test_golden_texts(double_buffer, tmp_path):
    schedule, program, plan = double_buffer
    write_outputs(tmp_path / "out", schedule, program, plan)
    for name in ("program.txt", "bundles.txt", "timetable.txt", "timetable.csv"):
        assert_golden(f"double_buffer.{name}", (tmp_path / "out" / name).read_text())
    assert_golden("double_buffer.summary.txt", "\n".join(summary_lines(schedule, plan)) + "\n")


def test_outputs_are_byte_identical_across_runs(tmp_path):
    for run in ("a", "b"):
        write_outputs(tmp_path / run, *finalize(double_buffer_schedule()))
    for name in OUTPUT_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# --------------------------------------------------------------------------- trace and Gantt


def test_trace_has_a_track_per_pipe_and_a_slice_per_op(double_buffer):
    schedule, _, _ = double_buffer
    trace = json.loads(dumps_trace(schedule))
    events = trace["traceEvents"]
    assert isinstance(events, list)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {(0, 0): "DMA", (0, 1): "CUBE"}
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"] == ["core 0"]
    slices = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in slices) == sorted(t.id for t in schedule.ops)
    by_name = {e["name"]: e for e in slices}
    for t in schedule.ops:
        e = by_name[t.id]
        assert (e["ts"], e["dur"], threads[(e["pid"], e["tid"])]) == (t.start, t.end - t.start, t.unit)
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(ends) == len(schedule.events)
    assert {e["id"] for e in starts} == {e["id"] for e in ends}
    # each flow end sits inside its slice, so the viewer binds the arrow to it
    for e in (*starts, *ends):
        owner = [
            s
            for s in slices
            if (s["pid"], s["tid"]) == (e["pid"], e["tid"]) and s["ts"] <= e["ts"] < s["ts"] + s["dur"]
        ]
        assert len(owner) == 1
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"L1 bytes"}
    assert max(e["args"]["bytes"] for e in counters) == 65536 and counters[-1]["args"]["bytes"] == 0
    assert trace["otherData"]["time_unit"] == "1 trace microsecond = 1 cycle"


def _lanes(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    return [t.text for t in root.iter(f"{ns}text") if t.text and t.text.startswith("c")]


def test_gantt_is_svg_with_every_pipe(double_buffer):
    schedule, _, _ = double_buffer
    svg = render_gantt(schedule)
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert _lanes(svg) == ["c0.DMA", "c0.CUBE"]
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert sum(1 for t in titles if t.startswith("mm")) == 10 and "load3 (op) [260, 320)" in titles


def test_gantt_shows_idle_pipes_too():
    hw = tiny_hw(units=("A", "B", "C"), cores=1)
    graph = OpGraph([], [Op("a", "A", 5)])
    svg = render_gantt(make_schedule(graph, hw, {"a": 0}))
    assert _lanes(svg) == ["c0.A", "c0.B", "c0.C"]


def test_big_gantt_is_aggregated_and_says_so():
    # 20 cores x 300 ops: more cores than drawn and more ops than single rectangles
    hw = tiny_hw(units=("A", "B"), cores=20)
    ops = [Op(f"o{c}_{i}", "AB"[i % 2], 3, core=c) for c in range(20) for i in range(300)]
    starts = {op.id: 3 * (int(op.id.split("_")[1]) // 2) for op in ops}
    svg = render_gantt(make_schedule(OpGraph([], ops), hw, starts))
    lanes = _lanes(svg)
    assert lanes[:2] == ["c0.A", "c0.B"] and len(lanes) == 2 * gantt_module.MAX_CORES
    assert "showing cores 0..15 of 20 cores" in svg and "aggregated: 4800 ops drawn as 300 time bins" in svg
    assert len(svg) < 300_000
    # busy pipes come out fully shaded
    assert 'fill-opacity="1.0"' in svg


def test_bundles_list_each_cycle_once_and_can_be_truncated(double_buffer):
    _, program, _ = double_buffer
    lines = dumps_bundles(program).splitlines()
    body = [ln for ln in lines if not ln.startswith("#")]
    cycles = [int(ln.split("|")[0]) for ln in body]
    assert cycles == sorted(set(cycles))
    assert set(cycles) == {i.cycle for s in program.streams for i in s.instrs}
    assert (
        body[1] == "      60 | c0.DMA: SET_FLAG DMA CUBE 0; OP load1 | c0.CUBE: WAIT_FLAG DMA CUBE 0; OP mm0"
    )
    short = dumps_bundles(program, max_lines=3).splitlines()
    assert short[-1] == f"# truncated: {len(cycles) - 3} more cycles with issues (up to cycle 960) not shown"


# --------------------------------------------------------------------------- atomicity


def _boom(*args, **kwargs):
    raise RuntimeError("injected fault")


def test_a_failing_renderer_leaves_nothing(tmp_path, double_buffer, monkeypatch):
    monkeypatch.setattr(gantt_module, "render_gantt", _boom)
    with pytest.raises(RuntimeError, match="injected fault"):
        write_outputs(tmp_path / "out", *double_buffer)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_write_leaves_nothing_and_keeps_old_files(tmp_path, double_buffer, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "program.txt").write_text("old program")
    (out / "notes.md").write_text("mine")
    real = files_module._write_file
    calls = []

    def flaky(path, chunks):
        calls.append(path.name)
        if len(calls) == 4:
            raise OSError("disk full (injected)")
        return real(path, chunks)

    monkeypatch.setattr(files_module, "_write_file", flaky)
    with pytest.raises(InputError, match=r"out: cannot write the output files: disk full \(injected\)"):
        write_outputs(out, *double_buffer)
    monkeypatch.setattr(files_module, "_write_file", real)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == ["notes.md", "program.txt"]
    assert (out / "program.txt").read_text() == "old program"
    # and a good run replaces the outputs but leaves the user's file alone
    write_outputs(out, *double_buffer)
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUT_FILES, "notes.md"])
    assert (out / "notes.md").read_text() == "mine"
    assert (out / "program.txt").read_text().startswith("# staticsched.program")


@pytest.mark.parametrize("when", ["render", "write"])
def test_a_killed_run_leaves_no_outputs(tmp_path, when):
    # the child is SIGKILLed from inside write_outputs: while rendering a file (files are
    # streamed, so that is while writing it) or half way through writing the temporary
    # directory
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from schedcases import double_buffer_schedule
        from staticsched.emit import finalize, write_outputs
        from staticsched.emit import files, gantt
        outputs = finalize(double_buffer_schedule())
        def die(*a, **k):
            os.kill(os.getpid(), signal.SIGKILL)
        if {when!r} == "render":
            gantt.render_gantt = die
        else:
            real, calls = files._write_file, []
            def half(path, chunks):
                calls.append(1)
                if len(calls) == 3:
                    die()
                return real(path, chunks)
            files._write_file = half
        write_outputs({str(tmp_path / "out")!r}, *outputs)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    assert not (tmp_path / "out").exists()
    # a kill cannot clean up: what is left is one hidden partial directory, never outputs
    left = [p for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].name.startswith(".out.partial-")


def test_extra_files_are_written_with_the_rest(tmp_path, double_buffer):
    paths = write_outputs(
        tmp_path / "out", *double_buffer, extra_files={"report.txt": "clean\n", "b.bin": b"\x00"}
    )
    assert [p.name for p in paths][-2:] == ["b.bin", "report.txt"]
    assert (tmp_path / "out" / "report.txt").read_text() == "clean\n"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"program.txt": "x"}, "would replace a standard output file"),
        ({"../escape.txt": "x"}, "must be a plain file name"),
        ({"": "x"}, "must be a plain file name"),
    ],
)
def test_bad_extra_file_names_are_input_errors(tmp_path, double_buffer, extra, problem):
    with pytest.raises(InputError, match=problem):
        write_outputs(tmp_path / "out", *double_buffer, extra_files=extra)
    assert list(tmp_path.iterdir()) == []


def test_outdir_that_is_a_file_is_an_input_error(tmp_path, double_buffer):
    (tmp_path / "out").write_text("a file")
    with pytest.raises(InputError, match="exists and is not a directory"):
        write_outputs(tmp_path / "out", *double_buffer)
    with pytest.raises(InputError, match="cannot write the output files"):
        write_outputs(tmp_path / "out" / "below", *double_buffer)


# --------------------------------------------------------------------------- summary


def test_summary_of_one_core_lists_every_pipe(double_buffer):
    schedule, _, plan = double_buffer
    lines = summary_lines(schedule, plan)
    text = "\n".join(lines)
    assert "makespan     : 1060 cycles (1.060 us at 1 GHz)" in text
    assert "lower bound  : 1060 cycles, gap 0.00%" in text
    # DMA busy 10 x 60 of 1060 cycles, CUBE 10 x 100
    assert "c0.DMA      :        600 cycles      0.600 us ( 56.6%)" in text
    assert "c0.CUBE     :       1000 cycles      1.000 us ( 94.3%)" in text
    assert "18 cross-pipe dependencies, 18 flags kept, 0 eliminated as implied, 0 credits" in text
    assert lines[-1] == "event ids    : c0 DMA->CUBE 2, c0 CUBE->DMA 2"


def test_summary_of_many_cores_is_compact():
    hw = tiny_hw(units=("A", "B"), cores=8)
    # core c runs one A op of 10 + c cycles; makespan 17, so A is 10/17 .. 17/17 busy
    graph = OpGraph([], [Op(f"a{c}", "A", 10 + c, core=c) for c in range(8)])
    schedule, _, plan = finalize(make_schedule(graph, hw, {f"a{c}": 0 for c in range(8)}))
    lines = summary_lines(schedule, plan)
    assert "utilisation  : busy % per pipe over the makespan, across 8 cores" in lines
    row = next(ln for ln in lines if ln.strip().startswith("A "))
    assert row.split() == ["A", "58.8%", "79.4%", "100.0%"]
    assert len(lines) < 12


# --------------------------------------------------------------------------- scale


@pytest.mark.slow
def test_170k_ops_are_rendered_and_written_in_their_large_program_form(tmp_path):
    # how long it takes is benchmarks/scale.py's to measure, not a test's to assert
    from staticsched.api import as_opgraph
    from staticsched.formats.load import load_program
    from staticsched.solver import solve

    hw = preset("seed-davinci")
    schedule = solve(as_opgraph(ROOT / "examples" / "matmul_gelu.json", hw), hw, method="list")
    final, program, plan = finalize(schedule)
    assert len(final.ops) > 160_000
    assert dumps_bundles(program) and dumps_trace(final) and render_gantt(final)
    paths = write_outputs(tmp_path / "out", final, program, plan)
    assert [p.name for p in paths] == ["timetable.json.gz", "program.json.gz", "trace.json.gz", "gantt.svg"]
    assert (tmp_path / "out" / "gantt.svg").stat().st_size < 2_000_000
    table = json.loads(gzip.decompress((tmp_path / "out" / "timetable.json.gz").read_bytes()))
    assert len(table["ops"]) == len(final.ops) and table["makespan"] == final.makespan
    assert load_program(tmp_path / "out" / "program.json.gz") == program


def test_render_outputs_is_what_gets_written(tmp_path, double_buffer):
    rendered = files_module.render_outputs(*double_buffer)
    write_outputs(tmp_path / "out", *double_buffer)
    assert {n: (tmp_path / "out" / n).read_bytes() for n in OUTPUT_FILES} == rendered


def test_streamed_files_are_the_one_piece_renderings_whatever_the_chunk_size(
        tmp_path, double_buffer, monkeypatch):
    whole = files_module.render_outputs(*double_buffer)
    monkeypatch.setattr(jsonfmt, "BATCH", 2)  # many chunks per stream, per list, per table
    monkeypatch.setattr(files_module, "BATCH_BYTES", 7)  # many pieces per write and zlib call
    assert files_module.render_outputs(*double_buffer) == whole
    gz = [n + ".gz" if n.endswith(".json") else n for n in OUTPUT_FILES]
    write_outputs(tmp_path / "out", *double_buffer, outputs=gz)
    for name in gz:
        data = (tmp_path / "out" / name).read_bytes()
        if name.endswith(".gz"):
            assert data == gzip.compress(whole[name[:-3]], compresslevel=files_module.GZIP_LEVEL, mtime=0)
            data = gzip.decompress(data)
        assert data == whole[name.removesuffix(".gz")], name


def test_utilisation_never_passes_100_percent_when_the_program_beats_its_plan():
    # a flags program can run faster than its timetable (a static link split the hardware
    # does not keep); the busy cycles are the timetable's, so they are shares of the plan
    import re

    import attrs as _attrs

    from staticsched.api import compile_graph
    from staticsched.emit.summary import summary_lines

    compiled = compile_graph(ROOT / "examples" / "matmul_bias_gelu.json", "seed-davinci", method="list")
    s = compiled.schedule
    faster = _attrs.evolve(s, makespan=s.makespan // 20, planned_makespan=s.plan_makespan)
    lines = summary_lines(faster, compiled.plan)
    k = next(i for i, ln in enumerate(lines) if ln.startswith("utilisation"))
    assert f"over the planned makespan ({s.plan_makespan} cycles)" in lines[k]
    table = lines[k + 1 : next(i for i, ln in enumerate(lines) if ln.startswith("sync"))]
    shares = [float(x) for ln in table for x in re.findall(r"([\d.]+)%", ln)]
    assert shares and max(shares) <= 100.0
    plain = summary_lines(s, compiled.plan)
    assert "over the makespan" in next(ln for ln in plain if ln.startswith("utilisation"))


def test_timetable_json_from_record_texts_is_the_encoders_text(double_buffer):
    # timetable.json is written from its records' texts: the same text as the generic
    # encoder's of timetable_to_dict, with rates, non-ASCII names and every field
    import attrs

    from staticsched.emit.timetable import dumps_timetable_json, timetable_to_dict
    from staticsched.model.hardware import RATE_DENOM

    schedule, _, plan = double_buffer
    ops = [attrs.evolve(t, id=t.id + "\u00e9\"q", rate=(k * RATE_DENOM) // 3)
           for k, t in enumerate(schedule.ops)]
    items = [attrs.evolve(p, item=p.item + "\u2603") for p in schedule.items]
    varied = attrs.evolve(schedule, ops=ops, items=items)
    assert any(t.rate for t in varied.ops) and varied.events
    text = dumps_timetable_json(varied, plan)
    assert text == jsonfmt.dumps_json(timetable_to_dict(varied, plan))
    assert json.loads(text) == json.loads(json.dumps(timetable_to_dict(varied, plan)))


@pytest.mark.parametrize("expand", [None, lambda path: len(path) == 0])
def test_raw_records_are_written_as_the_encoder_would(expand):
    records = [{"a": 1, "b": "x\u00e9"}, {"a": 2, "b": "y"}]
    table = {"k1": {"v": 1.5}, "k\u00e9": {"v": None}}
    plain = {"list": records, "dict": table, "n": 3}
    raw = {"list": jsonfmt.RawList(map(jsonfmt.encode, records)),
           "dict": jsonfmt.RawDict((k, jsonfmt.encode(v)) for k, v in table.items()), "n": 3}
    args = () if expand is None else (expand,)
    assert jsonfmt.dumps_json(raw, *args) == jsonfmt.dumps_json(plain, *args)


def test_started_outputs_render_in_a_worker_and_appear_at_finish(tmp_path, double_buffer, monkeypatch):
    # the CLI starts a large program's files before verifying it: they render in a forked
    # worker into the temporary directory, and only finish() puts them where the user looks
    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    plain = write_outputs(tmp_path / "plain", *double_buffer)
    mine = os.nice(0)
    pending = files_module.start_outputs(tmp_path / "out", *double_buffer, processes=1, nice=5)
    assert [r.pool is not None for r in pending.renderings] == [True], "no worker started"
    assert not (tmp_path / "out").exists()
    paths = pending.finish()
    assert [p.name for p in paths] == [p.name for p in plain]
    for a, b in zip(paths, plain, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "plain"]
    # only the worker was reniced
    assert os.nice(0) == mine


def test_closing_started_outputs_leaves_nothing(tmp_path, double_buffer, monkeypatch):
    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    pending = files_module.start_outputs(tmp_path / "out", *double_buffer, processes=1)
    pending.close()
    pending.close()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="after close"):
        pending.finish()


def test_link_usage_is_computed_once_per_schedule():
    # the timetable, trace, Gantt chart and summary all ask for it; kept with the graph for the
    # schedule object it was computed for, never for another schedule of the same graph
    import attrs

    from staticsched.api import compile_graph
    from staticsched.model.links import _link_usage, link_usage

    schedule = compile_graph(EXAMPLES / "matmul_bias_gelu.json", "seed-davinci", method="list").schedule
    first = link_usage(schedule)
    assert first and any(use.bytes for use in first)
    assert link_usage(schedule) is first
    later = attrs.evolve(schedule, ops=tuple(attrs.evolve(o, start=o.start + 1, end=o.end + 1)
                                             for o in schedule.ops))
    assert later.graph is schedule.graph
    moved = link_usage(later)
    assert moved == _link_usage(later) and moved != first
    assert link_usage(schedule) == first


def test_what_the_files_share_is_computed_with_the_collector_paused(tmp_path, double_buffer, monkeypatch):
    # a large program's link use and GM traffic are computed here before the workers fork; the
    # first collection after a paused phase would walk the whole heap (seconds on a chip)
    import gc

    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    seen = []
    real = files_module.link_usage
    monkeypatch.setattr(files_module, "link_usage", lambda s: seen.append(gc.isenabled()) or real(s))
    gc.enable()
    files_module.start_outputs(tmp_path / "out", *double_buffer, processes=1).finish()
    assert seen == [False]
    assert gc.isenabled()


def test_started_outputs_render_at_the_niceness_asked_for(tmp_path, double_buffer, monkeypatch):
    # the CLI's renderer yields the CPUs to the verifier: each file here records the niceness
    # of the process that wrote it. Asked for nothing, the worker renders every file
    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    monkeypatch.setattr(files_module, "_write_file", lambda path, chunks: path.write_text(str(os.nice(0))))
    mine = os.nice(0)
    pending = files_module.start_outputs(tmp_path / "out", *double_buffer, processes=1, nice=5)
    (mapped,) = pending.renderings
    deadline = time.monotonic() + 120  # against a hang: a started worker takes them at once
    while mapped.taken.value < len(mapped.items):
        assert time.monotonic() < deadline, "the worker took no files in 120 s"
        time.sleep(0.01)
    paths = pending.finish()
    assert {p.read_text() for p in paths} == {str(min(19, mine + 5))}
    assert os.nice(0) == mine


def test_files_no_worker_started_render_here_at_this_niceness(tmp_path, double_buffer, monkeypatch):
    # finish renders what the worker has not taken: in this process, whose niceness stays
    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    here = os.getpid()
    monkeypatch.setattr(files_module, "_write_file",
                        lambda path, chunks: path.write_text(f"{os.getpid() == here} {os.nice(0)}"))
    mine = os.nice(0)
    paths = files_module.start_outputs(tmp_path / "out", *double_buffer, processes=1, nice=5).finish()
    for p in paths:
        written_here, nice = p.read_text().split()
        assert int(nice) == (mine if written_here == "True" else min(19, mine + 5))
    assert os.nice(0) == mine


def test_files_started_before_the_program_are_the_same_files(tmp_path, double_buffer, monkeypatch):
    # the CLI starts the timetable, trace and Gantt chart once the schedule is final, and the
    # program's files once it is built: together they are what write_outputs writes
    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    schedule, program, plan = double_buffer
    plain = write_outputs(tmp_path / "plain", schedule, program, plan, outputs=["all"])
    pending = files_module.start_outputs(tmp_path / "out", schedule, None, plan, outputs=["all"],
                                         processes=1, nice=5)
    with pytest.raises(RuntimeError, match="before add_program"):
        pending.finish()
    pending = files_module.start_outputs(tmp_path / "out", schedule, None, plan, outputs=["all"],
                                         processes=1)
    assert len(pending.renderings) == 1 and pending.later is not None
    assert sorted(pending.later[0]) == sorted(files_module.PROGRAM_FILES)
    pending.add_program(program, processes=1)
    paths = pending.finish()
    assert [p.name for p in paths] == [p.name for p in plain]
    for a, b in zip(paths, plain, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "plain"]
