"""What the text and JSON program forms share: mnemonics, name quoting, attribute typing.

Both forms carry exactly the fields an instruction of its kind uses (see
:mod:`staticsched.model.program`); :func:`check_encodable` refuses anything else so that
``parse(emit(p)) == p`` holds for every program the emitters accept.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from staticsched.errors import ProgramError
from staticsched.model.attrcodec import value_ok
from staticsched.model.opkinds import KINDS
from staticsched.model.program import CROSS_MODES, FLAG_KINDS, SYNC_MNEMONICS, Instr, Program

#: the kind of an opaque op (an OpGraph op without a kind)
OPAQUE = "op"

MNEMONIC: dict[str, str] = {
    **{k.name: k.mnemonic for k in KINDS.values()},
    OPAQUE: "OP",
    **SYNC_MNEMONICS,
}
KIND_OF: dict[str, str] = {m: k for k, m in MNEMONIC.items()}
assert len(KIND_OF) == len(MNEMONIC), "two kinds share a mnemonic"

# printable ASCII except space, '"' and '=': such a token needs no quotes in the text form
_BARE = re.compile(r"[!#-<>-~]+\Z")
#: the separator between an op's reads and writes in the text form
ARROW = "->"
#: the text form's field naming the write read ``k`` must see: ``see<k>=OP``
SEE = re.compile(r"see([0-9]+)\Z")


def sees_fields(sees: tuple[str, ...]) -> list[tuple[str, str]]:
    """The ``see<k>`` fields of an instruction's intended writes (reads with one writer have
    none)."""
    return [(f"see{k}", w) for k, w in enumerate(sees) if w]


def sees_from_fields(fields: dict[int, str], reads: int) -> tuple[str, ...] | None:
    """The ``sees`` of an instruction from its ``see<k>`` fields (``k`` -> op id), or None when a
    ``k`` is not a read's position. No field: not recorded, ``()``."""
    if not fields:
        return ()
    if any(k >= reads for k in fields):
        return None
    return tuple(fields.get(k, "") for k in range(reads))


def quote(text: str) -> str:
    """``text`` as one token: bare when that is unambiguous, else a JSON string literal."""
    if _BARE.match(text) and text != ARROW:
        return text
    return json.dumps(text)


_ATTR_TYPES: dict[str, dict[str, str]] = {OPAQUE: {}, **{k.name: k.attr_types for k in KINDS.values()}}
_NO_ATTRS: dict[str, str] = {}


def attr_types(kind: str) -> dict[str, str]:
    """Declared attribute types of a micro-op kind (none for opaque and sync kinds)."""
    return _ATTR_TYPES.get(kind, _NO_ATTRS)


def check_encodable(program: Program) -> None:
    """Refuse instructions that carry fields their kind does not use.

    Raises
    ------
    ProgramError
        One line per offending instruction, naming the stream, index and field.
    """
    lines: list[str] = []
    for st in program.streams:
        for n, ins in enumerate(st.instrs):
            problems = _instr_problems(ins)
            if problems:
                where = f"stream core {st.core} unit {st.unit!r} instr {n} ({ins.kind} {ins.id!r})"
                lines.extend(f"{where}: {problem}" for problem in problems)
    if lines:
        raise ProgramError(lines)


@functools.lru_cache(maxsize=4096)
def _attrs_ok(kind: str, attributes: tuple[tuple[str, Any], ...]) -> bool:
    # a chip's moves, products and vector ops repeat a few attribute sets 10^4 times each
    types = _ATTR_TYPES[kind]
    return len(attributes) == len({k for k, _ in attributes}) and all(
        k in types and value_ok(types[k], v) for k, v in attributes)


def _instr_problems(ins: Instr) -> list[str]:
    if ins.kind not in MNEMONIC:
        return [f"unknown kind {ins.kind!r}"]
    if ins.is_bare_sync:
        # the general path below, in short
        if ins.kind in FLAG_KINDS:
            if ins.peer_core == -1 and not ins.mode:
                return []
        elif not ins.src and not ins.dst and (not ins.mode or ins.mode in CROSS_MODES):
            return []
    unused: list[str] = []
    if ins.sees and len(ins.sees) != len(ins.reads):
        return [f"'sees' names {len(ins.sees)} writers for {len(ins.reads)} reads"]
    if (ins.kind in _ATTR_TYPES and not ins.src and not ins.dst and ins.event == -1 and ins.peer_core == -1
            and not ins.mode and _attrs_ok(ins.kind, ins.attrs)):
        # the common micro-op: only its attributes needed a closer look
        return []
    if ins.is_sync:
        unused = [f for f, bad in (("id", ins.id), ("duration", ins.duration)) if bad]
        unused += [f for f in ("reads", "writes", "attrs", "sees") if getattr(ins, f)]
        if ins.kind.endswith("_flag"):
            unused += ["peer_core"] if ins.peer_core != -1 else []
            unused += ["mode"] if ins.mode else []
        else:
            unused += [f for f in ("src", "dst") if getattr(ins, f)]
            if ins.mode and ins.mode not in CROSS_MODES:
                return [f"mode {ins.mode!r} is not a cross-core flag mode ({', '.join(CROSS_MODES)})"]
    else:
        unused = [f for f in ("src", "dst", "mode") if getattr(ins, f)]
        unused += [f for f in ("event", "peer_core") if getattr(ins, f) != -1]
    out = [f"field '{f}' is not used by kind {ins.kind!r}" for f in unused]
    types = attr_types(ins.kind)
    seen: set[str] = set()
    for key, value in ins.attrs:
        if key in seen:
            out.append(f"attribute '{key}' given twice")
        seen.add(key)
        if key not in types:
            out.append(f"attribute '{key}' is not declared by kind {ins.kind!r}")
        elif not value_ok(types[key], value):
            out.append(f"attribute '{key}' must be {types[key]}, got {value!r}")
    return out


