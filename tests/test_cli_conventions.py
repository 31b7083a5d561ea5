"""What a new user meets first: help, version, progress and phase times, output choice and
compression, shipped examples, file modes, and error lines that name their file."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
from importlib import resources

import pytest
from common import EXAMPLES
from taskcases import run_cli

import staticsched
from staticsched.cli import main
from staticsched.cli.args import DEFAULT_JITTER, build_parser
from staticsched.emit import OUTPUT_FILES, choose_outputs, load_program
from staticsched.emit.files import LARGE_PROGRAM_OPS, TEXT_FORMS
from staticsched.errors import InputError
from staticsched.progress import Progress


def test_no_command_prints_the_help(capsys):
    code, _out, err = run_cli([], capsys)
    assert code == 2
    assert "usage: staticsched" in err and "schedule" in err and "examples" in err
    assert "required" not in err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"staticsched {staticsched.__version__}"


def test_every_option_of_schedule_and_verify_has_help():
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    for name in ("schedule", "verify"):
        for action in sub.choices[name]._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    sch = sub.choices["schedule"]
    helps = {a.dest: a.help for a in sch._actions}
    assert "flags" in helps["mode"] and "timed" in helps["mode"]
    assert "list" in helps["method"] and "cpsat" in helps["method"]
    # the limit's help says what it bounds, not "wall-clock seconds" of the whole run
    assert "bounds the CP-SAT search" in helps["time_limit"] and ", not lowering" in helps["time_limit"]
    # one default for jittered replays, whichever command verifies
    defaults = {name: {a.dest: a.default for a in sub.choices[name]._actions}
                for name in ("schedule", "verify")}
    assert defaults["schedule"]["jitter"] == defaults["verify"]["jitter"] == DEFAULT_JITTER


def test_examples_command_copies_the_shipped_examples(tmp_path, capsys):
    code, _out, _ = run_cli(["examples", tmp_path / "ex"], capsys)
    assert code == 0
    shipped = sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".json", ".toml"))
    shipped += sorted(f"onnx/{p.name}" for p in (EXAMPLES / "onnx").iterdir()
                      if p.suffix in (".onnx", ".py", ".md"))
    got = sorted(str(p.relative_to(tmp_path / "ex")) for p in (tmp_path / "ex").rglob("*") if p.is_file())
    assert got == sorted(shipped)
    shipped_bytes = (EXAMPLES / "double_buffer.json").read_bytes()
    assert (tmp_path / "ex" / "double_buffer.json").read_bytes() == shipped_bytes
    # and they are package data (an installed wheel has them, not only a clone)
    assert (resources.files("staticsched") / "examples" / "double_buffer.json").is_file()
    assert (resources.files("staticsched") / "examples" / "onnx" / "gpt_block.onnx").is_file()


def test_py_typed_marker_is_shipped():
    assert (resources.files("staticsched") / "py.typed").is_file()


def test_lower_into_a_path_under_a_file_is_bad_input(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code, _, err = run_cli(["lower", EXAMPLES / "chain.json", "--hw", "seed-davinci", "-o",
                        tmp_path / "afile" / "x.json"], capsys)
    assert code == 2
    assert err.splitlines() == [f"staticsched: error: {tmp_path / 'afile' / 'x.json'}: cannot write: "
                                f"'{tmp_path / 'afile'}' is a file, not a directory"]


def test_lower_and_schedule_files_follow_the_umask(tmp_path, capsys):
    old = os.umask(0o027)
    try:
        assert run_cli(["lower", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo", "-o",
                    tmp_path / "ops.json"], capsys)[0] == 0
        assert run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo", "-o",
                    tmp_path / "out", "--quiet", "--no-verify"], capsys)[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ops.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o750
    for f in (tmp_path / "out").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o640, f.name


def test_error_lines_name_the_file(tmp_path, capsys):
    top = tmp_path / "top.json"
    top.write_text("[1, 2, 3]")
    code, _, err = run_cli(["schedule", top, "--hw", "seed-davinci", "-o", tmp_path / "o", "-q"], capsys)
    assert code == 2
    assert err.splitlines() == [f"staticsched: error: {top}: top level must be a JSON object "
                                "(a TaskGraph or an OpGraph), got list"]
    data = json.loads((EXAMPLES / "matmul_bias_gelu.json").read_text())
    data["tasks"][0]["tiling"] = {"base_m": 128, "base_n": 128, "base_k": 512}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run_cli(["schedule", bad, "--hw", "seed-davinci", "-o", tmp_path / "o", "-q"], capsys)
    assert code == 2 and len(err.splitlines()) == 2
    assert all(line.startswith(f"staticsched: error: {bad}: task 'mm': ") for line in err.splitlines())
    og = {"format": "staticsched.opgraph", "version": 1, "items": {},
          "ops": [{"id": "a", "unit": "NOPE", "duration": 1}]}
    ogf = tmp_path / "og.json"
    ogf.write_text(json.dumps(og))
    code, _, err = run_cli(["lower", ogf, "--hw", "seed-davinci", "-o", tmp_path / "x.json"], capsys)
    assert code == 2 and err.startswith(f"staticsched: error: {ogf}: op 'a': unknown unit 'NOPE'")
    assert not (tmp_path / "o").exists()


def test_phases_are_announced_and_timed_in_plain_lines(tmp_path, capsys):
    code, out, err = run_cli(["schedule", EXAMPLES / "matmul_bias_gelu.json", "--hw", "seed-davinci", "-o",
                          tmp_path / "o"], capsys)
    assert code == 0
    for phase in ("lower", "solve", "plan sync", "build program", "verify", "write"):
        assert f"[{phase}] ..." in err and f"[{phase}] done in " in err
        assert any(line.lstrip().startswith(phase) and line.rstrip().endswith(" s")
                   for line in out.splitlines()), phase
    # not a terminal: no carriage returns or escape sequences
    assert "\r" not in err and "\x1b" not in err
    assert "phases       : wall seconds" in out
    # the tiling the bound refers to
    assert "tiling       : mm: matmul base m/n/k 128/128/128 (given)" in out
    tt = json.loads((tmp_path / "o" / "timetable.json").read_text())
    assert tt["tilings"] == [{"task": "mm", "kind": "matmul", "base": [128, 128, 128],
                              "buffers": 2, "derived": False, "blocks": 6,
                              "blocks_per_core": [0, 1]}]


def test_quiet_silences_every_progress_line(tmp_path, capsys):
    code, _, err = run_cli(["schedule", EXAMPLES / "matmul_bias_gelu.json", "--hw", "seed-davinci", "-o",
                        tmp_path / "o", "--quiet"], capsys)
    assert code == 0 and err == ""


def test_a_terminal_gets_a_bar_updated_in_place():
    buf = io.StringIO()
    rep = Progress(buf, tty=True)
    with rep.counter("work", 1000) as c:
        for _ in range(10):
            c.update(100)
    assert "\r" in buf.getvalue() and "work" in buf.getvalue()
    plain = io.StringIO()
    rep = Progress(plain, tty=False)
    with rep.counter("work", 1000) as c:
        for _ in range(10):
            c.update(100)
    lines = plain.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("  work: 1000/1000 op (100%")
    assert "\r" not in plain.getvalue()


def test_outputs_choice_and_compression(tmp_path, capsys):
    out = tmp_path / "o"
    code, stdout, _ = run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo",
                           "-o", out, "-q", "--outputs", "timetable.json.gz,program.txt,trace.json"],
                          capsys)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["program.txt", "timetable.json.gz", "trace.json"]
    tt = json.loads(gzip.decompress((out / "timetable.json.gz").read_bytes()))
    assert tt["makespan"] == 1060
    out2 = tmp_path / "o2"
    assert run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo", "-o", out2,
                "-q", "--compress"], capsys)[0] == 0
    names = sorted(p.name for p in out2.iterdir())
    assert names == sorted(n + ".gz" if n.endswith(".json") else n for n in OUTPUT_FILES)
    # every reader takes the gzip files; gzip carries no time stamp: same bytes every run
    program = load_program(out2 / "program.json.gz")
    assert program == load_program(out / "program.txt")
    code, stdout, _ = run_cli(["verify", out2 / "program.json.gz", "--hw", "double-buffer-demo"], capsys)
    assert code == 0, stdout
    out3 = tmp_path / "o3"
    assert run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo", "-o", out3,
                "-q", "--compress"], capsys)[0] == 0
    for name in names:
        assert (out2 / name).read_bytes() == (out3 / name).read_bytes(), name


def test_large_programs_get_compressed_json_by_default_and_say_so():
    small = choose_outputs(ops=10)
    assert small.names == OUTPUT_FILES and not small.note
    big = choose_outputs(ops=LARGE_PROGRAM_OPS + 1)
    assert big.names == ("timetable.json.gz", "program.json.gz", "trace.json.gz", "gantt.svg")
    assert "gzip-compressed" in big.note and str(LARGE_PROGRAM_OPS) in big.note
    assert "text forms (timetable.csv, timetable.txt, program.txt, bundles.txt) not written" in big.note
    assert choose_outputs(ops=LARGE_PROGRAM_OPS + 1, compress=False).names == tuple(
        n for n in OUTPUT_FILES if n not in TEXT_FORMS)
    assert choose_outputs(["all"], ops=LARGE_PROGRAM_OPS + 1).names == OUTPUT_FILES
    assert choose_outputs(["program.txt"], ops=LARGE_PROGRAM_OPS + 1).names == ("program.txt",)
    assert choose_outputs(ops=LARGE_PROGRAM_OPS).names == OUTPUT_FILES
    with pytest.raises(InputError) as err:
        choose_outputs(["timetable.json", "bogus.txt", "timetable.json.gz"])
    assert err.value.problems == (
        "unknown output file 'bogus.txt' (files: " + ", ".join(OUTPUT_FILES) + ", each optionally with .gz)",
        "output file 'timetable.json' named twice",
    )


def test_api_writes_the_output_files(tmp_path):
    res = staticsched.compile_graph(EXAMPLES / "double_buffer.json", "double-buffer-demo")
    paths = res.write(tmp_path / "o", outputs=["timetable.csv", "gantt.svg"])
    assert [p.name for p in paths] == ["timetable.csv", "gantt.svg"]
    assert [name for name, _ in res.timings] == ["lower", "solve", "plan sync", "build program"]
