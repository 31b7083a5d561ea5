"""Hardware resource model: cores, pipes (units), memory spaces, sync budget and costs.

Read from hand-written TOML (see ``docs/formats.md``). Presets ship as package
data and load by name; any other argument is taken as a path.
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path as FsPath
from typing import Any

import attrs

from staticsched._fields import (
    Problems,
    check_keys,
    check_name,
    get_bool,
    get_int,
    get_list,
    get_mapping,
    get_number,
    get_str,
    get_str_list,
)
from staticsched.errors import HardwareError, InputError
from staticsched.model.vecops import VECOPS

DTYPE_BYTES = {"float16": 2, "float32": 4, "int8": 1, "int32": 4, "bfloat16": 2}

#: The roles lowering asks the hardware for, instead of literal space names: role -> (the space
#: it names when ``[roles]`` does not say, what it is). ``global`` must be unbounded, the
#: others bounded (on-chip).
ROLES: dict[str, tuple[str, str]] = {
    "global": ("GM", "global memory, where the task graph's tensors live"),
    "operand": ("L1", "the Cube's operand buffer: loads from global memory land here"),
    "cube_a": ("L0A", "the Cube's left input buffer"),
    "cube_b": ("L0B", "the Cube's right input buffer"),
    "accumulator": ("L0C", "the Cube's accumulator (fp32)"),
    "vector": ("UB", "the Vector unit's buffer"),
}


@attrs.frozen
class Unit:
    """One pipe of a core: executes its own instruction stream in order."""

    name: str
    description: str = ""


@attrs.frozen
class Space:
    """A memory space of ``capacity`` bytes; ``capacity == 0`` encodes an unbounded one
    (off-chip GM), which a hardware file must declare as ``unbounded = true``."""

    name: str
    capacity: int
    alignment: int = 1

    @property
    def bounded(self) -> bool:
        return self.capacity > 0


@attrs.frozen
class SyncModel:
    """Flag budget and latency.

    ``event_ids`` is the usable number of ids per (core, src pipe, dst pipe);
    ``flag_latency`` the cycles from a SET firing to the flag being visible. Cross-core
    flags are counting semaphores: ``cross_core_event_ids`` ids per (src core, dst core),
    each counting up to ``cross_core_capacity`` sets not yet waited.
    """

    event_ids: int = 8
    flag_latency: int = 0
    cross_core_event_ids: int = 16
    cross_core_latency: int = 0
    cross_core_capacity: int = 15

    def latency(self, src: tuple[int, str], dst: tuple[int, str]) -> int:
        """Cycles from an op on pipe ``src`` = ``(core, unit)`` ending to a dependent op on pipe
        ``dst`` starting: 0 on one pipe (program order), ``flag_latency`` across the pipes of
        one core (a flag carries the dependency), ``cross_core_latency`` across cores. The one
        definition of an edge's latency: the solver, the normaliser, the schedule check, the
        sync planner and the program builder all use it."""
        if src[0] != dst[0]:
            return self.cross_core_latency
        return self.flag_latency if src[1] != dst[1] else 0


@attrs.frozen
class TransferPath:
    """A data move ``src -> dst`` executed by ``unit``: ``overhead + ceil(bytes / bytes_per_cycle)``."""

    unit: str
    src: str
    dst: str
    bytes_per_cycle: float
    overhead: int = 0

    def cycles(self, nbytes: int, units: int = 0) -> int:
        """Cycles to move ``nbytes`` at the path's rate, or at ``units`` rate units
        (``RATE_DENOM`` per byte per cycle) when a shared link slows it (0: the path's rate)."""
        if units:
            return self.overhead + rate_cycles(nbytes, units)
        return self.overhead + max(1, math.ceil(nbytes / self.bytes_per_cycle))


def rate_cycles(nbytes: int, units: int) -> int:
    """Cycles (at least one) to move ``nbytes`` at ``units`` rate units, ``RATE_DENOM`` of
    which make a byte per cycle: the one definition of a transfer's data phase at a rate."""
    return max(1, -(-nbytes * RATE_DENOM // units))


#: transfer rates are multiples of 1/RATE_DENOM bytes per cycle, so that every rate, link
#: share and sum of rates is exact in binary floating point and in integer arithmetic
RATE_DENOM = 64


@attrs.frozen
class Link:
    """A chip-level resource shared by every core: the transfers on the paths it names (written
    ``"SRC->DST"``) move at most ``bytes_per_cycle`` together at every cycle. Reads and writes
    share it (the seed counts a round trip as write plus read against one bandwidth)."""

    name: str
    bytes_per_cycle: float
    paths: tuple[tuple[str, str], ...] = attrs.field(converter=lambda v: tuple(tuple(p) for p in v))
    description: str = ""

    @property
    def units(self) -> int:
        """The bandwidth in rate units (:data:`RATE_DENOM` per byte per cycle)."""
        return int(self.bytes_per_cycle * RATE_DENOM)

    def carries(self, src: str, dst: str) -> bool:
        return (src, dst) in self.paths


@attrs.frozen
class CubeModel:
    """Matrix unit: ``overhead + ceil(M'N'K' / macs_per_cycle[dtype])`` with dims padded to ``fractal``."""

    unit: str
    #: (m, n, k)
    fractal: tuple[int, ...] = attrs.field(converter=tuple, default=(16, 16, 16))
    macs_per_cycle: tuple[tuple[str, int], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=(("float16", 4096),)
    )
    overhead: int = 0

    def cycles(self, m: int, n: int, k: int, dtype: str = "float16") -> int:
        rate = dict(self.macs_per_cycle).get(dtype)
        if rate is None:
            raise InputError(f"cube: no macs_per_cycle for dtype '{dtype}'")
        fm, fn, fk = self.fractal
        macs = round_up(m, fm) * round_up(n, fn) * round_up(k, fk)
        return self.overhead + max(1, math.ceil(macs / rate))


@attrs.frozen
class VectorModel:
    """Vector unit: ``overhead + ceil(bytes * passes[op] / bytes_per_cycle)``."""

    unit: str
    bytes_per_cycle: float
    overhead: int = 0
    passes: tuple[tuple[str, float], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=()
    )

    def cycles(self, op: str, nbytes: int, default_passes: float = 1.0) -> int:
        """Cycles of ``op`` over ``nbytes``; ``passes`` of the hardware, else ``default_passes``
        (the vec-op table's)."""
        p = dict(self.passes).get(op, default_passes)
        return self.overhead + max(1, math.ceil(nbytes * p / self.bytes_per_cycle))


def round_up(x: int, q: int) -> int:
    """``x`` padded up to a multiple of ``q`` (fractals, alignments): the one definition."""
    return -(-x // q) * q


@attrs.frozen
class Hardware:
    """The hardware resource model every other part reads."""

    name: str
    cores: int
    units: tuple[Unit, ...] = attrs.field(converter=tuple)
    spaces: tuple[Space, ...] = attrs.field(converter=tuple)
    sync: SyncModel = SyncModel()
    paths: tuple[TransferPath, ...] = attrs.field(converter=tuple, default=())
    links: tuple[Link, ...] = attrs.field(converter=tuple, default=())
    cube: CubeModel | None = None
    vector: VectorModel | None = None
    clock_ghz: float = 1.0
    description: str = ""
    source: str = ""
    #: explicit ``[roles]`` entries (role, space); other roles take their default space name
    roles: tuple[tuple[str, str], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=()
    )

    def role_space(self, role: str) -> str | None:
        """The space playing ``role`` (a key of :data:`ROLES`): the ``[roles]`` entry, else the
        role's default name when a space of that name exists; None when there is none."""
        explicit = dict(self.roles).get(role)
        if explicit is not None:
            return explicit
        default = ROLES[role][0]
        return default if self.has_space(default) else None

    def role(self, role: str) -> str:
        """The space playing ``role``.

        Raises
        ------
        HardwareError
            When no space plays it.
        """
        space = self.role_space(role)
        if space is None:
            raise HardwareError(
                f"hardware '{self.name}' has no space for role '{role}' ({ROLES[role][1]}): no space "
                f"'{ROLES[role][0]}' and no [roles] {role} = \"SPACE\""
            )
        return space

    @property
    def unit_names(self) -> tuple[str, ...]:
        return tuple(u.name for u in self.units)

    @property
    def space_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.spaces)

    def space(self, name: str) -> Space:
        for s in self.spaces:
            if s.name == name:
                return s
        raise InputError(f"hardware '{self.name}': no memory space '{name}'")

    def has_space(self, name: str) -> bool:
        return any(s.name == name for s in self.spaces)

    def path(self, src: str, dst: str) -> TransferPath:
        for p in self.paths:
            if p.src == src and p.dst == dst:
                return p
        raise InputError(f"hardware '{self.name}': no transfer path {src}->{dst} in [[paths]]")

    def has_path(self, src: str, dst: str) -> bool:
        return any(p.src == src and p.dst == dst for p in self.paths)

    def links_of(self, src: str, dst: str) -> tuple[Link, ...]:
        """The links a transfer ``src -> dst`` uses, in declaration order."""
        return tuple(lk for lk in self.links if lk.carries(src, dst))

    def cycles_to_us(self, cycles: int) -> float:
        return cycles / (self.clock_ghz * 1000.0)


# --------------------------------------------------------------------------- loading

_TOP_KEYS = {
    "name",
    "cores",
    "clock_ghz",
    "description",
    "units",
    "spaces",
    "sync",
    "paths",
    "links",
    "cube",
    "vector",
    "roles",
}


def hardware_from_dict(data: dict[str, Any], where: str = "<hardware>") -> Hardware:
    """Build a :class:`Hardware` from decoded TOML, reporting every problem at once.

    Raises
    ------
    HardwareError
        One line per problem, each naming the file and the key.
    """
    pr = Problems()
    if not isinstance(data, dict):
        raise HardwareError(f"{where}: top level must be a table")
    check_keys(data, _TOP_KEYS, where, pr)
    name = get_str(data, "name", where, pr)
    if name:
        check_name(name, "hardware", where, pr)
    cores = get_int(data, "cores", where, pr, minimum=1, maximum=4096)
    clock = get_number(data, "clock_ghz", where, pr, default=1.0, positive=True)
    description = get_str(data, "description", where, pr, default="")

    units = []
    for uname, body in get_mapping(data, "units", where, pr, required=True).items():
        w = f"{where}: units.{uname}"
        check_name(uname, "unit", where, pr)
        if not isinstance(body, dict):
            pr.add(f"{w}: must be a table")
            continue
        check_keys(body, {"description"}, w, pr)
        units.append(Unit(uname, get_str(body, "description", w, pr, default="")))
    if not units and "units" in data:
        pr.add(f"{where}: 'units' declares no pipe")
    unit_set = {u.name for u in units}

    spaces = []
    for sname, body in get_mapping(data, "spaces", where, pr, required=True).items():
        w = f"{where}: spaces.{sname}"
        check_name(sname, "space", where, pr)
        if not isinstance(body, dict):
            pr.add(f"{w}: must be a table")
            continue
        check_keys(body, {"capacity", "unbounded", "alignment", "description"}, w, pr)
        unbounded = get_bool(body, "unbounded", w, pr, default=False)
        if unbounded and "capacity" in body:
            pr.add(f"{w}: give either 'capacity' or 'unbounded = true', not both")
        # unbounded memory is explicit: a capacity of 0 is a typo, not "infinite on-chip memory"
        if not unbounded and body.get("capacity") == 0 and not isinstance(body.get("capacity"), bool):
            # the form files written before `unbounded` existed used: say what to write now
            pr.add(f"{w}: 'capacity' = 0 no longer means unbounded; write `unbounded = true` for an "
                   "unbounded space (off-chip memory), or give its capacity in bytes")
            cap = 0
        else:
            cap = 0 if unbounded else get_int(body, "capacity", w, pr, minimum=1)
        align = get_int(body, "alignment", w, pr, default=1, minimum=1)
        spaces.append(Space(sname, cap, align))
    space_set = {s.name for s in spaces}

    sync_d = get_mapping(data, "sync", where, pr)
    w = f"{where}: sync"
    check_keys(sync_d, {"event_ids", "flag_latency", "cross_core_event_ids", "cross_core_latency",
                        "cross_core_capacity"}, w, pr)
    flag_latency = get_int(sync_d, "flag_latency", w, pr, default=0, minimum=0)
    sync = SyncModel(
        event_ids=get_int(sync_d, "event_ids", w, pr, default=8, minimum=0, maximum=64),
        flag_latency=flag_latency,
        cross_core_event_ids=get_int(
            sync_d, "cross_core_event_ids", w, pr, default=16, minimum=0, maximum=1024
        ),
        cross_core_latency=get_int(sync_d, "cross_core_latency", w, pr, default=flag_latency, minimum=0),
        cross_core_capacity=get_int(sync_d, "cross_core_capacity", w, pr, default=15, minimum=1,
                                    maximum=1 << 16),
    )

    if sync.cross_core_latency < sync.flag_latency:
        # a dependency implied through another core must cost at least a direct flag, or the
        # emitted timetable (with the redundant flag dropped) would be shorter than the model
        pr.add(f"{where}: sync: 'cross_core_latency' = {sync.cross_core_latency} must be >= "
               f"'flag_latency' = {sync.flag_latency}")
    paths = []
    seen_paths: set[tuple[str, str]] = set()
    for i, body in enumerate(get_list(data, "paths", where, pr, default=[])):
        w = f"{where}: paths[{i}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be a table")
            continue
        check_keys(body, {"unit", "src", "dst", "bytes_per_cycle", "overhead", "description"}, w, pr)
        p = TransferPath(
            unit=get_str(body, "unit", w, pr),
            src=get_str(body, "src", w, pr),
            dst=get_str(body, "dst", w, pr),
            bytes_per_cycle=get_number(body, "bytes_per_cycle", w, pr, positive=True),
            overhead=get_int(body, "overhead", w, pr, default=0, minimum=0),
        )
        if p.unit and unit_set and p.unit not in unit_set:
            pr.add(f"{w}: unknown unit '{p.unit}' (units: {', '.join(sorted(unit_set))})")
        for end in (p.src, p.dst):
            if end and space_set and end not in space_set:
                pr.add(f"{w}: unknown space '{end}' (spaces: {', '.join(sorted(space_set))})")
        if (p.src, p.dst) in seen_paths:
            pr.add(f"{w}: duplicate path {p.src}->{p.dst}")
        seen_paths.add((p.src, p.dst))
        paths.append(p)

    links = _read_links(data, where, seen_paths, pr)

    cube = None
    if "cube" in data:
        cd = get_mapping(data, "cube", where, pr)
        w = f"{where}: cube"
        check_keys(cd, {"unit", "fractal", "macs_per_cycle", "overhead"}, w, pr)
        unit = get_str(cd, "unit", w, pr)
        if unit and unit_set and unit not in unit_set:
            pr.add(f"{w}: unknown unit '{unit}'")
        fractal = get_list(cd, "fractal", w, pr, default=[16, 16, 16])
        if len(fractal) != 3 or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in fractal
        ):
            pr.add(f"{w}: 'fractal' must be three positive integers, got {fractal!r}")
            fractal = [16, 16, 16]
        macs = get_mapping(cd, "macs_per_cycle", w, pr, required=True)
        macs_ok = {}
        for dt in sorted(macs):
            if dt not in DTYPE_BYTES:
                pr.add(f"{w}: macs_per_cycle: unknown dtype '{dt}'")
            macs_ok[dt] = get_int(macs, dt, f"{w}.macs_per_cycle", pr, minimum=1)
        cube = CubeModel(unit, tuple(fractal), macs_ok, get_int(cd, "overhead", w, pr, default=0, minimum=0))

    vector = None
    if "vector" in data:
        vd = get_mapping(data, "vector", where, pr)
        w = f"{where}: vector"
        check_keys(vd, {"unit", "bytes_per_cycle", "overhead", "passes"}, w, pr)
        unit = get_str(vd, "unit", w, pr)
        if unit and unit_set and unit not in unit_set:
            pr.add(f"{w}: unknown unit '{unit}'")
        passes = get_mapping(vd, "passes", w, pr)
        passes_ok = {k: get_number(passes, k, f"{w}.passes", pr, positive=True) for k in sorted(passes)}
        for k in sorted(set(passes) - set(VECOPS)):
            pr.add(f"{w}.passes: unknown vector op '{k}' (ops: {', '.join(VECOPS)})")
        vector = VectorModel(
            unit,
            get_number(vd, "bytes_per_cycle", w, pr, positive=True),
            get_int(vd, "overhead", w, pr, default=0, minimum=0),
            passes_ok,
        )

    roles = _read_roles(data, where, spaces, pr)

    pr.raise_if_any(HardwareError)
    return Hardware(
        name=name,
        cores=cores,
        units=units,
        spaces=spaces,
        sync=sync,
        paths=paths,
        links=links,
        cube=cube,
        vector=vector,
        clock_ghz=clock,
        description=description,
        source=where,
        roles=roles,
    )


def _read_roles(data: dict[str, Any], where: str, spaces: list[Space], pr: Problems) -> dict[str, str]:
    """``[roles]``: role -> a declared space; ``global`` unbounded, the others bounded."""
    body = get_mapping(data, "roles", where, pr)
    w = f"{where}: roles"
    check_keys(body, ROLES, w, pr)
    by_name = {s.name: s for s in spaces}
    out = {}
    for role in sorted(set(body) & set(ROLES)):
        space = get_str(body, role, w, pr)
        if not space:
            continue
        sp = by_name.get(space)
        if sp is None:
            pr.add(f"{w}: {role} = '{space}' is not a declared space ({', '.join(by_name)})")
        elif role == "global" and sp.bounded:
            pr.add(f"{w}: global = '{space}' must be an unbounded space (global memory)")
        elif role != "global" and not sp.bounded:
            pr.add(f"{w}: {role} = '{space}' must be a bounded (on-chip) space")
        else:
            out[role] = space
    return out


def _read_links(
    data: dict[str, Any], where: str, paths: set[tuple[str, str]], pr: Problems
) -> list[Link]:
    """``[[links]]``: each a name, a positive bandwidth and the declared paths it carries."""
    links = []
    names: set[str] = set()
    for i, body in enumerate(get_list(data, "links", where, pr, default=[])):
        w = f"{where}: links[{i}]"
        if not isinstance(body, dict):
            pr.add(f"{w}: must be a table")
            continue
        name = get_str(body, "name", w, pr)
        if name:
            check_name(name, "link", w, pr)
            w = f"{where}: link '{name}'"
            if name in names:
                pr.add(f"{w}: duplicate link name")
            names.add(name)
        check_keys(body, {"name", "bytes_per_cycle", "paths", "description"}, w, pr)
        bpc = get_number(body, "bytes_per_cycle", w, pr, positive=True)
        if bpc * RATE_DENOM != int(bpc * RATE_DENOM):
            pr.add(f"{w}: 'bytes_per_cycle' = {bpc!r} must be a multiple of 1/{RATE_DENOM}")
        raw = get_str_list(body, "paths", w, pr)
        if "paths" in body and not raw:
            pr.add(f"{w}: 'paths' names no transfer path")
        pairs = []
        for text in raw:
            src, sep, dst = text.partition("->")
            pair = (src.strip(), dst.strip())
            if not sep or not pair[0] or not pair[1]:
                pr.add(f"{w}: path {text!r} must be written 'SRC->DST'")
            elif paths and pair not in paths:
                known = ", ".join(f"{a}->{b}" for a, b in sorted(paths))
                pr.add(f"{w}: unknown path '{text}' (declared [[paths]]: {known})")
            elif pair in pairs:
                pr.add(f"{w}: path '{text}' listed twice")
            else:
                pairs.append(pair)
        links.append(Link(name, bpc, pairs, get_str(body, "description", w, pr, default="")))
    return links


def list_presets() -> list[str]:
    """Names of the hardware presets shipped with the package, sorted."""
    root = resources.files("staticsched") / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def hardware_document(name_or_path: str | FsPath) -> tuple[dict[str, Any], str]:
    """The decoded TOML of a preset (by name) or a file (by path), and the name to report it
    by (``preset 'seed-davinci'`` or the path).

    Raises
    ------
    HardwareError
        When it is neither a preset nor a readable TOML file.
    """
    text_name = str(name_or_path)
    if text_name in list_presets():
        res = resources.files("staticsched") / "presets" / f"{text_name}.toml"
        text = res.read_text(encoding="utf-8")
        where = f"preset '{text_name}'"
    else:
        path = FsPath(text_name)
        if not path.is_file():
            raise HardwareError(
                f"{text_name}: no such hardware file or preset (presets: {', '.join(list_presets())})"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HardwareError(f"{text_name}: cannot read: {exc}") from None
        where = text_name
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"{where}: not valid TOML: {exc}") from None


def load_hardware(name_or_path: str | FsPath | Hardware) -> Hardware:
    """Load a preset by name (``"seed-davinci"``) or a TOML file by path.

    Raises
    ------
    HardwareError
        When the file is missing, is not TOML, or is not a valid hardware model.
    """
    if isinstance(name_or_path, Hardware):
        return name_or_path
    return hardware_from_dict(*hardware_document(name_or_path))
