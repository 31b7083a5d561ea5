"""The CLI end to end: happy paths and every class of hostile input. Bad input exits 2 with one
line per problem on stderr, no traceback, and leaves no output behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from common import EXAMPLES
from taskcases import run_cli


def test_hw_list_and_show(capsys):
    code, out, _ = run_cli(["hw", "list"], capsys)
    assert code == 0 and "seed-davinci" in out and "double-buffer-demo" in out
    code, out, _ = run_cli(["hw", "show", "seed-davinci"], capsys)
    assert code == 0
    for word in ("MTE2", "CUBE", "FIXPIPE", "L0C", "262144", "event ids", "4096 MAC/cycle"):
        assert word in out


def test_lower_writes_opgraph(tmp_path, capsys):
    out_file = tmp_path / "ops.json"
    code, _out, _ = run_cli(["lower", EXAMPLES / "matmul_bias_gelu.json", "--hw", "seed-davinci", "-o",
                        out_file], capsys)
    assert code == 0 and out_file.exists()
    assert json.loads(out_file.read_text())["format"] == "staticsched.opgraph"


def test_schedule_writes_files_and_verifies(tmp_path, capsys):
    outdir = tmp_path / "out"
    code, out, _ = run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo",
                        "-o", outdir, "--quiet"], capsys)
    assert code == 0, out
    assert "makespan     : 1060 cycles" in out and "verification : clean" in out
    names = sorted(p.name for p in outdir.iterdir())
    assert names == sorted(["timetable.json", "timetable.csv", "timetable.txt", "program.txt",
                            "program.json", "bundles.txt", "trace.json", "gantt.svg"])
    code, out, _ = run_cli(["verify", outdir / "program.txt", "--hw", "double-buffer-demo",
                        "--jitter", "5"], capsys)
    assert code == 0, out


def test_schedule_twice_is_byte_identical(tmp_path, capsys):
    for name in ("a", "b"):
        code, _, _ = run_cli(["schedule", EXAMPLES / "matmul_bias_gelu.json", "--hw", "seed-davinci",
                          "-o", tmp_path / name, "--quiet", "--no-verify"], capsys)
        assert code == 0
    for f in ("timetable.json", "program.txt", "program.json", "bundles.txt", "trace.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_verify_reports_broken_program(tmp_path, capsys):
    outdir = tmp_path / "out"
    assert run_cli(["schedule", EXAMPLES / "double_buffer.json", "--hw", "double-buffer-demo", "-o", outdir,
                "--quiet", "--no-verify"], capsys)[0] == 0
    from mutations import delete_wait

    from staticsched.emit import dumps_program_text, load_program

    # drop one WAIT_FLAG: its SET is left unpaired and the consumer races with its producer
    broken = tmp_path / "broken.txt"
    broken.write_text(dumps_program_text(delete_wait(load_program(outdir / "program.txt"))))
    code, out, _ = run_cli(["verify", broken, "--hw", "double-buffer-demo"], capsys)
    assert code == 1
    assert "unpaired_set" in out or "unpaired set" in out


def _hostile_cases(tmp: Path) -> list[tuple[str, list, str]]:
    good = json.loads((EXAMPLES / "double_buffer.json").read_text())

    def write(name: str, content) -> Path:
        p = tmp / name
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        return p

    cyclic = json.loads(json.dumps(good))
    cyclic["ops"][0]["deps"] = ["mm9"]
    cyclic["ops"][19]["deps"] = ["load9", "mm0"]
    cyclic["ops"][1]["deps"] = ["load0", "load0"]
    neg = json.loads(json.dumps(good))
    neg["ops"][3]["duration"] = -5
    unknown = json.loads(json.dumps(good))
    unknown["ops"][2]["colour"] = "red"
    wrong_type = json.loads(json.dumps(good))
    wrong_type["items"]["t0"]["bytes"] = "32768"
    huge = json.loads(json.dumps(good))
    huge["items"]["t0"]["bytes"] = 10**30
    tg = json.loads((EXAMPLES / "matmul_gelu.json").read_text())
    big_tg = write("big.json", tg)
    hw_bad = write("hw.toml", 'name = "x"\ncores = 1\n[units.A]\n[spaces.L1]\ncapacity = -1\n')
    dbl = "double-buffer-demo"
    return [
        ("malformed JSON", ["schedule", write("m.json", '{"format": '), "--hw", dbl],
         "not valid JSON"),
        ("NaN", ["schedule", write("nan.json", '{"format": NaN}'), "--hw", dbl], "not valid JSON"),
        ("not an object", ["schedule", write("list.json", "[1, 2]"), "--hw", dbl],
         "top level must be a JSON object"),
        ("unknown format", ["schedule", write("fmt.json", {"format": "x"}), "--hw", dbl],
         "format"),
        ("cyclic", ["schedule", write("cyc.json", cyclic), "--hw", dbl], "dependency cycle"),
        ("negative", ["schedule", write("neg.json", neg), "--hw", dbl], "'duration' = -5"),
        ("unknown key", ["schedule", write("unk.json", unknown), "--hw", dbl],
         "unknown key 'colour'"),
        ("wrong type", ["schedule", write("wt.json", wrong_type), "--hw", dbl],
         "'bytes' must be an integer"),
        ("huge", ["schedule", write("huge.json", huge), "--hw", dbl], "do not fit space 'L1'"),
        ("missing file", ["schedule", tmp / "nope.json", "--hw", dbl], "no such file"),
        ("bad hw", ["schedule", EXAMPLES / "double_buffer.json", "--hw", hw_bad], "capacity"),
        ("unknown preset", ["schedule", EXAMPLES / "double_buffer.json", "--hw", "nochip"],
         "no such hardware file or preset"),
        ("op budget", ["schedule", big_tg, "--hw", "seed-davinci", "--op-budget", "1000"],
         "1000"),
        ("bad option", ["schedule", EXAMPLES / "double_buffer.json", "--hw", dbl, "--time-limit", "-1"],
         "time_limit"),
        ("bad gap", ["schedule", EXAMPLES / "double_buffer.json", "--hw", dbl, "--gap", "1.5"],
         "gap must be a number with 0 <= gap < 1, got 1.5"),
        ("binary", ["schedule", write("bin.json", "\x00\xff\xfe"), "--hw", dbl], "JSON"),
        ("deep nesting", ["schedule", write("deep.json", "[" * 100000 + "]" * 100000),
                          "--hw", dbl], "JSON"),
    ]


@pytest.mark.parametrize("case", range(17))
def test_hostile_input_exits_2_cleanly(tmp_path, capsys, case):
    name, argv, needle = _hostile_cases(tmp_path)[case]
    outdir = tmp_path / "outdir"
    code, out, err = run_cli([*argv, "-o", outdir, "--quiet"], capsys)
    assert code == 2, (name, out, err)
    assert needle in err, (name, err)
    assert "Traceback" not in err
    assert all(line.startswith("staticsched: error:") for line in err.strip().splitlines()), err
    assert not outdir.exists(), name


def test_bad_input_via_console_script_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    proc = subprocess.run(
        [sys.executable, "-m", "staticsched", "schedule", str(bad), "--hw", "double-buffer-demo",
         "-o", str(tmp_path / "o")], capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "not valid JSON" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_console_script_leaving_its_objects_to_the_os_prints_and_writes_everything(tmp_path):
    # the console script ends with os._exit after a schedule: the summary and the files must
    # be complete, the exit code the command's, through a pipe as on a terminal
    example = Path(__file__).resolve().parents[1] / "examples" / "double_buffer.json"
    proc = subprocess.run(
        [sys.executable, "-m", "staticsched", "schedule", str(example), "--hw", "double-buffer-demo",
         "-o", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verification : clean" in proc.stdout
    # the summary's last section, the gap's, is all there: its last line is the idle times'
    lines = proc.stdout.rstrip().splitlines()
    assert any(line.startswith("gap          :") for line in lines)
    assert lines[-1].lstrip().startswith("idle core x1:")
    assert (tmp_path / "o" / "program.txt").read_text().endswith("\n")


def test_lower_bad_input_leaves_no_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "staticsched.taskgraph", "version": 1, "tensors": {}, "tasks": 3}')
    out_file = tmp_path / "ops.json"
    code, _, err = run_cli(["lower", bad, "--hw", "seed-davinci", "-o", out_file], capsys)
    assert code == 2 and "tasks" in err and not out_file.exists()


def test_early_reference_and_files_rendered_beside_the_verifier_change_nothing(tmp_path, capsys,
                                                                               monkeypatch):
    # a large program's NumPy reference starts beside sync planning and its files render beside
    # the verifier: made to happen here by calling every program large
    from staticsched.emit import files as files_module
    from staticsched.verify import reference as reference_module

    monkeypatch.setattr(files_module, "LARGE_PROGRAM_OPS", 0)
    started = []
    real = reference_module.Reference.__init__

    def spy(self, source, seed, beside):
        started.append(beside)
        real(self, source, seed, beside)

    monkeypatch.setattr(reference_module.Reference, "__init__", spy)
    # and the files that need no program start before it is built
    without: list[bool] = []
    real_start = files_module.start_outputs

    def start(outdir, schedule, program, plan, **kw):
        without.append(program is None)
        return real_start(outdir, schedule, program, plan, **kw)

    monkeypatch.setattr(files_module, "start_outputs", start)
    example = EXAMPLES / "matmul_bias_gelu.json"
    code, out, _ = run_cli(["schedule", example, "--hw", "seed-davinci", "-o", tmp_path / "a", "--quiet"],
                           capsys)
    assert code == 0 and "verification : clean" in out, out
    assert started == [True], "the verifier did not use the reference started early"
    assert without == [True], "the files did not start before the program was built"
    code, _, _ = run_cli(["schedule", example, "--hw", "seed-davinci", "-o", tmp_path / "b", "--quiet",
                          "--no-verify"], capsys)
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir()) and "program.json.gz" in names
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
