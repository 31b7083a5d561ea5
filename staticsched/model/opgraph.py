"""OpGraph: the solver's input — items (tiles in memory spaces) and micro-ops.

The op list is a sequential program: for every item, the order of its accesses
is the order of the ops in the list. That fixes which writer a read sees (the
latest one before it) and gives the implied RAW/WAR/WAW edges; explicit
``deps`` add more. A schedule may reorder ops only along those edges.

The value types and their JSON form are here; :meth:`OpGraph.check` against a hardware model is
:mod:`staticsched.model.opgraph_check`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import attrs

from staticsched._fields import (
    Problems,
    check_keys,
    check_name,
    get_bool,
    get_int,
    get_list,
    get_mapping,
    get_str,
    get_str_list,
    positive_ints,
    read_text_file,
)
from staticsched._gc import paused
from staticsched.errors import GraphError, InputError
from staticsched.model.attrcodec import attr_to_json
from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.layouts import LAYOUTS
from staticsched.model.opgraph_check import check_opgraph
from staticsched.model.opkinds import KINDS, ItemShape, item_shape, normalize_attrs

FORMAT = "staticsched.opgraph"
VERSION = 1


def _attr_tuple(value: Mapping[str, Any] | tuple) -> tuple[tuple[str, Any], ...]:
    if type(value) is tuple:  # the common case, checked before the slow Mapping test
        return value
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    return tuple(value)


@attrs.frozen
class Tensor:
    """A GM tensor (2-D, row-major)."""

    name: str
    #: (rows, cols)
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    dtype: str = "float16"
    #: scratch space the lowering made (a split chip's AIC -> AIV ring): not a result, so the
    #: numeric replay checks the outputs that read it, not it
    workspace: bool = False
    #: how its bytes lie in GM: ``"ND"`` row-major or ``"NZ"`` the Cube's fractal format
    #: (:mod:`staticsched.model.layouts`); loads and stores say which they read or write
    layout: str = "ND"

    @property
    def bytes(self) -> int:
        return self.shape[0] * self.shape[1] * DTYPE_BYTES[self.dtype]


@attrs.frozen
class Item:
    """A tile of data in one memory space (``space == ""``: no space, takes no capacity).

    ``dtype``/``shape`` are needed only for numeric replay.
    """

    name: str
    space: str = ""
    bytes: int = 0
    dtype: str = ""
    shape: tuple[int, ...] = attrs.field(converter=tuple, default=())

    def as_shape(self) -> ItemShape:
        return item_shape(self.space, self.bytes, self.dtype, self.shape)


@attrs.frozen
class Op:
    """One micro-op: runs on ``unit`` of ``core`` for ``duration`` cycles."""

    id: str
    unit: str
    duration: int
    core: int = 0
    deps: tuple[str, ...] = attrs.field(converter=tuple, default=())
    reads: tuple[str, ...] = attrs.field(converter=tuple, default=())
    writes: tuple[str, ...] = attrs.field(converter=tuple, default=())
    kind: str = ""
    attrs: tuple[tuple[str, Any], ...] = attrs.field(converter=_attr_tuple, default=())

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)


@attrs.frozen
class Edge:
    """A happens-before requirement ``src`` end -> ``dst`` start; ``reason`` is dep/raw/war/waw."""

    src: str
    dst: str
    reason: str
    item: str = ""


@attrs.frozen
class OpGraph:
    """Items and ops; see the module docstring for the access-order semantics."""

    items: tuple[Item, ...] = attrs.field(converter=tuple)
    ops: tuple[Op, ...] = attrs.field(converter=tuple)
    tensors: tuple[Tensor, ...] = attrs.field(converter=tuple, default=())
    #: the TaskGraph this was lowered from (raw JSON), for numeric reference checks
    source: str = attrs.field(default="", repr=False)
    #: derived values other modules compute once per graph (:func:`staticsched.model.links.
    #: op_transfers`); not part of the value (equality, hash, repr, evolve ignore it)
    memo: dict = attrs.field(factory=dict, init=False, eq=False, hash=False, repr=False)

    # ---------------------------------------------------------------- lookups
    @cached_property
    def op_index(self) -> dict[str, int]:
        return {op.id: i for i, op in enumerate(self.ops)}

    @cached_property
    def item_map(self) -> dict[str, Item]:
        return {it.name: it for it in self.items}

    @cached_property
    def tensor_map(self) -> dict[str, Tensor]:
        return {t.name: t for t in self.tensors}

    def op(self, op_id: str) -> Op:
        return self.ops[self.op_index[op_id]]

    @cached_property
    def cores(self) -> tuple[int, ...]:
        return tuple(sorted({op.core for op in self.ops}))

    @cached_property
    def accesses(self) -> dict[str, list[tuple[int, str]]]:
        """Per item, ``(op index, "r"|"w")`` in program order (a read-modify-write gives both)."""
        acc: dict[str, list[tuple[int, str]]] = {}
        for i, op in enumerate(self.ops):
            for name in op.reads:
                acc.setdefault(name, []).append((i, "r"))
            for name in op.writes:
                acc.setdefault(name, []).append((i, "w"))
        return acc

    @cached_property
    def edges(self) -> tuple[Edge, ...]:
        """Explicit deps plus implied RAW/WAR/WAW edges on the same item, deduplicated.

        Order is deterministic: by destination op index, then source op index.
        """
        found: dict[tuple[int, int], Edge] = {}
        for i, op in enumerate(self.ops):
            for d in op.deps:
                j = self.op_index.get(d)
                if j is not None and (j, i) not in found:
                    found[(j, i)] = Edge(d, op.id, "dep")
        for name in sorted(self.accesses):
            last_write: int | None = None
            reads_since: list[int] = []
            for i, mode in self.accesses[name]:
                if mode == "r":
                    if last_write is not None and last_write != i:
                        found.setdefault(
                            (last_write, i), Edge(self.ops[last_write].id, self.ops[i].id, "raw", name)
                        )
                    reads_since.append(i)
                else:
                    for r in reads_since:
                        if r != i:
                            found.setdefault((r, i), Edge(self.ops[r].id, self.ops[i].id, "war", name))
                    if last_write is not None and last_write != i and not reads_since:
                        found.setdefault(
                            (last_write, i),
                            Edge(self.ops[last_write].id, self.ops[i].id, "waw", name),
                        )
                    last_write = i
                    reads_since = []
        return tuple(found[k] for k in sorted(found, key=lambda k: (k[1], k[0])))

    def iter_core(self, core: int) -> Iterator[Op]:
        return (op for op in self.ops if op.core == core)

    # ---------------------------------------------------------------- checks
    def check(self, hw: Hardware) -> None:
        """Validate the graph against ``hw``; report every violation at once
        (:func:`staticsched.model.opgraph_check.check_opgraph`, which lists the checks).

        Raises
        ------
        GraphError
            One line per problem naming the op/item/key and the numbers.
        """
        # attrs' converter fields do not match the check's protocol for the type checker
        check_opgraph(cast(Any, self), hw)


# --------------------------------------------------------------------------- JSON

_OP_KEYS = {"id", "unit", "core", "duration", "deps", "reads", "writes", "kind", "attrs"}
_ITEM_KEYS = {"space", "bytes", "dtype", "shape"}


def opgraph_from_dict(data: Any, where: str = "<opgraph>") -> OpGraph:
    """Build an OpGraph from decoded JSON, reporting every structural problem at once."""
    pr = Problems()
    if not isinstance(data, dict):
        raise GraphError(f"{where}: top level must be an object")
    check_keys(data, {"format", "version", "items", "ops", "tensors", "source"}, where, pr)
    fmt = data.get("format")
    if fmt != FORMAT:
        pr.add(f"{where}: 'format' must be '{FORMAT}', got {fmt!r}")
    get_int(data, "version", where, pr, default=VERSION, minimum=VERSION, maximum=VERSION)
    tensors = []
    for name, body in sorted(get_mapping(data, "tensors", where, pr).items()):
        w = f"{where}: tensor '{name}'"
        check_name(name, "tensor", where, pr)
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        check_keys(body, {"shape", "dtype", "workspace", "layout"}, w, pr)
        shape = get_list(body, "shape", w, pr)
        if not positive_ints(shape, 2):
            pr.add(f"{w}: 'shape' must be two positive integers, got {shape!r}")
            shape = [1, 1]
        dtype = get_str(body, "dtype", w, pr, default="float16", choices=sorted(DTYPE_BYTES))
        layout = get_str(body, "layout", w, pr, default="ND", choices=list(LAYOUTS))
        tensors.append(Tensor(name, tuple(shape), dtype or "float16",
                              get_bool(body, "workspace", w, pr, default=False), layout or "ND"))
    items = []
    for name, body in sorted(get_mapping(data, "items", where, pr).items()):
        w = f"{where}: item '{name}'"
        check_name(name, "item", where, pr)
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        check_keys(body, _ITEM_KEYS, w, pr)
        shape = get_list(body, "shape", w, pr, default=[])
        if shape and not positive_ints(shape):
            pr.add(f"{w}: 'shape' must be positive integers, got {shape!r}")
            shape = []
        dtype = get_str(body, "dtype", w, pr, default="")
        if dtype and dtype not in DTYPE_BYTES:
            pr.add(f"{w}: unknown dtype '{dtype}'")
        items.append(
            Item(
                name,
                get_str(body, "space", w, pr, default=""),
                get_int(body, "bytes", w, pr, default=0, minimum=0),
                dtype,
                tuple(shape),
            )
        )
    ops = []
    for i, body in enumerate(get_list(data, "ops", where, pr)):
        w = f"{where}: ops[{i}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be an object")
            continue
        op_id = get_str(body, "id", w, pr)
        if op_id and check_name(op_id, "op", w, pr):
            w = f"{where}: op '{op_id}'"
        check_keys(body, _OP_KEYS, w, pr)
        kind = get_str(body, "kind", w, pr, default="")
        raw_attrs = get_mapping(body, "attrs", w, pr)
        attrs_ = {}
        if kind in KINDS:
            try:
                attrs_ = normalize_attrs(KINDS[kind], raw_attrs, w)
            except InputError as exc:
                for line in exc.problems:
                    pr.add(line)
        elif kind:
            pr.add(f"{w}: unknown kind '{kind}' (kinds: {', '.join(KINDS)})")
        elif raw_attrs:
            pr.add(f"{w}: 'attrs' given without a 'kind'")
        ops.append(
            Op(
                id=op_id,
                unit=get_str(body, "unit", w, pr),
                duration=get_int(body, "duration", w, pr, minimum=1),
                core=get_int(body, "core", w, pr, default=0, minimum=0),
                deps=get_str_list(body, "deps", w, pr),
                reads=get_str_list(body, "reads", w, pr),
                writes=get_str_list(body, "writes", w, pr),
                kind=kind,
                attrs=attrs_,
            )
        )
    source = data.get("source", "")
    if not isinstance(source, str):
        pr.add(f"{where}: 'source' must be a string")
        source = ""
    pr.raise_if_any(GraphError)
    return OpGraph(items, ops, tensors, source)


def opgraph_to_dict(g: OpGraph) -> dict[str, Any]:
    """The JSON form; ``opgraph_from_dict(opgraph_to_dict(g)) == g``."""
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if g.tensors:
        out["tensors"] = {t.name: {"shape": list(t.shape), "dtype": t.dtype,
                                   **({"workspace": True} if t.workspace else {}),
                                   **({"layout": t.layout} if t.layout != "ND" else {})} for t in g.tensors}
    items = {}
    for it in g.items:
        body: dict[str, Any] = {}
        if it.space:
            body["space"] = it.space
        body["bytes"] = it.bytes
        if it.dtype:
            body["dtype"] = it.dtype
        if it.shape:
            body["shape"] = list(it.shape)
        items[it.name] = body
    out["items"] = dict(sorted(items.items()))
    ops = []
    for op in g.ops:
        body = {"id": op.id, "unit": op.unit, "core": op.core, "duration": op.duration}
        if op.kind:
            body["kind"] = op.kind
        if op.deps:
            body["deps"] = list(op.deps)
        types = KINDS[op.kind].attr_types if op.attrs else {}
        ops.append(operands_to_json(body, op.reads, op.writes, op.attrs, types))
    out["ops"] = ops
    if g.source:
        out["source"] = g.source
    return out


def attrs_to_json(types: Mapping[str, str], attrs_: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """An op's attributes as JSON values, by their declared types."""
    return {k: attr_to_json(types[k], v) for k, v in attrs_}


def operands_to_json(
    out: dict[str, Any],
    reads: Sequence[str],
    writes: Sequence[str],
    attrs_: Sequence[tuple[str, Any]],
    types: Mapping[str, str],
) -> dict[str, Any]:
    """``out`` (an op's JSON object) with the op's ``reads``, ``writes`` and ``attrs`` added,
    each only when not empty: how OpGraph files and programs (``program.json``) both write an
    op's accesses and attributes."""
    if reads:
        out["reads"] = list(reads)
    if writes:
        out["writes"] = list(writes)
    if attrs_:
        out["attrs"] = attrs_to_json(types, attrs_)
    return out


def dumps_opgraph(g: OpGraph) -> str:
    return json.dumps(opgraph_to_dict(g), indent=1, sort_keys=False) + "\n"


def load_json_file(path: str | Path) -> Any:
    """Read a JSON file; a missing file, bad UTF-8, bad JSON or NaN is an :class:`InputError`."""
    text = read_text_file(path, InputError)

    def _no_const(name: str) -> Any:
        raise ValueError(f"{name} is not allowed")

    try:
        return json.loads(text, parse_constant=_no_const)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None


def load_opgraph(path: str | Path) -> OpGraph:
    """Load an OpGraph JSON file."""
    # ~10^6 acyclic objects for a chip's graph: see staticsched._gc
    with paused():
        return opgraph_from_dict(load_json_file(path), str(path))
