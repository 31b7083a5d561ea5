"""``OpGraph.check(hw)``: an OpGraph against a hardware model, every violation at once.

What it checks: op ids unique, units the hardware's and on a core that has them, durations
positive, cores in range, dependencies on known ops; items known, sizes within their space,
core-local items on one core (of a type that has the space); no item read before a write;
each kinded op's reads, writes and attributes as its kind declares, its extents fitting its
operands and its duration the cost model's (:data:`staticsched.model.opkinds.KINDS`); no
dependency cycle. It reads the graph through :class:`CheckedGraph` (a protocol, so that the
value type can call the check without a circle of imports, as
:mod:`staticsched.model.schedule_check` does for a schedule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import networkx as nx

from staticsched._fields import Problems
from staticsched.errors import GraphError, InputError
from staticsched.model.graphs import topological_order
from staticsched.model.hardware import Hardware
from staticsched.model.opkinds import KINDS, ItemShape, OpKind, extent_problems, shape_key


class CheckedOp(Protocol):
    """What the check reads of an :class:`staticsched.model.opgraph.Op`."""

    @property
    def id(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def duration(self) -> int: ...
    @property
    def core(self) -> int: ...
    @property
    def deps(self) -> tuple[str, ...]: ...
    @property
    def reads(self) -> tuple[str, ...]: ...
    @property
    def writes(self) -> tuple[str, ...]: ...
    @property
    def kind(self) -> str: ...
    @property
    def attrs(self) -> tuple[tuple[str, Any], ...]: ...
    @property
    def attr(self) -> dict[str, Any]: ...


class CheckedItem(Protocol):
    """What the check reads of an :class:`staticsched.model.opgraph.Item`."""

    @property
    def name(self) -> str: ...
    @property
    def space(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    def as_shape(self) -> ItemShape: ...


class CheckedEdge(Protocol):
    """What the check reads of an :class:`staticsched.model.opgraph.Edge`."""

    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...


class CheckedGraph(Protocol):
    """What the check reads of an :class:`staticsched.model.opgraph.OpGraph`."""

    @property
    def ops(self) -> Sequence[CheckedOp]: ...
    @property
    def items(self) -> Sequence[CheckedItem]: ...
    @property
    def tensors(self) -> Sequence[Any]: ...
    @property
    def op_index(self) -> Mapping[str, int]: ...
    @property
    def item_map(self) -> Mapping[str, CheckedItem]: ...
    @property
    def tensor_map(self) -> Mapping[str, Any]: ...
    @property
    def accesses(self) -> Mapping[str, list[tuple[int, str]]]: ...
    @property
    def edges(self) -> Sequence[CheckedEdge]: ...


def check_opgraph(graph: CheckedGraph, hw: Hardware) -> None:
    """Validate ``graph`` against ``hw``; report every violation at once.

    Parameters
    ----------
    graph : OpGraph
        The graph to check.
    hw : Hardware
        The hardware its ops, items and durations are checked against.

    Raises
    ------
    GraphError
        One line per problem naming the op/item/key and the numbers.
    """
    pr = Problems()
    units = set(hw.unit_names)
    seen: set[str] = set()
    # what the kind table says of an op, per distinct shape (opkinds.shape_key): a chip's
    # ops repeat a few (every 128^3 mmad costs the same, every 128x256 load too)
    memo: dict[tuple, tuple[list[str], int | None]] = {}
    shapes = {it.name: it.as_shape() for it in graph.items}
    op_index, item_map = graph.op_index, graph.item_map
    has_unit: dict[tuple[int, str], bool] = {}
    for op in graph.ops:
        if op.id in seen:
            pr.add(f"op '{op.id}': duplicate id")
        seen.add(op.id)
        if op.unit not in units:
            pr.add(
                f"op '{op.id}': unknown unit '{op.unit}' "
                f"(hardware '{hw.name}' has {', '.join(hw.unit_names)})"
            )
        if op.duration <= 0:
            pr.add(f"op '{op.id}': duration must be > 0, got {op.duration}")
        if not 0 <= op.core < hw.cores:
            pr.add(f"op '{op.id}': core {op.core} out of range 0..{hw.cores - 1}")
        elif op.unit in units:
            pair = (op.core, op.unit)
            ok = has_unit.get(pair)
            if ok is None:
                ok = has_unit[pair] = hw.core_has_unit(op.core, op.unit)
            if not ok:
                t = hw.core_type(op.core)
                assert t is not None
                pr.add(f"op '{op.id}': core {op.core} is an {t.name}, which has no unit '{op.unit}' "
                       f"({t.name}: {', '.join(t.units)})")
        for d in op.deps:
            if d not in op_index:
                pr.add(f"op '{op.id}': dependency on unknown op '{d}'")
            elif d == op.id:
                pr.add(f"op '{op.id}': depends on itself")
        known = True
        for name in (*op.reads, *op.writes):
            if name not in item_map:
                pr.add(f"op '{op.id}': unknown item '{name}'")
                known = False
        if op.kind:
            kind = KINDS.get(op.kind)
            if kind is None:
                pr.add(f"op '{op.id}': unknown kind '{op.kind}' (kinds: {', '.join(KINDS)})")
                continue
            reads = tuple(shapes.get(n) for n in op.reads)
            writes = tuple(shapes.get(n) for n in op.writes)
            try:
                key = (shape_key(op.kind, op.attrs, reads, writes), known)
                found = memo.get(key)
            except (TypeError, ValueError):  # an unhashable value, a malformed region: no memo
                key, found = None, None
            if found is None:
                found = _kind_lines(graph, op, kind, hw, reads, writes, known)
                if key is not None:
                    memo[key] = found
            lines, want = found
            for line in lines:
                pr.add(f"op '{op.id}': {line}")
            if want is not None and op.duration != want:
                pr.add(
                    f"op '{op.id}': duration {op.duration} disagrees with the cost model of "
                    f"'{hw.name}' for kind '{kind.name}' ({want} cycles)"
                )
    names: set[str] = set()
    spaces = {s.name: s for s in hw.spaces}
    for it in graph.items:
        if it.name in names:
            pr.add(f"item '{it.name}': duplicate name")
        names.add(it.name)
        if it.bytes < 0:
            pr.add(f"item '{it.name}': bytes must be >= 0, got {it.bytes}")
        if it.space:
            sp = spaces.get(it.space)
            if sp is None:
                pr.add(
                    f"item '{it.name}': unknown space '{it.space}' "
                    f"(hardware '{hw.name}' has {', '.join(hw.space_names)})"
                )
            else:
                if sp.bounded and it.bytes > sp.capacity:
                    pr.add(
                        f"item '{it.name}': {it.bytes} bytes do not fit space "
                        f"'{it.space}' of {sp.capacity} bytes"
                    )
    for name, acc in sorted(graph.accesses.items()):
        if name not in graph.item_map:
            continue
        first_i, first_mode = acc[0]
        if first_mode == "r" and not any(m == "w" and i == first_i for i, m in acc):
            pr.add(f"item '{name}': read by op '{graph.ops[first_i].id}' before any op writes it")
        it = graph.item_map[name]
        if it.space and it.space in spaces and spaces[it.space].bounded:
            cores = sorted({graph.ops[i].core for i, _ in acc})
            if len(cores) > 1:
                pr.add(f"item '{name}' in core-local space '{it.space}' is accessed from cores {cores}")
            elif hw.split and 0 <= cores[0] < hw.cores and not hw.core_has_space(cores[0], it.space):
                t = hw.core_type(cores[0])
                assert t is not None
                pr.add(f"item '{name}' in space '{it.space}' is accessed from core {cores[0]}, an "
                       f"{t.name}, which has no {it.space} ({t.name}: {', '.join(t.spaces)})")
    if not pr:
        _check_cycles(graph, pr)
    pr.raise_if_any(GraphError)


def _kind_lines(
    graph: CheckedGraph, op: CheckedOp, kind: OpKind, hw: Hardware, reads: tuple, writes: tuple, known: bool
) -> tuple[list[str], int | None]:
    """What the kind table says of ``op``: its problems (without the op's name: every op of
    the same kind, attributes and operand shapes gets the same ones) and the duration the
    cost model gives it (None when it has none)."""
    a = op.attr
    out = []
    lo, hi = kind.read_range(a)
    if not (lo <= len(op.reads) <= hi):
        out.append(f"kind '{kind.name}' reads {len(op.reads)} items, expected {lo}..{hi}")
    if len(op.writes) != len(kind.writes):
        out.append(f"kind '{kind.name}' writes {len(op.writes)} items, expected {len(kind.writes)}")
    if kind.gm and "tensor" in a and graph.tensors and a["tensor"] not in graph.tensor_map:
        out.append(f"unknown tensor '{a['tensor']}'")
    missing = kind.missing(a)
    out.extend(f"kind '{kind.name}' needs attribute '{key}'" for key in missing)
    if missing or not known:
        return out, None
    out.extend(extent_problems(kind, a, reads, writes))
    if len(op.reads) < len(kind.reads) - kind.optional_reads or len(op.writes) != len(kind.writes):
        return out, None
    # a kinded op's duration is the cost model's: the verifier's cost check holds every
    # program to it, so a disagreement is cheaper to report here than after solving
    try:
        return out, kind.duration(hw, a, reads, writes)
    except (InputError, KeyError, ValueError) as exc:
        out.append(f"kind '{kind.name}' has no cost on hardware '{hw.name}': {exc}")
        return out, None


def _check_cycles(graph: CheckedGraph, pr: Problems) -> None:
    # Kahn's algorithm on op indices is linear; networkx only names the cycle among the
    # ops Kahn could not order (find_cycle on the whole 170k-op graph takes ~50 s).
    n = len(graph.ops)
    succ: list[list[int]] = [[] for _ in range(n)]
    idx = graph.op_index
    for e in graph.edges:
        succ[idx[e.src]].append(idx[e.dst])
    ordered = topological_order(succ)
    if len(ordered) == n:
        return
    left = sorted(set(range(n)).difference(ordered))
    on = set(left)
    g = nx.DiGraph()
    g.add_edges_from((graph.ops[i].id, graph.ops[j].id) for i in left for j in succ[i] if j in on)
    cycle = nx.find_cycle(g)
    path = [u for u, _ in cycle] + [cycle[0][0]]
    pr.add(f"dependency cycle: {' -> '.join(path)}")
