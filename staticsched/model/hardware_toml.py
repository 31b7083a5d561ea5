"""Reading a hardware model from TOML (see ``docs/formats.md``): presets ship as package data
and load by name; any other argument is taken as a path. Every problem of a definition is one
line (:class:`~staticsched.errors.HardwareError`). The values it builds are in
:mod:`staticsched.model.hardware`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
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
    positive_ints,
)
from staticsched.errors import HardwareError
from staticsched.model.hardware import (
    DTYPE_BYTES,
    RATE_DENOM,
    ROLES,
    CoreType,
    CubeModel,
    Hardware,
    Link,
    Space,
    SyncModel,
    TransferPath,
    Unit,
    VectorModel,
)
from staticsched.model.nd2nz import read_nd2nz
from staticsched.model.vecops import VECOPS

_TOP_KEYS = {
    "name",
    "cores",
    "clock_ghz",
    "launch_overhead_us",
    "max_fused_ops",
    "description",
    "units",
    "spaces",
    "sync",
    "paths",
    "links",
    "cube",
    "vector",
    "roles",
    "clusters",
    "core_types",
}

#: the CrossCoreSetFlag modes of A2/A3 (graphs-and-split-cores.md §1.2)
_MODES = (0, 1, 2)


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
    split = "core_types" in data or "clusters" in data
    if split:  # the clusters give the core count
        cores = get_int(data, "cores", where, pr, default=0, minimum=0, maximum=4096)
    else:
        cores = get_int(data, "cores", where, pr, minimum=1, maximum=4096)
    clock = get_number(data, "clock_ghz", where, pr, default=1.0, positive=True)
    launch = get_number(data, "launch_overhead_us", where, pr, default=0.0)
    if launch < 0:
        pr.add(f"{where}: 'launch_overhead_us' must be >= 0, got {data['launch_overhead_us']!r}")
        launch = 0.0
    max_fused = get_int(data, "max_fused_ops", where, pr, default=0, minimum=0, maximum=1024)
    description = get_str(data, "description", where, pr, default="")

    units = []
    for uname, body, w in _tables(data, "units", "unit", {"description"}, where, pr):
        units.append(Unit(uname, get_str(body, "description", w, pr, default="")))
    if not units and "units" in data:
        pr.add(f"{where}: 'units' declares no pipe")
    unit_set = {u.name for u in units}

    spaces = []
    space_keys = {"capacity", "unbounded", "alignment", "description"}
    for sname, body, w in _tables(data, "spaces", "space", space_keys, where, pr):
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
                        "cross_core_capacity", "cross_core_ids_per_core", "cross_core_modes",
                        "cross_core_wait_stalls_core", "gm_flag_latency", "gm_flag_poll"}, w, pr)
    modes = get_list(sync_d, "cross_core_modes", w, pr, default=[])
    if any(isinstance(m, bool) or m not in _MODES for m in modes) or len(set(modes)) != len(modes):
        pr.add(f"{w}: 'cross_core_modes' = {modes!r} must list distinct modes of {list(_MODES)}")
        modes = []
    flag_latency = get_int(sync_d, "flag_latency", w, pr, default=0, minimum=0)
    sync = SyncModel(
        event_ids=get_int(sync_d, "event_ids", w, pr, default=8, minimum=0, maximum=64),
        flag_latency=flag_latency,
        cross_core_event_ids=get_int(
            sync_d, "cross_core_event_ids", w, pr, default=16, minimum=0, maximum=1024
        ),
        cross_core_latency=get_int(sync_d, "cross_core_latency", w, pr, default=flag_latency, minimum=0),
        cross_core_capacity=get_int(sync_d, "cross_core_capacity", w, pr, default=15, minimum=0,
                                    maximum=1 << 16),
        cross_core_ids_per_core=get_int(sync_d, "cross_core_ids_per_core", w, pr, default=0, minimum=0,
                                        maximum=1024),
        cross_core_modes=tuple(sorted(modes)),
        cross_core_wait_stalls_core=get_bool(sync_d, "cross_core_wait_stalls_core", w, pr, default=False),
    )
    cross_latency = sync.cross_core_latency
    sync = attrs.evolve(sync, gm_flag_latency=get_int(sync_d, "gm_flag_latency", w, pr,
                                                      default=cross_latency, minimum=0),
                        gm_flag_poll=get_int(sync_d, "gm_flag_poll", w, pr, default=0, minimum=0))

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
        check_keys(cd, {"unit", "fractal", "macs_per_cycle", "overhead", "nd2nz_derate", "nd2nz"}, w, pr)
        unit = get_str(cd, "unit", w, pr)
        if unit and unit_set and unit not in unit_set:
            pr.add(f"{w}: unknown unit '{unit}'")
        fractal = get_list(cd, "fractal", w, pr, default=[16, 16, 16])
        if not positive_ints(fractal, 3):
            pr.add(f"{w}: 'fractal' must be three positive integers, got {fractal!r}")
            fractal = [16, 16, 16]
        macs = get_mapping(cd, "macs_per_cycle", w, pr, required=True)
        macs_ok = {}
        for dt in sorted(macs):
            if dt not in DTYPE_BYTES:
                pr.add(f"{w}: macs_per_cycle: unknown dtype '{dt}'")
            macs_ok[dt] = get_int(macs, dt, f"{w}.macs_per_cycle", pr, minimum=1)
        derate = get_number(cd, "nd2nz_derate", w, pr, default=0.0)
        if derate < 0:
            pr.add(f"{w}: 'nd2nz_derate' must be >= 0 (an ND operand's load takes 1 + derate times "
                   f"as long), got {cd['nd2nz_derate']!r}")
            derate = 0.0
        model = None
        if "nd2nz" in cd:
            if "nd2nz_derate" in cd:
                pr.add(f"{w}: give 'nd2nz_derate' (one figure) or [cube.nd2nz] (a model by shape), not both")
            model = read_nd2nz(get_mapping(cd, "nd2nz", w, pr), f"{w}.nd2nz", pr)
        cube = CubeModel(unit, tuple(fractal), macs_ok, get_int(cd, "overhead", w, pr, default=0, minimum=0),
                         float(derate), model)

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
    clusters, core_types = 0, []
    if split:
        clusters = get_int(data, "clusters", where, pr, minimum=0, maximum=4096)
        core_types = _read_core_types(data, where, units, spaces, pr)
        size = sum(t.per_cluster for t in core_types)
        if "clusters" in data and clusters == 0:
            pr.add(f"{where}: clusters = 0: a chip with core types needs at least one cluster")
        if cores and size and clusters and cores != clusters * size:
            pr.add(f"{where}: cores = {cores} disagrees with clusters = {clusters} of {size} cores "
                   "each (leave 'cores' out: it follows from the clusters)")
        cores = clusters * size
        _check_split_paths(where, core_types, spaces, paths, cube, vector, sync, pr)
        sync = _with_clusters(sync, core_types)
    elif sync.cross_core_modes or sync.cross_core_ids_per_core or sync.cross_core_wait_stalls_core:
        pr.add(f"{where}: sync: 'cross_core_modes', 'cross_core_ids_per_core' and "
               "'cross_core_wait_stalls_core' describe split-core chips: declare [core_types] "
               "and 'clusters' first")

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
        launch_overhead_us=launch,
        max_fused_ops=max_fused,
        description=description,
        source=where,
        roles=roles,
        core_types=core_types,
        clusters=clusters,
    )


def _tables(
    data: dict[str, Any], key: str, what: str, allowed: set[str], where: str, pr: Problems
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """The named tables of ``[key.NAME]`` (required) as ``(name, body, where)``, each name
    checked and each body a table with only ``allowed`` keys; the others reported."""
    for name, body in get_mapping(data, key, where, pr, required=True).items():
        w = f"{where}: {key}.{name}"
        check_name(name, what, where, pr)
        if not isinstance(body, dict):
            pr.add(f"{w}: must be a table")
            continue
        check_keys(body, allowed, w, pr)
        yield name, body, w


def _read_core_types(
    data: dict[str, Any], where: str, units: list[Unit], spaces: list[Space], pr: Problems
) -> list[CoreType]:
    """``[core_types.NAME]``: each its pipes, on-chip spaces and count per cluster; every pipe
    and on-chip space of the chip on some core type."""
    unit_set = {u.name for u in units}
    by_name = {s.name: s for s in spaces}
    out = []
    type_keys = {"units", "spaces", "per_cluster", "description"}
    for tname, body, w in _tables(data, "core_types", "core type", type_keys, where, pr):
        tunits = get_str_list(body, "units", w, pr)
        if not tunits:
            pr.add(f"{w}: 'units' must name at least one pipe")
        for u in tunits:
            if unit_set and u not in unit_set:
                pr.add(f"{w}: unknown unit '{u}' (units: {', '.join(sorted(unit_set))})")
        tspaces = get_str_list(body, "spaces", w, pr)
        for sp in tspaces:
            if sp not in by_name:
                pr.add(f"{w}: unknown space '{sp}' (spaces: {', '.join(by_name)})")
            elif not by_name[sp].bounded:
                pr.add(f"{w}: space '{sp}' is global (unbounded): every core type reaches it, so "
                       "list only on-chip spaces")
        per = get_int(body, "per_cluster", w, pr, minimum=1, maximum=64)
        out.append(CoreType(tname, tunits, tspaces, per, get_str(body, "description", w, pr, default="")))
    if "core_types" in data and not out:
        pr.add(f"{where}: 'core_types' declares no core type")
    if out:
        for u in sorted(unit_set - {u for t in out for u in t.units}):
            pr.add(f"{where}: unit '{u}' is on no core type")
        owned = {sp for t in out for sp in t.spaces}
        for sp in spaces:
            if sp.bounded and sp.name not in owned:
                pr.add(f"{where}: on-chip space '{sp.name}' is on no core type")
    return out


def _check_split_paths(
    where: str,
    core_types: list[CoreType],
    spaces: list[Space],
    paths: list[TransferPath],
    cube: CubeModel | None,
    vector: VectorModel | None,
    sync: SyncModel,
    pr: Problems,
) -> None:
    """A path's unit and its on-chip ends on one core type (the chip has no path between core
    types: AIC data reaches an AIV only through global memory); the Cube's and Vector's units
    on some core type; mode 2 needs clusters of two core types."""
    if not core_types:
        return
    bounded = {s.name for s in spaces if s.bounded}

    def owners(what: str, kind: str) -> str:
        names = [t.name for t in core_types if what in (t.units if kind == "unit" else t.spaces)]
        return f"{kind} {what} on {'/'.join(names) or 'no core type'}"

    for i, p in enumerate(paths):
        ends = [e for e in (p.src, p.dst) if e in bounded]
        if any(p.unit in t.units and all(e in t.spaces for e in ends) for t in core_types):
            continue
        parts = [owners(p.unit, "unit"), *(owners(e, "space") for e in ends)]
        pr.add(f"{where}: paths[{i}] {p.unit} {p.src}->{p.dst}: no core type has the unit and its "
               f"on-chip spaces ({'; '.join(parts)}): the chip has no path between core types")
    for section, model in (("cube", cube), ("vector", vector)):
        if model is not None and model.unit and not any(model.unit in t.units for t in core_types):
            pr.add(f"{where}: {section}: unit '{model.unit}' is on no core type")
    if 2 in sync.cross_core_modes and len(core_types) < 2:
        pr.add(f"{where}: sync: cross_core_modes has 2 (one core type to the other in a cluster) "
               "but the chip declares one core type")
    elif 2 in sync.cross_core_modes and sum(t.per_cluster == 1 for t in core_types) != 1:
        pr.add(f"{where}: sync: cross_core_modes has 2, which joins a cluster's one core of a type "
               "to the others: exactly one core type needs per_cluster = 1 (the AIC), found "
               f"{sum(t.per_cluster == 1 for t in core_types)}")


def _with_clusters(sync: SyncModel, core_types: list[CoreType]) -> SyncModel:
    """``sync`` with the cluster shape its flag routes need (:meth:`SyncModel.route`)."""
    hub, slot = -1, 0
    for t in core_types:
        if t.per_cluster == 1 and hub < 0:
            hub = slot
        slot += t.per_cluster
    return attrs.evolve(sync, cluster_size=slot, hub_slot=hub)


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
