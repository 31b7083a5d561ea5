"""Whole models end to end: each ONNX example on each preset, as a user runs it.

For each model and hardware, ``staticsched schedule MODEL.onnx --hw HW -o DIR`` runs in a
fresh process with default options (CP-SAT, rules for fusion, mapping and layouts, the
program verified with numeric replay and jittered replays); the row gives the program's
makespan, the plan's, the lower bound and their ratio, the share of the AICs' MTE2 time spent
converting ND to NZ (split chips), the verification, the end-to-end wall time and the
process's peak RSS (``wait4``'s ``ru_maxrss``). The models are the shipped two
(``examples/onnx``), the GPT-2-small block and the family of block variants
(``examples/onnx/make_examples.py --family all``: pre-/post-LN, RMSNorm, SwiGLU, other
sequence lengths and widths), written to a temporary directory first.

``--reference`` then runs each model once more through ``staticsched.onnx.backend`` on
seeded inputs and compares every output with ``onnx.reference.ReferenceEvaluator`` (the
max error relative to ``max(1, |reference|)``, which docs/onnx.md bounds by 2^-7).
``--write`` puts the table between the markers of README.md. Measure alone on the machine.

    python benchmarks/models.py [--models gpt_block,bert_layer] [--hw seed-davinci,ascend-a2]
                                [--family all|NAMES|none] [--reference] [--write]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- models:begin -->", "<!-- models:end -->"
SHIPPED = ("gpt_block", "bert_layer")
HARDWARE = ("seed-davinci", "ascend-a2")
#: the GPT-2-small block runs on the split chip only by default (the issue's row; on
#: seed-davinci it is the same work on a coupled chip, ``--big-hw`` adds it)
BIG = "gpt2_small_block"


@attrs.frozen
class Row:
    model: str
    hw: str
    makespan: int
    planned: int
    bound: int
    conversions: str
    verified: str
    wall: float
    rss_mib: float

    @property
    def ratio(self) -> float:
        return self.makespan / max(1, self.bound)

    def line(self) -> str:
        return (f"| {self.model} | {self.hw} | {self.makespan:,} | {self.planned:,} | {self.bound:,} | "
                f"{self.ratio:.3f} | {self.conversions} | {self.verified} | {self.wall:.1f} | "
                f"{self.rss_mib:,.0f} |")


HEADER = ("| model | hardware | makespan | plan | lower bound | ratio | ND->NZ share of AIC MTE2 | verified "
          "| wall s | peak RSS MiB |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|")


def _number(pattern: str, text: str) -> int:
    m = re.search(pattern, text, re.M)
    if m is None:
        raise SystemExit(f"the summary has no line matching {pattern!r}:\n{text[-2000:]}")
    return int(m.group(1).replace(",", ""))


def run_one(model: Path, hw: str, out: Path) -> Row:
    """``staticsched schedule`` on ``model`` in a fresh process, timed, its summary parsed."""
    cmd = [sys.executable, "-m", "staticsched", "schedule", str(model), "--hw", hw, "-o", str(out)]
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        text = log.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{text[-3000:]}")
    makespan = _number(r"^makespan\s*: (\d+) cycles", text)
    bound = _number(r"^lower bound\s*: (\d+) cycles", text)
    m = re.search(r"^planned\s*: (\d+) cycles", text, re.M)
    planned = int(m.group(1)) if m else makespan
    conv = re.search(r"^layouts\s*: .*?([\d.]+)% of the AIC MTE2 time", text, re.M)
    none = re.search(r"^layouts\s*: no ND->NZ conversion", text, re.M)
    conversions = f"{conv.group(1)}%" if conv else ("0%" if none else "-")
    ver = re.search(r"^verification : (\S+?),?\s", text, re.M)
    # ru_maxrss is in KiB on Linux
    return Row(model.stem, hw, makespan, planned, bound, conversions, ver.group(1) if ver else "?",
               wall, usage.ru_maxrss / 1024)


def reference_error(model_path: Path, hw: str) -> float:
    """The max output error against ONNX's reference evaluator, relative to max(1, |ref|)."""
    import numpy as np
    import onnx
    from onnx.reference import ReferenceEvaluator

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from onnx_examples import feeds_for

    from staticsched.onnx.backend import StaticschedBackend

    model = onnx.load(str(model_path))
    feeds = feeds_for(model)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = StaticschedBackend.prepare(model, hw=hw).run(feeds)
    return max(float((np.abs(g.astype(np.float64) - w) / np.maximum(1.0, np.abs(w))).max())
               for g, w in zip(got, want, strict=True))


def write_readme(table: str) -> None:
    text = README.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(SHIPPED), help="shipped examples, comma-separated")
    ap.add_argument("--hw", default=",".join(HARDWARE))
    ap.add_argument("--family", default="all",
                    help="family blocks to build and run ('all', comma-separated names, or 'none')")
    ap.add_argument("--big-hw", default="ascend-a2", help=f"the presets {BIG} runs on ('' for none)")
    ap.add_argument("--reference", action="store_true", help="also compare with ONNX's reference evaluator")
    ap.add_argument("--write", action="store_true", help="write the table into README.md")
    args = ap.parse_args()
    hws = [h for h in args.hw.split(",") if h]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        jobs: list[tuple[Path, str]] = []
        for name in filter(None, args.models.split(",")):
            jobs.extend((ROOT / "examples" / "onnx" / f"{name}.onnx", hw) for hw in hws)
        family: list[str] = []
        if args.family != "none":
            subprocess.run([sys.executable, str(ROOT / "examples" / "onnx" / "make_examples.py"),
                            "--outdir", str(work), "--family", args.family], check=True,
                           stdout=subprocess.DEVNULL)
            family = sorted(p.stem for p in work.glob("*.onnx"))
        for name in family:
            presets = [h for h in args.big_hw.split(",") if h] if name == BIG else hws
            jobs.extend((work / f"{name}.onnx", hw) for hw in presets)
        print(HEADER, flush=True)
        rows = []
        for model, hw in jobs:
            row = run_one(model, hw, work / f"out-{model.stem}-{hw}")
            rows.append(row)
            print(row.line(), flush=True)
        if args.reference:
            print("\n| model | hardware | max error / max(1, \\|ref\\|) |\n|---|---|---:|")
            for model, hw in jobs:
                print(f"| {model.stem} | {hw} | {reference_error(model, hw):.2e} |", flush=True)
    if args.write:
        write_readme("\n".join([HEADER, *(r.line() for r in rows)]))


if __name__ == "__main__":
    main()
