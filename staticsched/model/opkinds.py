"""The one table of micro-op kinds.

Each kind is described once: the unit it runs on, its operands (which
items it reads and writes, which GM region it touches), the attributes it
carries (with types, so text forms round-trip), its duration formula from the
cost model, and its NumPy semantics for replay. Lowering, solver, emitter and
executor all read this table; nothing else defines a kind.

Operands
--------
``reads``/``writes`` of an op are item names, in the order the kind's
``reads``/``writes`` roles list them. GM data is addressed through attributes:
``tensor`` and ``region`` (``((r0, r1), (c0, c1))``, half-open, in the tensor's
own row/column coordinates).

Extents
-------
Every kind states how much data it touches in its own attributes, and both its
semantics and its duration follow those attributes, never the shapes of the
tiles it happens to be given: ``load``/``store`` copy exactly their ``region``
(to/from the top-left corner of the on-chip tile), ``move``/``fixpipe``/``vec``
work on the top-left ``rows x cols`` of their tiles, ``mmad`` computes
``C[:m, :n] (+)= A[:m, :k] @ B[:k, :n]``. Whatever lies outside an extent is left
untouched (tail tiles are padded for the cube's cost, not zero-filled). An extent
larger than an operand is an error (:func:`extent_problems`), never a silent clip.

The semantics and the extent checks the table names are :mod:`staticsched.model.opsemantics`;
the units and durations (the cost model's formulas, and the transfer a load, store or move
makes) are here.
"""


from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import numpy as np

from staticsched.errors import InputError
from staticsched.model.attrcodec import op_value
from staticsched.model.dtypes import itemsize as _dtype_itemsize
from staticsched.model.hardware import RATE_DENOM, Hardware, rate_cycles
from staticsched.model.layouts import FRACTAL
from staticsched.model.opsemantics import (
    Region,
    load_extents,
    load_semantics,
    mmad_extents,
    mmad_semantics,
    move_semantics,
    rc_extents,
    region_shape,
    store_extents,
    store_semantics,
    vec_extents,
    vec_semantics,
)
from staticsched.model.vecops import VECOPS


@attrs.frozen
class ItemShape:
    """What an operand looks like to the semantics: space, bytes, dtype and 2-D shape.

    ``typed`` is false for an item declared without dtype/shape: it is then seen as one row of
    ``bytes`` ``uint8`` elements (enough for durations; no extent can be checked against it).
    """

    space: str
    bytes: int
    dtype: str
    shape: tuple[int, int] = attrs.field(converter=tuple)
    typed: bool = True


def item_shape(space: str, nbytes: int, dtype: str, shape: Sequence[int]) -> ItemShape:
    """The one way an OpGraph or program item becomes an :class:`ItemShape`."""
    if dtype and len(shape) == 2:
        return ItemShape(space, nbytes, dtype, tuple(shape))
    return ItemShape(space, nbytes, "uint8", (1, max(1, nbytes)), typed=False)


DurationFn = Callable[[Hardware, Mapping[str, Any], Sequence[ItemShape], Sequence[ItemShape]], int]
ExtentFn = Callable[[Mapping[str, Any], Sequence[ItemShape], Sequence[ItemShape]], list[str]]
SemanticsFn = Callable[
    [Mapping[str, Any], Sequence[np.ndarray], Sequence[np.ndarray], Mapping[str, np.ndarray]], None
]
UnitFn = Callable[[Hardware, Mapping[str, Any], Sequence[ItemShape], Sequence[ItemShape]], str]


@attrs.frozen
class OpKind:
    """One micro-op kind.

    Attributes
    ----------
    name : str
        The kind's name in OpGraph and program files.
    reads, writes : tuple of str
        Operand roles, in order (the last ``optional_reads`` reads may be left out).
    attributes : tuple of (name, type)
        The attributes the kind carries; type is one of :data:`~staticsched.model.attrcodec.ATTR_TYPES`.
    defaults : tuple of (name, value)
        The optional attributes and the value an op without them has; every other
        attribute is required.
    gm : str
        ``"r"`` if the op reads the GM ``region`` of ``tensor``, ``"w"`` if it writes it, ``""``.
    mnemonic : str
        Upper-case text form for programs and bundles.
    unit : callable
        The hardware unit (pipe) an op of this kind runs on.
    init : str
        The bool attribute (default true) that, when false, makes an op accumulate into its
        output, which it then also reads after its operands (``mmad``'s ``init``); ``""``.
    lanes : bool
        Whether the semantics also take operands with a leading axis of lanes (the same op on
        independent cores at once: :mod:`staticsched.verify.lockstep`). A kind whose values
        depend on per-core attributes (GM regions) or on its operands' axes by number does not.
    """

    name: str
    reads: tuple[str, ...] = attrs.field(converter=tuple)
    writes: tuple[str, ...] = attrs.field(converter=tuple)
    attributes: tuple[tuple[str, str], ...] = attrs.field(converter=tuple)
    gm: str
    mnemonic: str
    unit: UnitFn = attrs.field(eq=False, repr=False)
    duration: DurationFn = attrs.field(eq=False, repr=False)
    semantics: SemanticsFn = attrs.field(eq=False, repr=False)
    extents: ExtentFn = attrs.field(eq=False, repr=False)
    defaults: tuple[tuple[str, Any], ...] = attrs.field(converter=tuple, default=())
    optional_reads: int = 0
    init: str = ""
    lanes: bool = False

    def read_range(self, attrs_: Mapping[str, Any]) -> tuple[int, int]:
        """Fewest and most items an op of this kind with these attributes reads."""
        extra = 1 if self.init and not attrs_.get(self.init, True) else 0
        return len(self.reads) - self.optional_reads + extra, len(self.reads) + extra

    @property
    def attr_types(self) -> dict[str, str]:
        return dict(self.attributes)

    @property
    def required(self) -> tuple[str, ...]:
        """Attributes every op of this kind must carry."""
        optional = dict(self.defaults)
        return tuple(name for name, _ in self.attributes if name not in optional)

    def missing(self, attrs_: Mapping[str, Any]) -> list[str]:
        """The required attributes absent from ``attrs_``."""
        return [
            name
            for name, _ in self.attributes
            if name not in attrs_ and not any(name == d for d, _ in self.defaults)
        ]


# --------------------------------------------------------------------------- helpers


def region_bytes(region: Region, dtype: str) -> int:
    h, w = region_shape(region)
    return h * w * _dtype_itemsize(dtype)


def _global(hw: Hardware) -> str:
    """The space of GM tensors: the hardware's ``global`` role."""
    return hw.role_space("global") or "GM"


def _path_unit(hw: Hardware, src: str, dst: str) -> str:
    return hw.path(src, dst).unit


def _need_cube(hw: Hardware):
    if hw.cube is None:
        raise InputError(f"hardware '{hw.name}' has no [cube] section; cannot lower mmad")
    return hw.cube


def _need_vector(hw: Hardware):
    if hw.vector is None:
        raise InputError(f"hardware '{hw.name}' has no [vector] section; cannot lower vector ops")
    return hw.vector


def extent_problems(
    kind: OpKind, attrs_: Mapping[str, Any], reads: Sequence[ItemShape], writes: Sequence[ItemShape]
) -> list[str]:
    """Why the extents ``attrs_`` state do not fit the operands (empty when they do)."""
    return kind.extents(attrs_, reads, writes)


# --------------------------------------------------------------------------- durations


def _itemsize(dtype: str) -> int:
    return _dtype_itemsize(dtype)


#: the kinds that move data along a hardware path (what a shared link can slow down)
TRANSFER_KINDS = ("load", "store", "move", "fixpipe")


def tensor_space(hw: Hardware, a: Mapping[str, Any]) -> str:
    """The space a load reads or a store writes its tensor in: the ``space`` attribute (the
    tensor's placement), else the hardware's global space."""
    return a.get("space") or _global(hw)


def transfer_route(
    hw: Hardware, kind: str, a: Mapping[str, Any], reads: Sequence[Any], writes: Sequence[Any]
) -> tuple[str, str, int] | None:
    """``(src space, dst space, bytes)`` a transfer op of ``kind`` moves, or None (not a
    transfer kind). ``reads``/``writes`` are anything with ``space`` and ``dtype`` (items or
    :class:`ItemShape`): the one definition durations, units and link use all read."""
    if kind == "load":
        return tensor_space(hw, a), writes[0].space, region_bytes(a["region"], writes[0].dtype)
    if kind == "store":
        return reads[0].space, tensor_space(hw, a), region_bytes(a["region"], reads[0].dtype)
    if kind in ("move", "fixpipe"):
        return reads[0].space, writes[0].space, a["rows"] * a["cols"] * _itemsize(reads[0].dtype)
    return None


def layout_ratio(hw: Hardware, a: Mapping[str, Any]) -> float:
    """How many times longer than at its path's rate a GM access with attributes ``a`` moves
    its data (1: no slower), by the layout it reads or writes (:mod:`staticsched.model.layouts`):

    - a load converting its ND region to the fractal format on the fly (``nd2nz``, its source
      rows ``stride`` elements apart): the Cube's :meth:`~staticsched.model.hardware.CubeModel.
      nd2nz_ratio` for the region's shape;
    - an access of an NZ tensor (``nz``) of fewer rows than a fractal, on a chip that prices
      layouts: its runs are that short, ``16 / rows`` (CATLASS's NZ bandwidth below 16 rows).

    The one definition durations, the links' caps and the verifier's replays read."""
    cube = hw.cube
    if cube is None or "region" not in a:
        return 1.0
    (r0, r1), (c0, c1) = a["region"]
    if a.get("nd2nz", False):
        return cube.nd2nz_ratio(r1 - r0, c1 - c0, a.get("stride", 0) or (c1 - c0))
    if a.get("nz", False) and cube.models_layouts and r1 - r0 < FRACTAL:
        return FRACTAL / (r1 - r0)
    return 1.0


def path_units(hw: Hardware, a: Mapping[str, Any], src: str, dst: str) -> int:
    """The most rate units (:data:`RATE_DENOM` per byte per cycle) a transfer with attributes
    ``a`` moves at on its path ``src -> dst``: the path's rate, divided by its
    :func:`layout_ratio`, floored to the grid every rate lives on (at least one unit). The one
    definition durations, the links' caps and the verifier's replay read."""
    path = hw.path(src, dst)
    ratio = layout_ratio(hw, a)
    return path.derated_units(ratio - 1.0) if ratio > 1.0 else path.units


def _transfer_dur(hw, a, reads, writes, kind):
    src, dst, nbytes = transfer_route(hw, kind, a, reads, writes)
    # a shared link may slow the transfer to ``rate`` bytes/cycle (0: its path's rate)
    rate = int(a.get("rate", 0.0) * RATE_DENOM)
    path = hw.path(src, dst)
    if kind in ("load", "store"):
        units = path_units(hw, a, src, dst)
        if units != path.units:  # a layout slows the data phase
            return path.overhead + rate_cycles(nbytes, rate or units)
    return path.cycles(nbytes, rate)


def _transfer_unit(hw, a, reads, writes, kind):
    src, dst = (
        (tensor_space(hw, a), writes[0].space) if kind == "load"
        else (reads[0].space, tensor_space(hw, a)) if kind == "store"
        else (reads[0].space, writes[0].space)
    )
    return _path_unit(hw, src, dst)


def _mmad_dur(hw, a, reads, writes):
    return _need_cube(hw).cycles(a["m"], a["n"], a["k"], reads[0].dtype)


def _vec_dur(hw, a, reads, writes):
    vop = VECOPS[a["op"]]
    # bytes of the widest operand or result spanning the whole extent (fp32 work costs twice fp16)
    forms = vop.forms(len(reads))
    full = [x.dtype for x, f in zip(reads, forms, strict=False) if f == "full"]
    if vop.out == "full":
        full += [x.dtype for x in writes[:1]]
    width = max((_itemsize(d) for d in full), default=_itemsize(writes[0].dtype))
    return _need_vector(hw).cycles(a["op"], a["rows"] * a["cols"] * width, vop.passes)


KINDS: dict[str, OpKind] = {
    k.name: k
    for k in (
        OpKind(
            "load",
            (),
            ("dst",),
            (
                ("tensor", "str"),
                ("region", "region"),
                ("transpose", "bool"),
                ("space", "str"),
                ("rate", "float"),
                ("nd2nz", "bool"),
                ("stride", "int"),
                ("nz", "bool"),
            ),
            "r",
            "LOAD",
            unit=partial(_transfer_unit, kind="load"),
            duration=partial(_transfer_dur, kind="load"),
            semantics=load_semantics,
            extents=load_extents,
            defaults=(("transpose", False), ("space", ""), ("rate", 0.0), ("nd2nz", False), ("stride", 0),
                      ("nz", False)),
        ),
        OpKind(
            "move",
            ("src",),
            ("dst",),
            (("rows", "int"), ("cols", "int"), ("rate", "float")),
            "",
            "MOVE",
            unit=partial(_transfer_unit, kind="move"),
            duration=partial(_transfer_dur, kind="move"),
            semantics=move_semantics,
            extents=rc_extents,
            defaults=(("rate", 0.0),),
            lanes=True,
        ),
        OpKind(
            "mmad",
            ("a", "b"),
            ("c",),
            (("m", "int"), ("n", "int"), ("k", "int"), ("init", "bool")),
            "",
            "MMAD",
            unit=lambda hw, a, r, w: _need_cube(hw).unit,
            duration=_mmad_dur,
            semantics=mmad_semantics,
            extents=mmad_extents,
            defaults=(("init", True),),
            init="init",
            lanes=True,
        ),
        OpKind(
            "fixpipe",
            ("src",),
            ("dst",),
            (("rows", "int"), ("cols", "int"), ("rate", "float")),
            "",
            "FIXPIPE",
            unit=partial(_transfer_unit, kind="fixpipe"),
            duration=partial(_transfer_dur, kind="fixpipe"),
            semantics=move_semantics,
            extents=rc_extents,
            defaults=(("rate", 0.0),),
            lanes=True,
        ),
        OpKind(
            "vec",
            ("x", "y"),
            ("out",),
            (
                ("op", "str"),
                ("rows", "int"),
                ("cols", "int"),
                ("scalar", "float"),
                ("row0", "int"),
                ("col0", "int"),
            ),
            "",
            "VEC",
            unit=lambda hw, a, r, w: _need_vector(hw).unit,
            duration=_vec_dur,
            semantics=vec_semantics,
            extents=vec_extents,
            defaults=(("scalar", 0.0), ("row0", 0), ("col0", 0)),
            optional_reads=1,
        ),
        OpKind(
            "store",
            ("src",),
            (),
            (("tensor", "str"), ("region", "region"), ("space", "str"), ("rate", "float"), ("nz", "bool")),
            "w",
            "STORE",
            unit=partial(_transfer_unit, kind="store"),
            duration=partial(_transfer_dur, kind="store"),
            semantics=store_semantics,
            extents=store_extents,
            defaults=(("space", ""), ("rate", 0.0), ("nz", False)),
        ),
    )
}


#: per kind, its attributes of type ``region`` (where a tile sits in its GM tensor)
_REGION_ATTRS = {k.name: frozenset(n for n, t in k.attributes if t == "region") for k in KINDS.values()}


def shape_key(kind: str, attrs_: Iterable[tuple[str, Any]], reads: Sequence[ItemShape | None],
              writes: Sequence[ItemShape | None]) -> tuple:
    """What the kind table's units, durations and extent checks read of an op: its kind, its
    attributes with each region reduced to its shape (where a tile sits in its tensor changes
    none of them) and its operands' shapes (None: an item the graph does not declare). A
    chip's ops repeat a few keys (every 128x256 load of a GEMM has one), so what they give is
    worked out once per key.

    Raises
    ------
    TypeError, ValueError
        For an unhashable attribute value or a region that is not two spans.
    """
    regions = _REGION_ATTRS.get(kind, frozenset())
    return (kind, tuple((k, region_shape(v)) if k in regions else (k, v) for k, v in attrs_),
            tuple(reads), tuple(writes))


def normalize_attrs(kind: OpKind, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate and convert JSON attribute values of ``kind`` (:func:`~staticsched.model.
    attrcodec.op_value`: regions become tuples); one line per bad attribute."""
    types = kind.attr_types
    out: dict[str, Any] = {}
    problems = []
    for key in sorted(raw):
        t = types.get(key)
        if t is None:
            problems.append(f"{where}: unknown attribute '{key}' for kind '{kind.name}'")
            continue
        ok, value = op_value(t, raw[key])
        if not ok:
            problems.append(f"{where}: attribute '{key}' of kind '{kind.name}' must be {t}, got {raw[key]!r}")
            continue
        out[key] = value
    if kind.name == "vec" and "op" in out and out["op"] not in VECOPS:
        problems.append(f"{where}: vec op '{out['op']}' is not one of {', '.join(VECOPS)}")
    if problems:
        raise InputError(problems)
    return out
