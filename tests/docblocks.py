"""The fenced blocks of the documentation, their ``docs-test`` markers, and a runner for them.

Two roles in one file, because the runner starts with ``-P`` (the tests' directory is not on
its ``sys.path``, so that the blocks see what a user sees) and so can import no sibling:

- parsing (``parse``, ``steps``, ``inline_code``), used by ``test_docs.py`` and by
  ``python tests/docblocks.py`` (without arguments: what the docs test runs and skips, per file);
- running (``python -P tests/docblocks.py run DOC.md STEPS.json RESULTS.json``): one fresh
  interpreter per document executes its steps in order, its Python blocks sharing one namespace.

It imports the standard library only (``write_mlp`` imports NumPy and ONNX when a marker asks
for a model), so a broken package shows as a failing block, not as a runner that cannot start.

The conventions (``test_docs.py`` states them for the doc writer):

- A ``python`` block runs statement by statement; a statement with a ``# prints: TEXT`` comment
  must print TEXT (white space runs are one space, ``...`` stands for anything).
- An ``sh`` (``bash``, ``shell``) block's lines are commands for ``bash -c``; a line may be
  ``A && B``, and each of A and B is a command to count and skip on its own. Empty lines and
  lines that are only a comment are not commands; a ``# prints: TEXT`` comment works as above.
- Markers are HTML comments, alone on their lines, right before a block (blank lines between
  are fine): ``<!-- docs-test: DIRECTIVE: REASON -->``, every directive with its reason:
  ``skip: REASON`` skips the block, ``skip `PREFIX`: REASON`` the commands of an sh block that
  start with PREFIX, and ``mlp FILE...: REASON`` writes a small ONNX model to each FILE in the
  working directory before the block runs (for a doc's stand-in name such as ``model.onnx``).
  Before a plain or ``text`` block, ``output `PREFIX`: WHAT`` says the block is an excerpt of
  what the last command before it that starts with PREFIX printed: each of its lines, ``<-``
  notes aside, must match a line of that output, in order (``...`` as above).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import subprocess
import sys
import tokenize
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: what the docs test reads: the README and every page of docs/
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))

SH_LANGS = frozenset({"sh", "bash", "shell"})
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
MARKER_START = re.compile(r"<!--\s*docs-test\b")
DIRECTIVE = re.compile(r"^(?P<kind>skip|mlp|output)(?:\s+(?P<arg>[^:]+?))?\s*:\s*(?P<reason>\S.*)$")
PRINTS = re.compile(r"#\s*prints:\s*(?P<text>.*?)\s*$")
#: an output excerpt's note: from ``<-`` to the end of its line
NOTE = re.compile(r"\s*<-.*$")
#: per sh command: a guard against a hang, not a speed limit (a slow command is marked instead)
COMMAND_TIMEOUT = 300


@dataclass(frozen=True)
class Marker:
    """One ``docs-test`` directive: its kind, its argument (a skip's prefix, mlp's file names)
    and why."""

    kind: str
    arg: str
    reason: str
    line: int


@dataclass(frozen=True)
class Command:
    """One command of an sh block: where it stands, its text, and the reason if skipped."""

    line: int
    text: str
    skip: str | None


@dataclass(frozen=True)
class Block:
    """A fenced block of a document: its language, its first code line (1-based, in the
    document), its text and the markers before it."""

    lang: str
    line: int
    code: str
    markers: tuple[Marker, ...]

    @property
    def skip(self) -> str | None:
        """The reason of a whole-block skip, None if the block runs."""
        return next((m.reason for m in self.markers if m.kind == "skip" and not m.arg), None)


@dataclass
class Doc:
    """A document's blocks and what is wrong with its markers (one line per problem)."""

    path: str
    blocks: list[Block] = field(default_factory=list)
    #: every command of the sh blocks, in order, each with its skip reason if any
    commands: list[Command] = field(default_factory=list)
    #: each output excerpt and the command whose output it shows
    outputs: list[tuple[Block, Command]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def python(self) -> list[Block]:
        """The Python blocks."""
        return [b for b in self.blocks if b.lang == "python"]

    @property
    def sh(self) -> list[Block]:
        """The shell blocks."""
        return [b for b in self.blocks if b.lang in SH_LANGS]


def parse(path: str) -> Doc:
    """The fenced blocks of ``path`` (relative to the repository) and their markers."""
    doc = Doc(path)
    lines = (ROOT / path).read_text().splitlines()
    pending: list[Marker] = []
    i = 0
    while i < len(lines):
        text = lines[i]
        m = FENCE.match(text)
        if m:
            close = re.compile(rf"^\s*{re.escape(m['fence'][0])}{{{len(m['fence'])},}}\s*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            body = [ln[len(m["indent"]):] if ln.startswith(m["indent"]) else ln for ln in lines[i + 1:j]]
            lang = m["lang"].lower()
            if lang == "console":
                doc.problems.append(f"{path}:{i + 1}: a console block: write it as sh (commands only)")
            runs = lang == "python" or lang in SH_LANGS
            if any((mk.kind == "output") == runs for mk in pending):
                doc.problems.append(f"{path}:{i + 1}: docs-test markers before a {lang or 'plain'} block "
                                    "(output goes before a plain or text block, the others before "
                                    "python or sh)")
            doc.blocks.append(Block(lang, i + 2, "\n".join(body) + "\n", tuple(pending)))
            pending = []
            i = j + 1
            continue
        mk = MARKER.match(text)
        if mk:
            pending.append(_directive(mk["body"], i + 1, doc))
        elif MARKER_START.search(text):
            doc.problems.append(f"{path}:{i + 1}: a docs-test marker is one line: <!-- docs-test: ... -->")
        elif text.strip() and pending:
            doc.problems.append(f"{path}:{pending[0].line}: docs-test marker not right before a block")
            pending = []
        i += 1
    if pending:
        doc.problems.append(f"{path}:{pending[0].line}: docs-test marker not right before a block")
    for b in doc.sh:
        doc.commands += block_commands(b, doc.problems, path)
    for b in doc.blocks:
        for m in (m for m in b.markers if m.kind == "output"):
            before = [c for c in doc.commands if c.line < b.line and c.text.startswith(m.arg)]
            if not before:
                doc.problems.append(f"{path}:{m.line}: output `{m.arg}`: no command before it starts so")
            elif before[-1].skip:
                doc.problems.append(f"{path}:{m.line}: output `{m.arg}`: the command is skipped")
            else:
                doc.outputs.append((b, before[-1]))
    return doc


def _directive(body: str, line: int, doc: Doc) -> Marker:
    m = DIRECTIVE.match(body)
    if not m:
        doc.problems.append(f"{doc.path}:{line}: unknown docs-test directive {body!r} (skip: REASON, "
                            "skip `PREFIX`: REASON, mlp FILE...: REASON, output `PREFIX`: WHAT)")
        return Marker("invalid", "", "", line)
    arg = (m["arg"] or "").strip()
    takes_prefix = m["kind"] == "output" or (m["kind"] == "skip" and arg)
    if takes_prefix and not (len(arg) > 2 and arg[0] == arg[-1] == "`"):
        doc.problems.append(f"{doc.path}:{line}: the prefix goes in backticks: {m['kind']} `PREFIX`: ...")
    if m["kind"] == "mlp" and not arg:
        doc.problems.append(f"{doc.path}:{line}: mlp names the files to write: mlp FILE...: REASON")
    return Marker(m["kind"], arg.strip("`"), m["reason"], line)


def block_commands(block: Block, problems: list[str], path: str) -> list[Command]:
    """The commands of an sh block; a prefix marker that skips none of them is a problem (it
    has gone stale)."""
    prefixes = [m for m in block.markers if m.kind == "skip" and m.arg]
    used: set[int] = set()
    out: list[Command] = []
    for k, raw in enumerate(block.code.splitlines()):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        for part in (p.strip() for p in text.split(" && ")):
            reason = block.skip
            for n, m in enumerate(prefixes):
                if part.startswith(m.arg):
                    used.add(n)
                    reason = reason or m.reason
            out.append(Command(block.line + k, part, reason))
    for n, m in enumerate(prefixes):
        if n not in used:
            problems.append(f"{path}:{m.line}: skip `{m.arg}` matches no command of the block")
    return out


def steps(doc: Doc) -> list[dict]:
    """What the runner does for ``doc``, in document order (JSON-ready): the Python blocks, the
    sh command lines with their skipped parts left out, the files mlp markers write, and the
    output excerpts to compare."""
    out: list[dict] = []
    commands: dict[int, list[Command]] = {}
    for c in doc.commands:
        commands.setdefault(c.line, []).append(c)
    for b in doc.blocks:
        out += [{"kind": "output", "line": b.line, "of": c.line, "text": b.code}
                for block, c in doc.outputs if block is b]
        if b.lang != "python" and b.lang not in SH_LANGS:
            continue
        for m in b.markers:
            if m.kind == "mlp" and b.skip is None:
                out.append({"kind": "mlp", "line": m.line, "files": m.arg.split()})
        if b.lang == "python":
            if b.skip is None:
                out.append({"kind": "python", "line": b.line, "code": b.code})
            continue
        for line in sorted(n for n in commands if b.line <= n < b.line + b.code.count("\n")):
            run = [c.text for c in commands[line] if c.skip is None]
            if run:
                out.append({"kind": "sh", "line": line, "command": " && ".join(run)})
    return out


def inline_code(path: str) -> list[tuple[int, str]]:
    """The inline code spans of ``path`` outside fenced blocks, with their line numbers."""
    out: list[tuple[int, str]] = []
    in_fence = None
    for n, text in enumerate((ROOT / path).read_text().splitlines(), 1):
        m = FENCE.match(text)
        if m and in_fence is None:
            in_fence = m["fence"][0]
            continue
        if in_fence is not None:
            if text.strip().startswith(in_fence * 3):
                in_fence = None
            continue
        out += [(n, span) for span in re.findall(r"`([^`]+)`", text)]
    return out


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` says, white space runs being one space and
    ``...`` anything (a volatile part, or the rest of a line: the space before it is optional)."""
    parts = re.split(r"\s*\.\.\.\s*", " ".join(expected.split()))
    pattern = ".*?".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, " ".join(actual.split()), re.DOTALL) is not None


def excerpt_missing(excerpt: str, output: str) -> str | None:
    """The first line of ``excerpt`` that ``output`` lacks, None if every one matches a line of
    it (as :func:`matches` does), in order; notes (``<- ...``) and the lines left empty without
    them do not count."""
    lines = iter(output.splitlines())
    for want in (NOTE.sub("", ln) for ln in excerpt.splitlines()):
        if want.strip() and not any(matches(want, got) for got in lines):
            return want
    return None


# --- the runner (in a fresh interpreter, the document's working directory as cwd) -------------


def _prints(code: str, first_line: int) -> dict[int, str]:
    """Document line -> the text of the ``# prints:`` comment on it."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        m = PRINTS.match(tok.string) if tok.type == tokenize.COMMENT else None
        if m:
            out[first_line + tok.start[0] - 1] = m["text"]
    return out


def _run_python(step: dict, doc: Path, namespace: dict) -> dict:
    """Run a Python block statement by statement, comparing each ``# prints:`` with what its
    statement printed."""
    tree = ast.parse(step["code"], str(doc))
    ast.increment_lineno(tree, step["line"] - 1)  # tracebacks point into the document
    expected = _prints(step["code"], step["line"])
    output = []
    for stmt in tree.body:
        buf = io.StringIO()
        line = stmt.lineno
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(ast.Module([stmt], []), str(doc), "exec"), namespace)
        except BaseException as exc:  # the block's error, shown from its own frame on
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__ and exc.__traceback__.tb_next)
            return {"ok": False, "line": line, "output": "".join(output) + buf.getvalue(),
                    "error": "".join(tb)}
        output.append(buf.getvalue())
        want = next((expected[n] for n in range(stmt.lineno, (stmt.end_lineno or line) + 1)
                     if n in expected), None)
        if want is not None and not matches(want, buf.getvalue()):
            return {"ok": False, "line": line, "output": "".join(output),
                    "error": f"prints {buf.getvalue()!r}, the doc says {want!r}"}
    return {"ok": True, "line": step["line"], "output": "".join(output)}


def _run_sh(step: dict) -> dict:
    """Run one command line with ``bash -c``: it must exit 0 and print what its ``# prints:`` says."""
    try:
        proc = subprocess.run(["bash", "-c", step["command"]], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "line": step["line"], "output": "",
                "error": f"did not finish in {COMMAND_TIMEOUT} s: mark it skip with the reason"}
    out = {"ok": proc.returncode == 0, "line": step["line"], "output": proc.stdout + proc.stderr,
           "stdout": proc.stdout}
    if proc.returncode:
        out["error"] = f"`{step['command']}` exited {proc.returncode}"
    m = PRINTS.search(step["command"])
    if proc.returncode == 0 and m and not matches(m["text"], proc.stdout):
        out.update(ok=False, error=f"prints {proc.stdout!r}, the doc says {m['text']!r}")
    return out


def write_mlp(path: Path) -> None:
    """A small ONNX model with one input (MatMul, bias Add, Tanh on [32, 64]), what a doc's
    stand-in model name gets: no attention, so every dtype imports it."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.2, (64, 64)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 0.2, (64,)).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Tanh", ["hb"], ["y"], name="tanh")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def run(doc: Path, steps_file: Path, results_file: Path) -> None:
    """Run a document's steps in order, stopping at the first failure (later blocks build on
    earlier ones); one result per step run goes to ``results_file``."""
    namespace: dict = {"__name__": "__main__"}
    results: list[dict] = []
    stdout: dict[int, str] = {}  # each command line's, for the output excerpts after it
    for step in json.loads(steps_file.read_text()):
        if step["kind"] == "python":
            res = _run_python(step, doc, namespace)
        elif step["kind"] == "sh":
            res = _run_sh(step)
            stdout[step["line"]] = res.pop("stdout", "")
        elif step["kind"] == "output":
            missing = excerpt_missing(step["text"], stdout[step["of"]])
            res = {"ok": missing is None, "line": step["line"], "output": stdout[step["of"]]}
            if missing is not None:
                res["error"] = (f"the output of line {step['of']} has no line {missing.strip()!r} "
                                "(after the lines before it)")
        else:
            try:
                for name in step["files"]:
                    write_mlp(Path(name))
                res = {"ok": True, "line": step["line"], "output": ""}
            except Exception:
                res = {"ok": False, "line": step["line"], "output": "", "error": traceback.format_exc()}
        results.append({"kind": step["kind"], **res})
        results_file.write_text(json.dumps(results))  # what ran so far, should the process die
        if not res["ok"]:
            break


def summary() -> str:
    """Per document: the Python blocks and sh commands found, run and skipped (with why)."""
    lines = []
    for path in DOCS:
        doc = parse(path)
        ran = sum(c.skip is None for c in doc.commands)
        py_run = sum(b.skip is None for b in doc.python)
        lines.append(f"{path}: python {py_run}/{len(doc.python)} run, sh {ran}/{len(doc.commands)} run, "
                     f"{len(doc.outputs)} output excerpt(s)")
        lines += [f"  skipped {path}:{b.line - 1} python block: {b.skip}" for b in doc.python if b.skip]
        lines += [f"  skipped {path}:{c.line} `{c.text}`: {c.skip}" for c in doc.commands if c.skip]
        lines += [f"  problem {p}" for p in doc.problems]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        run(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        print(summary())
