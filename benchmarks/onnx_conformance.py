"""ONNX's backend test suite on staticsched's backend: pass and skip counts per op, with reasons.

Runs ``tests/onnx/test_backend_suite.py`` (ONNX's own ``onnx.backend.test`` cases: node tests,
pytorch-converted and pytorch-operator models) under pytest with a JUnit XML report, then
tabulates every CPU case by the op types of its model: passed, failed, and skipped with the
first line of the reason. ``--write`` puts the table between the markers of docs/onnx.md and
the list of cases that import (the supported set) into tests/onnx/supported_cases.txt, which
``test_supported_set_is_the_documented_one`` compares against.

    python benchmarks/onnx_conformance.py [--write]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "onnx.md"
SUPPORTED = ROOT / "tests" / "onnx" / "supported_cases.txt"
BEGIN, END = "<!-- conformance:begin -->", "<!-- conformance:end -->"


def case_ops() -> dict[str, list[str]]:
    """Test case name (without the device suffix) -> the op types of its model."""
    import onnx
    from onnx.backend.test.loader import load_model_tests

    out: dict[str, list[str]] = {}
    for kind in ("node", "pytorch-converted", "pytorch-operator", "simple"):
        for case in load_model_tests(kind=kind):
            model = case.model
            if model is None and case.model_dir is not None:
                model = onnx.load(str(Path(case.model_dir) / "model.onnx"))
            if model is None:
                continue
            ops = sorted({n.op_type for n in model.graph.node})
            out[case.name] = ops
    return out


def reason_class(message: str) -> str:
    """The skip reason without its node names and numbers: what the docs group by."""
    msg = message.split("\n")[0]
    msg = re.sub(r"^.*?SkipTest: ", "", msg)
    if "is not supported (supported:" in msg:
        return re.sub(r".*op type ('[^']+') is not supported.*", r"op \1 is not supported", msg)
    msg = re.sub(r"node '[^']*' ", "", msg)
    msg = re.sub(r"'[^']*'", "'…'", msg)
    msg = re.sub(r"\[[-0-9, ?]*\]", "[…]", msg)
    msg = re.sub(r"(?<![A-Za-z_])\d+(\.\d+)?(e-?\d+)?(?![A-Za-z_\d])", "N", msg)
    return msg[:150]


def run_suite() -> dict[str, tuple[str, str]]:
    """Case name -> (outcome, message) for every CPU case."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "suite.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "onnx" / "test_backend_suite.py"), f"--junitxml={xml}"],
                       cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        tree = ET.parse(xml)
    out: dict[str, tuple[str, str]] = {}
    for tc in tree.iter("testcase"):
        name = tc.get("name", "")
        if not name.endswith("_cpu"):
            continue
        name = name[: -len("_cpu")]
        skipped, failed = tc.find("skipped"), tc.find("failure") or tc.find("error")
        if failed is not None:
            out[name] = ("failed", failed.get("message", ""))
        elif skipped is not None:
            out[name] = ("skipped", skipped.get("message", ""))
        else:
            out[name] = ("passed", "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="update docs/onnx.md and tests/onnx/supported_cases.txt")
    args = ap.parse_args()
    ops = case_ops()
    results = run_suite()
    per_op: dict[str, Counter] = defaultdict(Counter)
    reasons: dict[str, Counter] = defaultdict(Counter)
    totals: Counter = Counter()
    for name, (outcome, msg) in sorted(results.items()):
        op = "+".join(ops.get(name, ["?"])) if len(ops.get(name, [])) <= 2 else "(models of 3+ ops)"
        per_op[op][outcome] += 1
        totals[outcome] += 1
        if outcome == "skipped":
            reasons[op][reason_class(msg)] += 1
    lines = [f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped of "
             f"{len(results)} CPU cases (the CUDA variants are skipped by ONNX's runner: no device).", "",
             "| op types of the case | passed | failed | skipped | why skipped (count) |",
             "|---|---|---|---|---|"]
    for op in sorted(per_op, key=lambda o: (-per_op[o]["passed"], o)):
        c = per_op[op]
        why = "; ".join(f"{r} ({n})" for r, n in sorted(reasons[op].items(), key=lambda x: (-x[1], x[0])))
        lines.append(f"| {op} | {c['passed']} | {c['failed']} | {c['skipped']} | {why} |")
    table = "\n".join(lines)
    print(table)
    # supported: imported (passed, failed, or skipped because fp16 cannot hold its inputs)
    supported = sorted(n for n, (o, m) in results.items() if o != "skipped" or "fp16 inputs" in m)
    if args.write:
        text = DOC.read_text()
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        DOC.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
        SUPPORTED.write_text("".join(f"{n}\n" for n in supported))
        print(f"wrote {DOC} and {SUPPORTED} ({len(supported)} supported cases)")


if __name__ == "__main__":
    main()
