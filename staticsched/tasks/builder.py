"""Building an OpGraph: items, micro-ops and the GM dependencies between tasks.

Kinds lower through a :class:`Builder`. It names spaces by hardware role (``vector``,
``accumulator``, ...), takes every op's unit and duration from the kind table
(:data:`staticsched.model.opkinds.KINDS`), rotates blocks over the cores, and makes every
``load`` depend on exactly the ``store`` ops of earlier tasks whose GM regions it reads.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.opgraph import Item, Op, Tensor
from staticsched.model.opkinds import KINDS, ItemShape, shape_key
from staticsched.model.opsemantics import Region

FP16 = "float16"
FP32 = "float32"


class StoreGrid:
    """The store ops of one GM tensor, indexed by the producer's block grid.

    A tensor has one writer task whose stores cover it once, each a union of cells of a grid
    of row spans x column spans (one cell for a task of equal tiles; a ``move`` task's blocks
    may span several), so the stores a region intersects are those of a rectangle of cells
    found by bisection.
    """

    def __init__(self, row_spans: Sequence[tuple[int, int]], col_spans: Sequence[tuple[int, int]]):
        self.row_starts = [r0 for r0, _ in row_spans]
        self.col_starts = [c0 for c0, _ in col_spans]
        self.cells: dict[tuple[int, int], str] = {}

    def add(self, region: Region, op_id: str) -> None:
        (r0, r1), (c0, c1) = region
        for i in range(bisect.bisect_left(self.row_starts, r0), bisect.bisect_left(self.row_starts, r1)):
            for j in range(bisect.bisect_left(self.col_starts, c0), bisect.bisect_left(self.col_starts, c1)):
                self.cells[(i, j)] = op_id

    def intersecting(self, region: Region) -> list[str]:
        (r0, r1), (c0, c1) = region
        rows = range(bisect.bisect_right(self.row_starts, r0) - 1, bisect.bisect_left(self.row_starts, r1))
        cols = range(bisect.bisect_right(self.col_starts, c0) - 1, bisect.bisect_left(self.col_starts, c1))
        # a store spanning several cells is one dependency
        return list(dict.fromkeys(self.cells[(i, j)] for i in rows for j in cols))


def balance_cores(costs: Sequence[int], cores: int, first: int = 0) -> list[int]:
    """The core of each unit of work: the costliest first, each onto the least loaded core
    (ties: the next core in the rotation that starts at ``first``). Equal costs give the plain
    rotation ``first, first + 1, ...``."""
    load = [0] * cores
    out = [0] * len(costs)
    for u in sorted(range(len(costs)), key=lambda u: (-costs[u], u)):
        c = min(range(cores), key=lambda c: (load[c], (c - first) % cores))
        out[u] = c
        load[c] += costs[u]
    return out


class Builder:
    """Accumulates items and ops in program order (the order of the OpGraph's op list)."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.items: list[Item] = []
        self.ops: list[Op] = []
        self.shapes: dict[str, ItemShape] = {}
        self.stores: dict[str, StoreGrid] = {}
        self.next_core = 0
        self._roles: dict[str, str] = {}
        #: tensors placed outside the global space (TaskGraph ``space``), by name
        self.placement: dict[str, str] = {}
        #: transfers a placement asks for that the hardware has no path for, one line each
        self.problems: dict[tuple[str, str, str], str] = {}
        #: GM tensors the lowering adds (a split chip's workspace rings), in creation order
        self.workspaces: list[Tensor] = []
        #: (unit, duration) per :func:`~staticsched.model.opkinds.shape_key` of the ops so far
        self._costs: dict[tuple, tuple[str, int]] = {}
        #: each GM tensor's layout and row length (elements), the task graph's and the
        #: workspaces': what its loads and stores say they read and write
        self.layouts: dict[str, str] = {}
        self.columns: dict[str, int] = {}
        cube = hw.cube
        self._prices_layouts = cube is not None and cube.models_layouts
        self._operand_space = hw.role_space("operand")

    # ------------------------------------------------------------------ cores
    # Blocks rotate over the cores of their engine (every core of a coupled chip; the AICs or
    # the AIVs of a split one); ``first`` is a position in that rotation.
    def core_of(self, block: int, first: int, engine: str = "vector") -> int:
        cores = self.hw.engine_cores(engine)
        return cores[(first + block) % len(cores)]

    def start_task(self, blocks: int, engine: str = "vector") -> int:
        """The rotation position of a task's block 0; the next task continues the rotation
        after ``blocks``."""
        first = self.next_core
        self.next_core = (first + blocks) % len(self.hw.engine_cores(engine))
        return first

    def balance(self, costs: Sequence[int], engine: str = "cube") -> list[int]:
        """Cores for a task's units of work of these costs (:func:`balance_cores` over the
        engine's cores); the next task continues the rotation after them."""
        cores = self.hw.engine_cores(engine)
        return [cores[c] for c in balance_cores(costs, len(cores), self.start_task(len(costs), engine))]

    # ------------------------------------------------------------------ items
    def space(self, role: str) -> str:
        """The space playing ``role`` on this hardware (see ``hardware.ROLES``)."""
        s = self._roles.get(role)
        if s is None:
            s = self._roles[role] = self.hw.role(role)
        return s

    def item(self, name: str, role: str, dtype: str, shape: tuple[int, int]) -> str:
        """A new item of ``shape`` in the space playing ``role``."""
        it = Item(name, self.space(role), shape[0] * shape[1] * DTYPE_BYTES[dtype], dtype, shape)
        self.items.append(it)
        self.shapes[name] = it.as_shape()
        return name

    def workspace(self, tensor: Tensor) -> None:
        """Declare a GM tensor the lowering itself needs (not one of the task graph's)."""
        self.workspaces.append(tensor)
        self.declare(tensor.name, tensor.layout, tensor.shape[1])

    def declare(self, tensor: str, layout: str, columns: int) -> None:
        """A GM tensor's layout and row length, which its accesses state."""
        self.layouts[tensor] = layout
        self.columns[tensor] = columns

    def output(
        self, tensor: str, row_spans: Sequence[tuple[int, int]], col_spans: Sequence[tuple[int, int]]
    ) -> None:
        """Declare the block grid a task stores ``tensor`` in (for consumers' dependencies)."""
        self.stores[tensor] = StoreGrid(row_spans, col_spans)

    # ------------------------------------------------------------------ ops
    def op(
        self,
        op_id: str,
        kind_name: str,
        core: int,
        reads: Sequence[str],
        writes: Sequence[str],
        attrs_: Mapping[str, Any],
        deps: Sequence[str] = (),
    ) -> None:
        r = [self.shapes[n] for n in reads]
        w = [self.shapes[n] for n in writes]
        key = shape_key(kind_name, attrs_.items(), r, w)
        cost = self._costs.get(key)
        if cost is None:
            kind = KINDS[kind_name]
            cost = self._costs[key] = (kind.unit(self.hw, attrs_, r, w), kind.duration(self.hw, attrs_, r, w))
        self.ops.append(
            Op(
                id=op_id,
                unit=cost[0],
                duration=cost[1],
                core=core,
                deps=deps,
                reads=reads,
                writes=writes,
                kind=kind_name,
                attrs=attrs_,
            )
        )

    def load(
        self, op_id: str, core: int, dst: str, tensor: str, region: Region, *, transpose: bool = False,
    ) -> None:
        """GM ``region`` of ``tensor`` (transposed when asked) into the top-left of ``dst``, in
        the tensor's layout: an NZ tensor's load says so (``nz``); an ND tensor's load into the
        Cube's operand buffer converts it to the fractal format on the fly (``nd2nz``, with its
        source row ``stride``), on a chip that prices it (the chip's ND2NZ cost)."""
        attrs_: dict[str, Any] = {"tensor": tensor, "region": region}
        if transpose:
            attrs_["transpose"] = True
        self._place(attrs_, tensor, dst, to_chip=True)
        if self.layouts.get(tensor) == "NZ":
            attrs_["nz"] = True
        elif self._prices_layouts and self.shapes[dst].space == self._operand_space:
            attrs_["nd2nz"] = True
            attrs_["stride"] = self.columns[tensor]
        grid = self.stores.get(tensor)
        deps = grid.intersecting(region) if grid is not None else []
        self.op(op_id, "load", core, (), (dst,), attrs_, deps)

    def store(
        self, op_id: str, core: int, src: str, tensor: str, region: Region, *, deps: Sequence[str] = ()
    ) -> None:
        """``src``'s top-left into GM ``region`` of ``tensor``, in its layout (``nz`` for an NZ
        tensor); ``deps``: ops that must end first (the readers of a workspace slot it
        overwrites)."""
        attrs_: dict[str, Any] = {"tensor": tensor, "region": region}
        self._place(attrs_, tensor, src, to_chip=False)
        if self.layouts.get(tensor) == "NZ":
            attrs_["nz"] = True
        self.op(op_id, "store", core, (src,), (), attrs_, deps)
        self.stores[tensor].add(region, op_id)

    def _place(self, attrs_: dict[str, Any], tensor: str, item: str, *, to_chip: bool) -> None:
        """Name the space of a placed tensor on its transfer (``space``), when the hardware
        has the path; a missing path becomes one problem line (the transfer keeps the global
        space so that building goes on and every problem is found)."""
        space = self.placement.get(tensor)
        if not space:
            return
        on_chip = self.shapes[item].space
        src, dst = (space, on_chip) if to_chip else (on_chip, space)
        if self.hw.has_path(src, dst):
            attrs_["space"] = space
            return
        self.problems.setdefault(
            (tensor, src, dst),
            f"tensor '{tensor}' (space '{space}'): hardware '{self.hw.name}' has no transfer path "
            f"{src}->{dst} in [[paths]]",
        )

    def move(self, op_id: str, core: int, src: str, dst: str, rows: int, cols: int) -> None:
        self.op(op_id, "move", core, (src,), (dst,), {"rows": rows, "cols": cols})

    def mmad(self, op_id: str, core: int, a: str, b: str, c: str, m: int, n: int, k: int, init: bool) -> None:
        reads = (a, b) if init else (a, b, c)
        self.op(op_id, "mmad", core, reads, (c,), {"m": m, "n": n, "k": k, "init": init})

    def fixpipe(self, op_id: str, core: int, src: str, dst: str, rows: int, cols: int) -> None:
        self.op(op_id, "fixpipe", core, (src,), (dst,), {"rows": rows, "cols": cols})

    def vec(
        self,
        op_id: str,
        core: int,
        op: str,
        reads: Sequence[str],
        out: str,
        extent: tuple[int, int],
        *,
        scalar: float | None = None,
        **extra: int,
    ) -> None:
        """Vector ``op`` over ``extent`` of ``reads`` into ``out`` (``out`` may be ``reads[0]``:
        in place)."""
        attrs_: dict[str, Any] = {"op": op, "rows": extent[0], "cols": extent[1]}
        if scalar is not None:
            attrs_["scalar"] = scalar
        attrs_.update(extra)
        self.op(op_id, "vec", core, tuple(reads), (out,), attrs_)
