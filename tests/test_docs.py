"""The documentation is tested: README.md and every docs/*.md page.

What runs
    Every fenced ``python`` block and every ``sh`` (``bash``, ``shell``) command of a page, in
    the page's order, in one fresh interpreter per page (``tests/docblocks.py run``): the Python
    blocks share one namespace, the commands run with ``bash -c``. The working directory is a
    temporary one holding a copy of ``examples/``, as the docs are written to be run from the
    repository's root; so what the commands write (``out/``, ``bert.json``, ...) never lands
    in the repository.

What is checked
    A block must run without error and a command must exit 0. A statement (or a command line)
    with a ``# prints: TEXT`` comment must print TEXT: white space runs compare as one space,
    ``...`` stands for anything (a timing, a path). Every backticked ``staticsched.x.y`` and every
    name a Python block imports from staticsched must resolve (a module, then its attributes);
    every backticked or run ``staticsched VERB ... --option`` must name a verb and options of
    the CLI's parser, with values among the option's choices.

Markers (HTML comments, one a line, right before the block; each directive gives its reason)
    ``<!-- docs-test: skip: REASON -->`` skips the block;
    ``<!-- docs-test: skip `PREFIX`: REASON -->`` skips the commands of an sh block that start
    with PREFIX (a line ``A && B`` is two commands; a PREFIX that matches none is an error);
    ``<!-- docs-test: mlp FILE...: REASON -->`` writes a small ONNX model to each FILE first,
    for a page's stand-in name (``model.onnx``);
    ``<!-- docs-test: output `PREFIX`: WHAT -->`` before a plain or text block: its lines
    (``<- note``s aside) are lines of what the last command before it starting with PREFIX
    printed, in order, each as ``# prints:`` compares. Skip what installs, runs the whole suite or
    takes more than a few seconds: this test is part of the default suite and must stay cheap.
    ``python tests/docblocks.py`` lists what runs and what is skipped, with the reasons.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from common import EXAMPLES, ROOT
from docblocks import DOCS, Doc, inline_code, matches, parse, steps

from staticsched.cli.args import build_parser

#: the whole page's run: a guard against a hang (each command has its own, in the runner)
PAGE_TIMEOUT = 900
#: the format identifiers (``"format": "staticsched.taskgraph"``): names in the docs, not modules
FORMAT_MODULES = ("staticsched.frontend.taskgraph", "staticsched.model.opgraph",
                  "staticsched.model.program", "staticsched.emit.timetable")
NAME = re.compile(r"(?<![\w./-])staticsched(?:\.[A-Za-z_]\w*)+")


def _docs() -> list[Doc]:
    return [parse(path) for path in DOCS]


def test_markers_are_well_formed() -> None:
    problems = [p for doc in _docs() for p in doc.problems]
    assert not problems, "\n".join(problems)


def test_the_docs_have_python_blocks_and_commands() -> None:
    """The parser finds what is there (a fence it missed would go untested, silently)."""
    docs = {d.path: d for d in _docs()}
    assert "README.md" in docs and "docs/verification.md" in docs
    assert docs["README.md"].python and docs["README.md"].commands
    fences = {path: sum(1 for line in (ROOT / path).read_text().splitlines()
                        if re.match(r"\s*```+\s*(python|sh|bash|shell)\s*$", line)) for path in DOCS}
    assert {p: len(d.python) + len(d.sh) for p, d in docs.items()} == fences


@pytest.mark.parametrize("path", DOCS)
def test_doc_blocks_run(path: str, tmp_path: Path, record_property) -> None:
    doc = parse(path)
    todo = steps(doc)
    skipped = [f"{path}:{b.line - 1} python: {b.skip}" for b in doc.python if b.skip]
    skipped += [f"{path}:{c.line} `{c.text}`: {c.skip}" for c in doc.commands if c.skip]
    record_property("skipped", skipped)
    if not todo:
        return
    if "onnx" in json.dumps(todo) and importlib.util.find_spec("onnx") is None:
        pytest.skip("onnx is not installed (the [onnx] extra): the page imports ONNX models")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(EXAMPLES, work / "examples")
    (tmp_path / "steps.json").write_text(json.dumps(todo))
    results_file = tmp_path / "results.json"
    env = dict(os.environ)
    # `staticsched` and `python` in the commands are this interpreter's; one BLAS thread, as the
    # README advises for numeric replay on a busy machine (the suite runs beside other work)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    # -P: the runner's directory (tests/) is not put on sys.path, so a block sees the modules a
    # user sees, not the tests' helpers
    proc = subprocess.run([sys.executable, "-P", str(ROOT / "tests" / "docblocks.py"), "run",
                           str(ROOT / path), str(tmp_path / "steps.json"), str(results_file)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=PAGE_TIMEOUT,
                          check=False)
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    failed = [r for r in results if not r["ok"]]
    if failed:
        r = failed[0]
        tail = "\n".join(r["output"].splitlines()[-40:])
        pytest.fail(f"{path}:{r['line']}: {r['kind']}: {r['error']}\n--- output (last 40 lines)\n{tail}",
                    pytrace=False)
    assert proc.returncode == 0 and len(results) == len(todo), (
        f"{path}: the runner exited {proc.returncode} after {len(results)} of {len(todo)} steps\n"
        f"{proc.stdout}{proc.stderr}")


def _mentioned_names() -> dict[str, str]:
    """Each ``staticsched.`` name the docs mention -> where first: backticked in the text, or
    imported or used by a Python block."""
    out: dict[str, str] = {}
    for doc in _docs():
        for line, span in inline_code(doc.path):
            for m in NAME.finditer(span):
                out.setdefault(m.group(0), f"{doc.path}:{line}")
        for b in doc.python:
            for node in ast.walk(ast.parse(b.code)):
                where = f"{doc.path}:{b.line + getattr(node, 'lineno', 1) - 1}"
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Attribute):
                    names = [ast.unparse(node)]
                else:
                    continue
                for name in names:
                    if NAME.fullmatch(name):
                        out.setdefault(name, where)
    return out


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module, or a module's attribute (or an attribute's, ...)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:
            # only the name's own prefix may be missing; a module it imports must not be
            if exc.name != ".".join(parts[:i]):
                raise
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_public_names_the_docs_mention_exist() -> None:
    names = _mentioned_names()
    assert "staticsched.verify" in names  # the docs do mention names: the scan finds them
    formats = {importlib.import_module(m).FORMAT for m in FORMAT_MODULES}
    missing = [f"{where}: `{name}`" for name, where in sorted(names.items(), key=lambda kv: kv[1])
               if name not in formats and not _resolves(name)]
    assert not missing, "names the docs mention that do not exist:\n" + "\n".join(missing)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((dict(a.choices) for a in parser._actions
                 if isinstance(a, argparse._SubParsersAction)), {})


def _cli_problems(where: str, usage: str, root: argparse.ArgumentParser) -> list[str]:
    """What ``usage`` (``staticsched VERB [--opt VALUE|VALUE] ...``) says that the parser lacks."""
    words = usage.replace("\\|", "|").replace("[", " ").replace("]", " ").split()
    verbs, parser, rest = _subcommands(root), root, words[1:]
    if rest and not rest[0].startswith("-"):
        if "|" in rest[0]:  # `staticsched lower|schedule|...`: the verbs alone
            return [f"{where}: no verb {v!r}: `{usage}`" for v in rest[0].split("|") if v not in verbs]
        if rest[0] not in verbs:
            return [f"{where}: no verb {rest[0]!r}: `{usage}`"]
        parser, rest = verbs[rest[0]], rest[1:]
        sub = _subcommands(parser)
        if sub and rest and re.fullmatch(r"[a-z]+", rest[0]):  # `staticsched hw show NAME`
            if rest[0] not in sub:
                return [f"{where}: no verb {words[1]} {rest[0]!r}: `{usage}`"]
            parser, rest = sub[rest[0]], rest[1:]
    options = {s: a for a in parser._actions for s in a.option_strings}
    problems = []
    for k, word in enumerate(rest):
        if word.startswith("#"):
            break
        if not re.fullmatch(r"--?[a-z][\w-]*(=\S*)?", word):
            continue
        opt, _, value = word.partition("=")
        if opt not in options:
            problems.append(f"{where}: `{' '.join(words[:2])}` has no option {opt}: `{usage}`")
            continue
        choices = options[opt].choices
        value = value or (rest[k + 1] if k + 1 < len(rest) and not rest[k + 1].startswith("-") else "")
        if choices and value:
            problems += [f"{where}: {opt} has no choice {v!r} (it has {', '.join(map(str, choices))})"
                         for v in value.split("|") if v.islower() and v not in choices]
    return problems


def test_cli_usage_in_the_docs_matches_the_parser() -> None:
    root = build_parser()
    usages = [(f"{doc.path}:{line}", span) for doc in _docs() for line, span in inline_code(doc.path)
              if re.match(r"staticsched [a-z-]", span)]
    usages += [(f"{doc.path}:{c.line}", c.text) for doc in _docs() for c in doc.commands
               if c.text.startswith("staticsched ")]
    assert len(usages) > 20  # the README's command table alone has a dozen
    problems = [p for where, usage in usages for p in _cli_problems(where, usage, root)]
    assert not problems, "\n".join(problems)


def test_matches_reads_ellipses_and_white_space() -> None:
    """The ``# prints:`` comparison: exact but for white space runs, ``...`` anything."""
    assert matches("1060 1060 optimal", "1060 1060 optimal\n")
    assert matches("True verify: OK ...", "True verify: OK\n  cores=6, micro_ops=90\n")
    assert matches("a ... c", "a b\nb c")
    assert not matches("1060 1060 optimal", "1061 1060 optimal")
    assert not matches("True", "True False")
