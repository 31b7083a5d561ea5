"""The JSON form of a program (``program.json``): ``{"format": "staticsched.program", "version": 1}``.

``program_from_dict(program_to_dict(p)) == p`` for every program the emitter accepts; an
instruction lists only the fields that differ from their defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _q
from typing import Any

import attrs

from staticsched._fields import Problems, check_keys, get_bool, get_int, get_list, get_str, get_str_list
from staticsched.errors import ProgramError
from staticsched.formats import jsonfmt
from staticsched.formats.encoding import MNEMONIC, attr_types, check_encodable
from staticsched.formats.jsonfmt import dumps_json, encode
from staticsched.model.attrcodec import attr_from_json
from staticsched.model.layouts import LAYOUTS
from staticsched.model.opgraph import Tensor, attrs_to_json, operands_to_json
from staticsched.model.program import FORMAT, VERSION, Instr, ProgItem, Program, Stream

_INSTR_DEFAULTS = {
    "id": "",
    "duration": 0,
    "reads": (),
    "writes": (),
    "attrs": (),
    "src": "",
    "dst": "",
    "event": -1,
    "peer_core": -1,
    "sees": (),
    "mode": "",
}


def _instr_to_dict(ins: Instr) -> dict[str, Any]:
    # field by field rather than by reflection: this runs once per instruction (10^5 and more)
    out: dict[str, Any] = {"cycle": ins.cycle, "kind": ins.kind}
    if ins.id:
        out["id"] = ins.id
    if ins.duration:
        out["duration"] = ins.duration
    operands_to_json(out, ins.reads, ins.writes, ins.attrs, attr_types(ins.kind))
    if ins.src:
        out["src"] = ins.src
    if ins.dst:
        out["dst"] = ins.dst
    if ins.event != -1:
        out["event"] = ins.event
    if ins.peer_core != -1:
        out["peer_core"] = ins.peer_core
    if ins.sees:
        out["sees"] = list(ins.sees)
    if ins.mode:
        out["mode"] = ins.mode
    return out


def program_to_dict(program: Program) -> dict[str, Any]:
    """The JSON form of ``program`` (a dict of JSON values, keys in a fixed order).

    Raises
    ------
    ProgramError
        If an instruction carries fields its kind does not use.
    """
    check_encodable(program)
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "hw": program.hw,
        "mode": program.mode,
        "makespan": program.makespan,
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                     **({"workspace": True} if t.workspace else {}),
                     **({"layout": t.layout} if t.layout != "ND" else {})} for t in program.tensors],
        "items": [
            {
                "name": it.name,
                "core": it.core,
                "space": it.space,
                "offset": it.offset,
                "bytes": it.bytes,
                "live_start": it.live_start,
                "live_end": it.live_end,
                "dtype": it.dtype,
                "shape": list(it.shape),
            }
            for it in program.items
        ],
        "streams": [
            {"core": st.core, "unit": st.unit, "instrs": [_instr_to_dict(i) for i in st.instrs]}
            for st in program.streams
        ],
    }
    if program.source:
        out["source"] = program.source
    return out


def _instr_json(ins: Instr) -> str:
    """``_instr_to_dict(ins)`` as JSON text, built directly: at 10^5-10^6 instructions a dict
    per instruction and a generic encoder cost several times more. A set or wait (two thirds
    of a chip's instructions) differs from thousands of others only in its cycle: the rest of
    its text is made once per distinct flag."""
    head = f'{{"cycle": {int(ins.cycle)}, '
    if ins.is_bare_sync:
        return head + _sync_tail(ins.kind, ins.src, ins.dst, ins.event, ins.peer_core, ins.mode)
    return head + _tail(ins)


@functools.lru_cache(maxsize=4096)
def _sync_tail(kind: str, src: str, dst: str, event: int, peer_core: int, mode: str) -> str:
    return _tail(Instr(kind, 0, src=src, dst=dst, event=event, peer_core=peer_core, mode=mode))


def _tail(ins: Instr) -> str:
    """The text of ``ins`` after its cycle."""
    parts = [f'"kind": {_q(ins.kind)}']
    if ins.id:
        parts.append(f'"id": {_q(ins.id)}')
    if ins.duration:
        parts.append(f'"duration": {int(ins.duration)}')
    if ins.reads:
        parts.append(f'"reads": [{", ".join(map(_q, ins.reads))}]')
    if ins.writes:
        parts.append(f'"writes": [{", ".join(map(_q, ins.writes))}]')
    if ins.attrs:
        parts.append('"attrs": ' + _attrs_text(ins.kind, ins.attrs))
    if ins.src:
        parts.append(f'"src": {_q(ins.src)}')
    if ins.dst:
        parts.append(f'"dst": {_q(ins.dst)}')
    if ins.event != -1:
        parts.append(f'"event": {int(ins.event)}')
    if ins.peer_core != -1:
        parts.append(f'"peer_core": {int(ins.peer_core)}')
    if ins.sees:
        parts.append(f'"sees": [{", ".join(map(_q, ins.sees))}]')
    if ins.mode:
        parts.append(f'"mode": {_q(ins.mode)}')
    return ", ".join(parts) + "}"


@functools.lru_cache(maxsize=4096)
def _attrs_text(kind: str, attributes: tuple[tuple[str, Any], ...]) -> str:
    # a chip's moves, products and vector ops repeat a few attribute sets 10^4 times each
    return encode(attrs_to_json(attr_types(kind), attributes))


def dumps_program_json(program: Program) -> str:
    """``program`` as JSON text, one item and one instruction per line (the same JSON as
    :func:`program_to_dict`)."""
    return "".join(iter_program_json(program))


def iter_program_json(program: Program) -> Iterator[str]:
    """:func:`dumps_program_json`'s text in chunks of at most :data:`.jsonfmt.BATCH`
    instructions."""
    check_encodable(program)
    head = program_to_dict(attrs.evolve(program, streams=()))
    del head["streams"]
    source = head.pop("source", None)
    text = dumps_json(head)
    yield text[: text.rindex("\n}")] + ',\n "streams": ['
    for n, st in enumerate(program.streams):
        yield f'\n  {{"core": {int(st.core)}, "unit": {_q(st.unit)}, "instrs": '
        if not st.instrs:
            yield "[]"
        for k in range(0, len(st.instrs), jsonfmt.BATCH):
            batch = ",\n   ".join(map(_instr_json, st.instrs[k : k + jsonfmt.BATCH]))
            yield ("[\n   " if k == 0 else ",\n   ") + batch
        if st.instrs:
            yield "\n  ]"
        yield "}" + ("," if n + 1 < len(program.streams) else "")
    yield "\n ]" + (f',\n "source": {_q(source)}' if source is not None else "") + "\n}\n"


def _int_list(obj: dict, key: str, where: str, pr: Problems) -> tuple[int, ...]:
    values = get_list(obj, key, where, pr, default=[])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        pr.add(f"{where}: '{key}' must be a list of integers, got {values!r}")
        return ()
    return tuple(values)


_INSTR_KEYS = frozenset(("cycle", "kind", *_INSTR_DEFAULTS))


def _names(value: Any) -> bool:
    return type(value) is list and all(type(name) is str for name in value)


def _instr_from_dict_quick(body: Any) -> Instr | None:
    """The instruction of a well-formed record, or None to leave it (and the error messages)
    to :func:`_instr_from_dict`; accepts exactly what that accepts without a problem. Plain
    field-by-field checks: this runs once per instruction."""
    if type(body) is not dict or not _INSTR_KEYS.issuperset(body):
        return None
    get = body.get
    kind, cycle, id_, src, dst = get("kind"), get("cycle"), get("id", ""), get("src", ""), get("dst", "")
    duration, event, peer = get("duration", 0), get("event", -1), get("peer_core", -1)
    reads, writes, raw, sees = get("reads", []), get("writes", []), get("attrs", {}), get("sees", [])
    mode = get("mode", "")
    if (
        type(mode) is not str
        or
        type(kind) is not str
        or kind not in MNEMONIC
        or type(cycle) is not int
        or type(id_) is not str
        or type(src) is not str
        or type(dst) is not str
        or type(duration) is not int
        or type(event) is not int
        or type(peer) is not int
        or not _names(reads)
        or not _names(writes)
        or type(raw) is not dict
        or not _names(sees)
        or (sees and len(sees) != len(reads))
    ):
        return None
    attrs_: tuple = ()
    if raw:
        types = attr_types(kind)
        try:
            attrs_ = tuple((k, attr_from_json(types[k], v)) for k, v in raw.items())
        except (KeyError, ValueError):
            return None
    return Instr(kind, cycle, id_, duration, reads, writes, attrs_, src, dst, event, peer, sees, mode)


def _interned(body: Any, seen: dict[tuple, Instr]) -> Instr | None:
    """:func:`_instr_from_dict_quick`, made once per distinct record of scalars: a chip's
    identical cores repeat every set and wait, cycle included. The key holds the values'
    types, so ``1`` and ``True`` (equal in Python, not in the format) are different records."""
    if type(body) is not dict:
        return None
    try:
        key = (tuple(body.items()), tuple(map(type, body.values())))
        got = seen.get(key)
    except TypeError:  # a list or object inside: an op's record, made each time
        return _instr_from_dict_quick(body)
    if got is None:
        got = _instr_from_dict_quick(body)
        if got is not None:
            seen[key] = got
    return got


def _instr_from_dict(body: Any, where: str, pr: Problems) -> Instr | None:
    fast = _instr_from_dict_quick(body)
    if fast is not None:
        return fast
    if not isinstance(body, dict):
        pr.add(f"{where}: must be an object")
        return None
    check_keys(body, ("cycle", "kind", *_INSTR_DEFAULTS), where, pr)
    kind = get_str(body, "kind", where, pr)
    if kind and kind not in MNEMONIC:
        pr.add(f"{where}: unknown kind {kind!r} (kinds: {', '.join(MNEMONIC)})")
        return None
    types = attr_types(kind)
    raw_attrs = body.get("attrs", {})
    attrs_: list[tuple[str, Any]] = []
    if not isinstance(raw_attrs, dict):
        pr.add(f"{where}: 'attrs' must be an object")
    else:
        for key, value in raw_attrs.items():
            if key not in types:
                pr.add(f"{where}: kind {kind!r} has no attribute '{key}'")
                continue
            try:
                attrs_.append((key, attr_from_json(types[key], value)))
            except ValueError as exc:
                pr.add(f"{where}: attribute '{key}' {exc}")
    reads = get_str_list(body, "reads", where, pr)
    sees = get_str_list(body, "sees", where, pr)
    if sees and len(sees) != len(reads):
        pr.add(f"{where}: 'sees' names {len(sees)} writers for {len(reads)} reads")
        sees = []
    return Instr(
        kind=kind,
        cycle=get_int(body, "cycle", where, pr),
        id=get_str(body, "id", where, pr, default=""),
        duration=get_int(body, "duration", where, pr, default=0),
        reads=reads,
        sees=sees,
        writes=get_str_list(body, "writes", where, pr),
        attrs=tuple(attrs_),
        src=get_str(body, "src", where, pr, default=""),
        dst=get_str(body, "dst", where, pr, default=""),
        event=get_int(body, "event", where, pr, default=-1),
        peer_core=get_int(body, "peer_core", where, pr, default=-1),
        mode=get_str(body, "mode", where, pr, default=""),
    )


def program_from_dict(data: Any, where: str = "<program>") -> Program:
    """Build a :class:`Program` from its decoded JSON form, reporting every problem at once.

    Raises
    ------
    ProgramError
        One line per problem, naming the stream/instruction index or item and the key.
    """
    pr = Problems()
    if not isinstance(data, dict):
        raise ProgramError(f"{where}: top level must be an object")
    check_keys(
        data,
        ("format", "version", "hw", "mode", "makespan", "tensors", "items", "streams", "source"),
        where,
        pr,
    )
    if data.get("format") != FORMAT:
        pr.add(f"{where}: 'format' must be '{FORMAT}', got {data.get('format')!r}")
    get_int(data, "version", where, pr, minimum=VERSION, maximum=VERSION)
    tensors = []
    for n, body in enumerate(get_list(data, "tensors", where, pr, default=[])):
        w = f"{where}: tensors[{n}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        check_keys(body, ("name", "shape", "dtype", "workspace", "layout"), w, pr)
        tensors.append(
            Tensor(
                get_str(body, "name", w, pr), _int_list(body, "shape", w, pr), get_str(body, "dtype", w, pr),
                get_bool(body, "workspace", w, pr, default=False),
                get_str(body, "layout", w, pr, default="ND", choices=list(LAYOUTS)) or "ND",
            )
        )
    items = []
    for n, body in enumerate(get_list(data, "items", where, pr, default=[])):
        w = f"{where}: items[{n}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        check_keys(
            body,
            ("name", "core", "space", "offset", "bytes", "live_start", "live_end", "dtype", "shape"),
            w,
            pr,
        )
        items.append(
            ProgItem(
                name=get_str(body, "name", w, pr),
                core=get_int(body, "core", w, pr),
                space=get_str(body, "space", w, pr),
                offset=get_int(body, "offset", w, pr),
                bytes=get_int(body, "bytes", w, pr),
                live_start=get_int(body, "live_start", w, pr),
                live_end=get_int(body, "live_end", w, pr),
                dtype=get_str(body, "dtype", w, pr, default=""),
                shape=_int_list(body, "shape", w, pr),
            )
        )
    streams = []
    seen: dict[tuple, Instr] = {}
    for n, body in enumerate(get_list(data, "streams", where, pr, default=[])):
        w = f"{where}: streams[{n}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        check_keys(body, ("core", "unit", "instrs"), w, pr)
        # the record's place is only formatted for a record the quick path leaves
        instrs = [
            _interned(ib, seen) or _instr_from_dict(ib, f"{w}.instrs[{k}]", pr)
            for k, ib in enumerate(get_list(body, "instrs", w, pr))
        ]
        streams.append(
            Stream(get_int(body, "core", w, pr), get_str(body, "unit", w, pr), [i for i in instrs if i])
        )
    source = get_str(data, "source", where, pr, default="")
    program = Program(
        hw=get_str(data, "hw", where, pr),
        mode=get_str(data, "mode", where, pr),
        makespan=get_int(data, "makespan", where, pr),
        tensors=tensors,
        items=items,
        streams=streams,
        source=source,
    )
    pr.raise_if_any(ProgramError)
    return program
