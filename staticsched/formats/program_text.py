"""The line-oriented text form of a program (``program.txt``); grammar in docs/program-format.md.

``parse_program_text(dumps_program_text(p)) == p`` for every program the emitter accepts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple, NoReturn

from staticsched.errors import ProgramError
from staticsched.formats import jsonfmt
from staticsched.formats.encoding import (
    ARROW,
    KIND_OF,
    MNEMONIC,
    SEE,
    attr_types,
    check_encodable,
    quote,
    sees_fields,
    sees_from_fields,
)
from staticsched.model.attrcodec import format_attr, parse_attr
from staticsched.model.layouts import LAYOUTS
from staticsched.model.opgraph import Tensor
from staticsched.model.program import (
    CROSS_KINDS,
    FLAG_KINDS,
    FORMAT,
    VERSION,
    Instr,
    ProgItem,
    Program,
    Stream,
)

_HEADER = f"# {FORMAT} {VERSION}: per-pipe instruction streams; grammar in docs/program-format.md"


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) if shape else "-"


def _instr_line(ins: Instr) -> str:
    head = f"  {ins.cycle} {MNEMONIC[ins.kind]}"
    if ins.kind in FLAG_KINDS:
        return f"{head} {quote(ins.src)} {quote(ins.dst)} {ins.event}"
    if ins.kind in CROSS_KINDS:
        return f"{head} {ins.peer_core} {ins.event} mode={ins.mode}" if ins.mode else \
            f"{head} {ins.peer_core} {ins.event}"
    types = attr_types(ins.kind)
    parts = [head, quote(ins.id), str(ins.duration)]
    parts += [quote(r) for r in ins.reads]
    parts.append(ARROW)
    parts += [quote(w) for w in ins.writes]
    parts += [f"{k}={quote(format_attr(types[k], v))}" for k, v in ins.attrs]
    parts += [f"{k}={quote(w)}" for k, w in sees_fields(ins.sees)]
    return " ".join(parts)


def dumps_program_text(program: Program) -> str:
    """The text form of ``program``.

    Raises
    ------
    ProgramError
        If an instruction carries fields its kind does not use (they could not round-trip).
    """
    return "".join(iter_program_text(program))


def iter_program_text(program: Program) -> Iterator[str]:
    """:func:`dumps_program_text`'s text in chunks (the header, then a stream at a time)."""
    check_encodable(program)
    out = [
        _HEADER,
        f"format {FORMAT} {VERSION}",
        f"hw {quote(program.hw)}",
        f"mode {quote(program.mode)}",
        f"makespan {program.makespan}",
    ]
    if program.source:
        out.append(f"source {json.dumps(program.source)}")
    for t in program.tensors:
        scratch = " workspace" if t.workspace else ""
        layout = f" layout={t.layout}" if t.layout != "ND" else ""
        out.append(f"tensor {quote(t.name)} {_dims(t.shape)} {quote(t.dtype)}{scratch}{layout}")
    for it in program.items:
        out.append(
            f"item {quote(it.name)} core={it.core} space={quote(it.space)} offset={it.offset} "
            f"bytes={it.bytes} live={it.live_start}:{it.live_end} dtype={quote(it.dtype)} "
            f"shape={_dims(it.shape)}"
        )
    yield "\n".join(out) + "\n"
    for st in program.streams:
        yield f"stream {st.core} {quote(st.unit)} {len(st.instrs)}\n"
        for k in range(0, len(st.instrs), jsonfmt.BATCH):
            yield "".join(_instr_line(ins) + "\n" for ins in st.instrs[k : k + jsonfmt.BATCH])
    yield "end\n"


# --------------------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"""(?P<key>[!#-<>-~]+)=(?:(?P<qv>"(?:[^"\\]|\\.)*")|(?P<bv>[!#-~]*))(?=\s|\Z)
      | (?P<q>"(?:[^"\\]|\\.)*")(?=\s|\Z)
      | (?P<b>[!#-<>-~]+)(?=\s|\Z)""",
    re.X,
)
_SPACE = re.compile(r"[ \t\r]*")
# printable ASCII (and blanks) without '"': what split() reads the same way as _TOKEN
_PLAIN = re.compile(r"[ !#-~\t\r]*\Z")
_INT = re.compile(r"-?[0-9]+\Z")


class _Tok(NamedTuple):
    """A token: positional (``key == ""``) or ``key=value``; ``quoted`` if written as a string."""

    key: str
    value: str
    quoted: bool


class _Line:
    """The tokens of one line, consumed left to right, with errors naming the line."""

    def __init__(self, number: int, text: str) -> None:
        self.number = number
        self.at = 0
        self.toks: list[_Tok] = []
        if _PLAIN.match(text):
            # no string literal on the line (the usual case): whitespace splits the tokens
            for word in text.split():
                key, eq, value = word.partition("=")
                if eq and not key:
                    self.fail(f"cannot read a token: {word[:20]!r}")
                self.toks.append(_Tok(key, value, False) if eq else _Tok("", word, False))
            return
        pos = 0
        while True:
            space = _SPACE.match(text, pos)
            assert space is not None  # it matches the empty string
            pos = space.end()
            if pos >= len(text):
                break
            m = _TOKEN.match(text, pos)
            if m is None:
                self.fail(f"cannot read a token at column {pos + 1}: {text[pos : pos + 20]!r}")
            if m["key"] is not None:
                raw = m["qv"] if m["qv"] is not None else m["bv"]
                self.toks.append(_Tok(m["key"], self._unquote(raw), m["qv"] is not None))
            elif m["q"] is not None:
                self.toks.append(_Tok("", self._unquote(m["q"]), True))
            else:
                self.toks.append(_Tok("", m["b"], False))
            pos = m.end()

    def fail(self, problem: str) -> NoReturn:
        raise ProgramError(f"line {self.number}: {problem}")

    def _unquote(self, raw: str) -> str:
        if not raw.startswith('"'):
            return raw
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            self.fail(f"bad string literal {raw[:30]!r}: {exc.msg}")
            raise AssertionError from None  # fail() always raises

    def peek(self) -> _Tok | None:
        return self.toks[self.at] if self.at < len(self.toks) else None

    def word(self, what: str) -> str:
        """The next positional token (any string)."""
        tok = self.peek()
        if tok is None or tok.key:
            self.fail(f"expected {what}")
        self.at += 1
        return tok.value

    def integer(self, what: str) -> int:
        tok = self.peek()
        if tok is None or tok.key or tok.quoted or not _INT.match(tok.value):
            self.fail(f"expected {what} (an integer), got {tok.value if tok else 'end of line'!r}")
        self.at += 1
        return int(tok.value)

    def fields(self, keys: tuple[str, ...]) -> dict[str, _Tok]:
        """The remaining ``key=value`` tokens, each key once; exactly ``keys`` unless empty."""
        out: dict[str, _Tok] = {}
        while self.at < len(self.toks):
            tok = self.toks[self.at]
            if not tok.key:
                self.fail(f"unexpected {tok.value!r} after the key=value fields")
            if tok.key in out:
                self.fail(f"field '{tok.key}' given twice")
            if keys and tok.key not in keys:
                self.fail(f"unknown field '{tok.key}' (fields: {', '.join(keys)})")
            out[tok.key] = tok
            self.at += 1
        missing = [k for k in keys if k not in out]
        if missing:
            self.fail(f"missing field(s) {', '.join(missing)}")
        return out

    def end(self) -> None:
        if self.at < len(self.toks):
            tok = self.toks[self.at]
            self.fail(f"unexpected {f'{tok.key}=' if tok.key else ''}{tok.value!r} at the end of the line")

    def int_value(self, tok: _Tok) -> int:
        if tok.quoted or not _INT.match(tok.value):
            self.fail(f"field '{tok.key}' must be an integer, got {tok.value!r}")
        return int(tok.value)

    def dims(self, text: str, what: str) -> tuple[int, ...]:
        if text == "-":
            return ()
        parts = text.split("x")
        if not all(_INT.match(p) for p in parts):
            self.fail(f"{what} must be dimensions like 128x64 (or - for none), got {text!r}")
        return tuple(int(p) for p in parts)


def _parse_instr(line: _Line) -> Instr:
    cycle = line.integer("the issue cycle")
    tok = line.peek()
    if tok is None or tok.key or tok.quoted or tok.value not in KIND_OF:
        line.fail(f"expected a mnemonic ({', '.join(KIND_OF)}), got {tok.value if tok else 'nothing'!r}")
    line.at += 1
    kind = KIND_OF[tok.value]
    if kind in FLAG_KINDS:
        src, dst = line.word("the source pipe"), line.word("the destination pipe")
        ins = Instr(kind, cycle, src=src, dst=dst, event=line.integer("the event id"))
        line.end()
        return ins
    if kind in CROSS_KINDS:
        peer = line.integer("the peer core")
        event = line.integer("the event id")
        mode = line.fields(("mode",)).get("mode")
        return Instr(kind, cycle, event=event, peer_core=peer, mode=mode.value if mode else "")
    op_id = line.word("the op id")
    duration = line.integer("the duration")
    reads, writes = [], []
    names = reads
    while (tok := line.peek()) is not None and not tok.key:
        line.at += 1
        if tok.value == ARROW and not tok.quoted:
            if names is writes:
                line.fail(f"'{ARROW}' given twice")
            names = writes
        else:
            names.append(tok.value)
    if names is reads:
        line.fail(f"expected '{ARROW}' between the reads and the writes")
    types = attr_types(kind)
    attrs_: list[tuple[str, object]] = []
    seen: dict[int, str] = {}
    for key, t in line.fields(()).items():
        if SEE.match(key) and key not in types:
            seen[int(key[3:])] = t.value
            continue
        if key not in types:
            declared = ", ".join(types) or "none"
            line.fail(f"kind '{kind}' has no attribute '{key}' (attributes: {declared})")
        try:
            attrs_.append((key, parse_attr(types[key], t.value)))
        except ValueError as exc:
            line.fail(f"attribute '{key}' must be {types[key]}: {exc}")
    sees = sees_from_fields(seen, len(reads))
    if sees is None:
        line.fail(f"a 'see<k>' field names read #{max(seen)}, but the op has {len(reads)} reads")
    return Instr(kind, cycle, id=op_id, duration=duration, reads=reads, writes=writes, attrs=tuple(attrs_),
                 sees=sees)


def _parse_instr_quick(raw: str) -> Instr | None:
    """The instruction on a line without string literals, or None to leave it (and any error
    message) to the general tokenizer. Accepts exactly what :func:`_parse_instr` accepts."""
    if not _PLAIN.match(raw):
        return None
    w = raw.split()
    if len(w) < 2 or not _INT.match(w[0]) or w[1] not in KIND_OF:
        return None
    kind, cycle = KIND_OF[w[1]], int(w[0])
    if kind in FLAG_KINDS:
        if len(w) != 5 or "=" in w[2] or "=" in w[3] or not _INT.match(w[4]):
            return None
        return Instr(kind, cycle, src=w[2], dst=w[3], event=int(w[4]))
    if kind in CROSS_KINDS:
        if len(w) == 5 and w[4].startswith("mode=") and "=" not in w[4][5:] and '"' not in w[4]:
            mode = w[4][5:]
        elif len(w) == 4:
            mode = ""
        else:
            return None
        if not _INT.match(w[2]) or not _INT.match(w[3]):
            return None
        return Instr(kind, cycle, event=int(w[3]), peer_core=int(w[2]), mode=mode)
    if len(w) < 5 or "=" in w[2] or not _INT.match(w[3]) or ARROW not in w:
        return None
    arrow = w.index(ARROW)
    reads = w[4:arrow]
    writes: list[str] = []
    attrs_: list[tuple[str, object]] = []
    types = attr_types(kind)
    seen: dict[int, str] = {}
    for tok in w[arrow + 1 :]:
        key, eq, value = tok.partition("=")
        if not eq:
            if attrs_ or seen or tok == ARROW:
                return None
            writes.append(tok)
            continue
        if key not in types and SEE.match(key):
            if int(key[3:]) in seen:
                return None
            seen[int(key[3:])] = value
            continue
        if seen or key not in types or any(key == k for k, _ in attrs_):
            return None
        try:
            attrs_.append((key, parse_attr(types[key], value)))
        except ValueError:
            return None
    if arrow < 4 or any("=" in r for r in reads):
        return None
    sees = sees_from_fields(seen, len(reads))
    if sees is None:
        return None
    return Instr(kind, cycle, id=w[2], duration=int(w[3]), reads=reads, writes=writes, attrs=tuple(attrs_),
                 sees=sees)


def parse_program_text(text: str) -> Program:
    """Parse the text form written by :func:`dumps_program_text`.

    Raises
    ------
    ProgramError
        At the first problem, naming the line number and what is wrong.
    """
    header: dict[str, Any] = {}
    tensors: list[Tensor] = []
    items: list[ProgItem] = []
    streams: list[Stream] = []
    lines = text.split("\n")
    n = 0
    ended = False
    seen_format = False

    def content_raw() -> str | None:
        nonlocal n
        while n < len(lines):
            n += 1
            raw = lines[n - 1]
            if raw.strip() and not raw.lstrip().startswith("#"):
                return raw
        return None

    def content() -> _Line | None:
        raw = content_raw()
        return None if raw is None else _Line(n, raw)

    while (line := content()) is not None:
        if ended:
            line.fail("text after 'end'")
        word = line.word("a keyword")
        if not seen_format:
            if word != "format":
                line.fail(f"the first line must be 'format {FORMAT} {VERSION}'")
            fmt, version = line.word("the format name"), line.integer("the version")
            if fmt != FORMAT or version != VERSION:
                line.fail(f"format must be '{FORMAT} {VERSION}', got '{fmt} {version}'")
            line.end()
            seen_format = True
        elif word in ("hw", "mode", "makespan", "source"):
            if word in header:
                line.fail(f"'{word}' given twice")
            header[word] = line.integer("the makespan") if word == "makespan" else line.word(f"the {word}")
            line.end()
        elif word == "tensor":
            name = line.word("the tensor name")
            shape = line.dims(line.word("the tensor shape"), "the tensor shape")
            dtype = line.word("the dtype")
            tok = line.peek()
            scratch = tok is not None and not tok.key and not tok.quoted and tok.value == "workspace"
            line.at += scratch
            layout = "ND"
            tok = line.peek()
            if tok is not None and tok.key == "layout":
                line.at += 1
                if tok.value not in LAYOUTS:
                    line.fail(f"layout must be one of {', '.join(LAYOUTS)}, got {tok.value!r}")
                layout = tok.value
            tensors.append(Tensor(name, shape, dtype, scratch, layout))
            line.end()
        elif word == "item":
            items.append(_parse_item(line))
        elif word == "stream":
            core, unit, count = line.integer("the core"), line.word("the unit"), line.integer("the count")
            line.end()
            instrs = []
            for k in range(count):
                raw = content_raw()
                if raw is None:
                    line.fail(f"stream {core} {unit} announces {count} instructions, the file ends after {k}")
                ins = _parse_instr_quick(raw)
                instrs.append(ins if ins is not None else _parse_instr(_Line(n, raw)))
            streams.append(Stream(core, unit, instrs))
        elif word == "end":
            line.end()
            ended = True
        else:
            line.fail(f"unknown keyword {word!r}")
    last = max(1, len(lines) - (lines[-1] == ""))  # the end of the file
    if not seen_format:
        raise ProgramError(f"line {last}: empty program (no 'format {FORMAT} {VERSION}' line)")
    missing = [k for k in ("hw", "mode", "makespan") if k not in header]
    if missing:
        raise ProgramError(f"line {last}: the header has no {', '.join(missing)} line")
    if not ended:
        raise ProgramError(f"line {last}: the program has no 'end' line (truncated file?)")
    return Program(
        hw=header["hw"],
        mode=header["mode"],
        makespan=header["makespan"],
        tensors=tensors,
        items=items,
        streams=streams,
        source=header.get("source", ""),
    )


_ITEM_FIELDS = ("core", "space", "offset", "bytes", "live", "dtype", "shape")


def _parse_item(line: _Line) -> ProgItem:
    name = line.word("the item name")
    f = line.fields(_ITEM_FIELDS)
    live = f["live"].value.split(":")
    if f["live"].quoted or len(live) != 2 or not all(_INT.match(x) for x in live):
        line.fail(f"field 'live' must be start:end, got {f['live'].value!r}")
    if f["shape"].quoted:
        line.fail(f"field 'shape' must be dimensions like 128x64 (or - for none), got {f['shape'].value!r}")
    return ProgItem(
        name=name,
        core=line.int_value(f["core"]),
        space=f["space"].value,
        offset=line.int_value(f["offset"]),
        bytes=line.int_value(f["bytes"]),
        live_start=int(live[0]),
        live_end=int(live[1]),
        dtype=f["dtype"].value,
        shape=line.dims(f["shape"].value, "field 'shape'"),
    )
