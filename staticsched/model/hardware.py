"""Hardware resource model: cores, pipes (units), memory spaces, sync budget and costs.

The values only; :mod:`staticsched.model.hardware_toml` reads them from hand-written TOML
(``docs/formats.md``).
"""

from __future__ import annotations

import math

import attrs

from staticsched.errors import HardwareError, InputError
from staticsched.model.nd2nz import Nd2NzModel

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
    #: split-core chips (A2/A3): usable cross-core flag ids *per core* (16 less those reserved
    #: by convention); 0 = the per-core-pair pools of ``cross_core_event_ids``
    cross_core_ids_per_core: int = 0
    #: the CrossCoreSetFlag modes the chip has: 0 (all AICs or all AIVs), 1 (the two AIVs of a
    #: cluster), 2 (AIC <-> both AIVs of its cluster: broadcast set, AND wait)
    cross_core_modes: tuple[int, ...] = attrs.field(converter=tuple, default=())
    #: a cross-core wait stalls every pipe of the waiting core (A2/A3), not just one
    cross_core_wait_stalls_core: bool = False
    #: cycles from a GM-word flag's store to its polling wait seeing it (IBSet/IBWait): how
    #: cores signal where the chip has no hardware flag between them
    gm_flag_latency: int = 0
    #: cycles a GM-word wait holds its core once the word is visible: the final polling load
    #: (a one-word GM read on the waiting core), paid by every GM-word wait, even one whose
    #: word was stored long before it was reached
    gm_flag_poll: int = 0
    #: set by the loader on split chips whose modes lack point-to-point flags: cores per
    #: cluster, and the place in a cluster of the core mode 2 connects to the others (the AIC)
    cluster_size: int = 0
    hub_slot: int = -1

    @property
    def pair_flags(self) -> bool:
        """Whether any core can signal any other with a point-to-point counting flag (the
        coupled presets, and the 950's mode 4); without, a flag is mode 2 or a GM word."""
        return self.cluster_size == 0 or 4 in self.cross_core_modes

    @property
    def no_cross_flag(self) -> str:
        """Why no cross-core flag can be set at all (``""`` when one can): no id, or counters
        that hold no set (a capacity of 0). The solver's and the planner's refusals name it."""
        if self.cross_core_event_ids == 0:
            return "sync.cross_core_event_ids = 0"
        if self.cross_core_capacity == 0:
            return "sync.cross_core_capacity = 0 (a counter that holds no set)"
        return ""

    def route(self, src_core: int, dst_core: int) -> str:
        """How a cross-core flag from ``src_core`` to ``dst_core`` travels: ``""`` a
        point-to-point flag, ``"2"`` a mode-2 flag (the AIC and an AIV of one cluster), ``"gm"``
        a GM word (across clusters, between two AIVs, or where no hardware flag fits)."""
        if self.pair_flags:
            return ""
        cs = self.cluster_size
        if (2 in self.cross_core_modes and src_core // cs == dst_core // cs
                and (src_core % cs == self.hub_slot) != (dst_core % cs == self.hub_slot)):
            return "2"
        return "gm"

    def route_latency(self, route: str) -> int:
        """Cycles from a cross-core SET of ``route`` (:meth:`route`) firing to the flag being
        visible to its wait (a GM word's polling load comes after: :meth:`wait_hold`)."""
        return self.gm_flag_latency if route == "gm" else self.cross_core_latency

    def wait_hold(self, route: str) -> int:
        """Cycles a wait of ``route`` takes once its set is visible: ``gm_flag_poll`` for a GM
        word's polling load, 0 for a hardware flag."""
        return self.gm_flag_poll if route == "gm" else 0

    def latency(self, src: tuple[int, str], dst: tuple[int, str]) -> int:
        """Cycles from an op on pipe ``src`` = ``(core, unit)`` ending to a dependent op on pipe
        ``dst`` starting: 0 on one pipe (program order), ``flag_latency`` across the pipes of
        one core (a flag carries the dependency), across cores the latency of the flag's route
        (``cross_core_latency``, or for a GM word ``gm_flag_latency`` and its wait's polling
        load, ``gm_flag_poll``). The one definition of an edge's latency as programs carry it
        by default: the solver, the normaliser, the schedule check, the sync planner and the
        program builder all use it (:meth:`bound_latency` is what a bound may count)."""
        if src[0] != dst[0]:
            if self.cluster_size and not self.pair_flags:
                route = self.route(src[0], dst[0])
                return self.route_latency(route) + self.wait_hold(route)
            return self.cross_core_latency
        return self.flag_latency if src[1] != dst[1] else 0

    def bound_latency(self, src: tuple[int, str], dst: tuple[int, str]) -> int:
        """:meth:`latency`, or less where the program may carry the edge another way: from an
        AIV across clusters, a barrier (a mode-0 flag, and a mode-2 flag on to an AIC,
        :mod:`staticsched.emit.sync.barriers`) may replace the GM word, so that a lower bound
        holds whichever the planner keeps."""
        cost = self.latency(src, dst)
        if (src[0] != dst[0] and self.cluster_size and not self.pair_flags
                and self.route(src[0], dst[0]) == "gm" and src[0] % self.cluster_size != self.hub_slot
                and 0 in self.cross_core_modes and 2 in self.cross_core_modes):
            hop = self.cross_core_latency if dst[0] % self.cluster_size == self.hub_slot else 0
            cost = min(cost, self.cross_core_latency + hop)
        return cost


@attrs.frozen
class CoreType:
    """A kind of core on a chip whose Cube and Vector sit on separate cores (Ascend A2/A3's
    AIC and AIV): the pipes and on-chip spaces each core of the type owns, and how many cores
    of it one cluster holds. Global spaces (unbounded) are reached from every core type."""

    name: str
    units: tuple[str, ...] = attrs.field(converter=tuple)
    spaces: tuple[str, ...] = attrs.field(converter=tuple)
    per_cluster: int = 1
    description: str = ""


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

    @property
    def units(self) -> int:
        """The path's rate in rate units (:data:`RATE_DENOM` per byte per cycle, floored)."""
        return int(self.bytes_per_cycle * RATE_DENOM)

    def derated_units(self, derate: float) -> int:
        """The path's rate slowed by ``1 + derate`` (a load converting ND to NZ on the fly), in
        rate units: floored to the grid every rate lives on, at least one."""
        return max(1, int(self.units / (1.0 + derate)))


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
    #: the bandwidth derate of an operand load that converts ND to the fractal format on the
    #: fly (MTE2's ND2NZ): its data phase takes ``1 + nd2nz_derate`` times as long (0: free),
    #: one figure for every shape; ``nd2nz`` (a model by tile shape and row stride) replaces it
    nd2nz_derate: float = 0.0
    #: the ND2NZ bandwidth by tile shape and row stride (``[cube.nd2nz]``), or None
    nd2nz: Nd2NzModel | None = None

    @property
    def models_layouts(self) -> bool:
        """Whether the chip prices layouts: an ND operand's load converts it at a cost, so the
        Cube's operand loads say which layout they read (``nd2nz``, ``nz``)."""
        return self.nd2nz is not None or self.nd2nz_derate > 0

    def nd2nz_ratio(self, rows: int, cols: int, stride: int) -> float:
        """How many times longer a load converting a ``rows x cols`` ND tile whose source rows
        are ``stride`` elements apart takes than the same tile read NZ (1: free): the model's
        ratio, else ``1 + nd2nz_derate``."""
        if self.nd2nz is not None:
            return self.nd2nz.ratio(rows, cols, stride)
        return 1.0 + self.nd2nz_derate

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
    #: the fixed cost of launching one kernel, in µs (host delivery, core start-up, teardown);
    #: one static program pays it once, kernel-after-kernel execution once per kernel
    #: (:mod:`staticsched.explore.dispatch`). Nothing in a schedule depends on it.
    launch_overhead_us: float = 0.0
    #: the most ops one fused task may hold (the instruction buffer's limit, seed §2.2); 0: unstated
    max_fused_ops: int = 0
    #: explicit ``[roles]`` entries (role, space); other roles take their default space name
    roles: tuple[tuple[str, str], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=()
    )
    #: separate core types (empty: every core owns every unit and space, the coupled core);
    #: cores are numbered cluster by cluster, each cluster's cores in this order
    core_types: tuple[CoreType, ...] = attrs.field(converter=tuple, default=())
    clusters: int = 0

    @property
    def split(self) -> bool:
        """True when the chip has separate core types (AIC and AIV)."""
        return bool(self.core_types)

    @property
    def cluster_size(self) -> int:
        """Cores per cluster (1 on a coupled chip, where every core is its own cluster)."""
        return sum(t.per_cluster for t in self.core_types) or 1

    def core_type(self, core: int) -> CoreType | None:
        """The type of core ``core`` (None on a coupled chip)."""
        k = core % self.cluster_size
        for t in self.core_types:
            if k < t.per_cluster:
                return t
            k -= t.per_cluster
        return None

    def cluster_of(self, core: int) -> int:
        """The cluster core ``core`` belongs to."""
        return core // self.cluster_size

    def cores_of_type(self, name: str) -> tuple[int, ...]:
        """The cores of type ``name``, in core order (every core on a coupled chip)."""
        if not self.core_types:
            return tuple(range(self.cores))
        return tuple(c for c in range(self.cores) if getattr(self.core_type(c), "name", None) == name)

    def engine_cores(self, engine: str) -> tuple[int, ...]:
        """The cores that run ``engine``'s work (``"cube"`` or ``"vector"``): every core of a
        coupled chip; on a split chip the cores whose type owns that unit (AIC, AIV)."""
        model = self.cube if engine == "cube" else self.vector
        if not self.core_types or model is None:
            return tuple(range(self.cores))
        return tuple(c for c in range(self.cores) if self.core_has_unit(c, model.unit))

    def core_has_unit(self, core: int, unit: str) -> bool:
        """Whether core ``core`` owns pipe ``unit`` (always, on a coupled chip)."""
        t = self.core_type(core)
        return t is None or unit in t.units

    def core_has_space(self, core: int, space: str) -> bool:
        """Whether core ``core`` can hold data in ``space``: global spaces everywhere, on-chip
        spaces on the core types that own them (always, on a coupled chip)."""
        t = self.core_type(core)
        if t is None or not self.has_space(space) or not self.space(space).bounded:
            return True
        return space in t.spaces

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
