"""Layout assignment: which GM tensors are stored in the Cube's fractal format (NZ), and where
each conversion happens (the seed's §3.4; ``reference/layouts-and-conv.md`` §2).

A tensor's layout changes only what its accesses cost, so the choice is per tensor. The graph
is lowered once and every load and store of a tensor priced under both layouts with the kind
table's own durations (:func:`staticsched.model.opkinds.layout_ratio`):

- **ND**: a Cube operand load converts the tile on the fly on its MTE2, at the chip's ND2NZ
  ratio for the tile's shape and the tensor's row stride; Vector loads and stores move rows;
- **NZ**: every access moves fractal runs, one per column block: the Cube's loads are plain
  copies, the producer's stores write NZ (the AIV's or FixPipe's DMA puts each 16-element row
  piece in its fractal), the Vector's loads gather runs back into rows, so elementwise ops
  and row reductions alike read row-major tiles in the unified buffer; a run shorter than a
  fractal's 16 rows moves at ``rows / 16`` of the rate.

``rules`` keeps the layout whose accesses add the fewer pipe cycles over their paths' full
rates (ties: ND). A graph's inputs and outputs are ND (the caller's arrays); its constants
(weights) are converted once at load time, so they take NZ whenever that is cheaper. An input
the Cube reads may get an **AIV reformat task** (an ``elementwise`` ``copy`` into an NZ copy
the Cube readers take instead) when the copy's load and store cost less than the conversions
they save. ``search`` then checks by scheduling, as fusion's search does: each decision that
is not ND is undone in turn (list-method makespans) and kept undone when that is faster.

A chip that does not price layouts (no ND2NZ cost) keeps every tensor ND.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware import Hardware
from staticsched.model.opkinds import KINDS, item_shape

#: how layouts are decided: ``given`` keeps the graph's own, ``rules`` by the cost model,
#: ``search`` the rules checked by scheduling
LAYOUT_MODES = ("given", "rules", "search")

#: the suffix of an input's NZ copy made by an AIV reformat task
NZ_COPY = "@nz"


@attrs.frozen
class Access:
    """The accesses of one tensor by one task: how many, by which pipe, and their cycles as
    lowered (ND), read or written NZ, and at their paths' full rates."""

    task: str
    what: str  # "Cube loads", "Vector loads", "stores"
    count: int
    nd: int
    nz: int
    plain: int


@attrs.frozen
class Decision:
    """One tensor's layout and why."""

    tensor: str
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    layout: str
    #: graph input, constant, output or intermediate
    role: str
    #: the pipe cycles its accesses add over their full rates, ND and NZ
    nd_extra: int
    nz_extra: int
    accesses: tuple[Access, ...] = attrs.field(converter=tuple)
    rule: str
    #: an input's reformat task and the cycles its copy costs, if one was made
    reformat: str = ""
    reformat_cycles: int = 0

    def places(self) -> str:
        """Where the conversions of this tensor happen."""
        cube = [a for a in self.accesses if a.what == "Cube loads"]
        if self.reformat:
            return (f"an AIV reformat task ({self.reformat}: {self.reformat_cycles:,} cycles) writes its NZ "
                    f"copy, which the Cube loads plainly")
        if self.layout == "NZ":
            if self.role == "constant":
                return "converted once at load time (a weight); every access moves fractal runs"
            writers = [a for a in self.accesses if a.what == "stores"]
            parts = [f"{a.task} writes NZ ({a.count} stores, +{a.nz - a.plain:,} cycles)" for a in writers]
            parts += [f"{a.task} reads it NZ ({a.count} {a.what}, +{a.nz - a.plain:,} cycles)"
                      for a in self.accesses if a.what != "stores"]
            return "; ".join(parts) or "none"
        conv = [f"{a.task}'s MTE2 converts on the fly ({a.count} loads, +{a.nd - a.plain:,} cycles)"
                for a in cube if a.nd > a.plain]
        return "; ".join(conv) or "none: no Cube load reads it"


@attrs.frozen
class Layouts:
    """The layout pass's result: the graph with its tensors' layouts (and reformat tasks),
    every decision, and the search's makespans."""

    graph: TaskGraph
    mode: str
    decisions: tuple[Decision, ...] = attrs.field(converter=tuple)
    search: tuple[str, ...] = attrs.field(converter=tuple, default=())
    note: str = ""

    def lines(self) -> list[str]:
        """The summary's line."""
        if self.note:
            return [f"layout pass  : {self.mode}: {self.note}"]
        nz = [d for d in self.decisions if d.layout == "NZ"]
        conv = [d for d in self.decisions if d.layout == "ND" and d.nd_extra > 0]
        reformat = [d for d in self.decisions if d.reformat]
        return [f"layout pass  : {self.mode}: {len(nz)} of {len(self.decisions)} tensors NZ "
                f"({sum(d.role == 'constant' for d in nz)} constants, "
                f"{sum(d.role != 'constant' for d in nz)} "
                f"written NZ by their producers), {len(reformat)} AIV reformat task(s), {len(conv)} ND "
                f"tensor(s) converted by their Cube loads (+{sum(d.nd_extra for d in conv):,} cycles); "
                f"layouts.txt has every tensor"]

    def text(self) -> str:
        """``layouts.txt``: every tensor's layout, its conversions and their cycles."""
        out = [f"layout pass: {self.mode}"]
        if self.note:
            out.append(self.note)
            return "\n".join(out) + "\n"
        out.append("each tensor: the pipe cycles its accesses add over their paths' full rates if ND and if "
                   "NZ (an ND tile the Cube loads is converted by MTE2 at the chip's ND2NZ ratio for its "
                   "shape; an NZ access of fewer than 16 rows moves short runs), the layout kept, and where "
                   "it converts")
        for d in self.decisions:
            out.append(f"{d.tensor} [{d.shape[0]}x{d.shape[1]}] {d.role}: {d.layout} (ND +{d.nd_extra:,}, "
                       f"NZ +{d.nz_extra:,} cycles; {d.rule})")
            out.append(f"  conversion: {d.places()}")
            for a in d.accesses:
                out.append(f"  {a.task}: {a.count} {a.what}: {a.plain:,} cycles at full rate, ND {a.nd:,}, "
                           f"NZ {a.nz:,}")
        if self.search:
            out.append("search (list-method makespans):")
            out += [f"  {line}" for line in self.search]
        return "\n".join(out) + "\n"


def _kind_cycles(hw: Hardware, kind: str, attrs_: Mapping[str, Any], shapes: Sequence[Any]) -> int:
    k = KINDS[kind]
    full = {**dict(k.defaults), **attrs_}
    return k.duration(hw, full, shapes if kind == "store" else (), shapes if kind == "load" else ())


def price_accesses(tg: TaskGraph, hw: Hardware) -> dict[str, list[Access]]:
    """Every tensor's accesses by task, priced ND (as lowered from ``tg`` with its tensors ND),
    NZ, and at full rate."""
    from staticsched.frontend.lowering import lower

    og = lower(_with_layouts(tg, {t.name: "ND" for t in tg.tensors}), hw, op_budget=None)
    items = og.item_map
    tasks = [t.id for t in tg.tasks]
    found: dict[tuple[str, str, str], list[int]] = {}
    names = {t.name for t in tg.tensors}
    for op in og.ops:
        if op.kind not in ("load", "store"):
            continue
        a = op.attr
        tensor = a.get("tensor", "")
        if tensor not in names:
            continue  # a workspace: the lowering's own
        item = items[(op.writes if op.kind == "load" else op.reads)[0]]
        shapes = [item_shape(item.space, item.bytes, item.dtype, item.shape)]
        base = {k: v for k, v in a.items() if k not in ("nd2nz", "stride", "nz")}
        nd = op.duration
        nz = _kind_cycles(hw, op.kind, {**base, "nz": True}, shapes)
        plain = _kind_cycles(hw, op.kind, base, shapes)
        cube_load = a.get("nd2nz") or item.space == hw.role_space("operand")
        what = "stores" if op.kind == "store" else ("Cube loads" if cube_load else "Vector loads")
        task = _task_of(op.id, tasks)
        acc = found.setdefault((tensor, task, what), [0, 0, 0, 0])
        acc[0] += 1
        acc[1] += nd
        acc[2] += nz
        acc[3] += plain
    out: dict[str, list[Access]] = {}
    for (tensor, task, what), (n, nd, nz, plain) in sorted(found.items()):
        out.setdefault(tensor, []).append(Access(task, what, n, nd, nz, plain))
    return out


def _task_of(op_id: str, tasks: Iterable[str]) -> str:
    best = ""
    for t in tasks:
        if len(t) > len(best) and op_id.startswith(t + "."):
            best = t
    return best


def _with_layouts(tg: TaskGraph, layouts: Mapping[str, str]) -> TaskGraph:
    """``tg`` with these tensors' layouts (re-read, so that the tasks see them)."""
    doc = taskgraph_to_dict(tg, constants="")
    doc.pop("constants", None)
    for name, layout in layouts.items():
        body = doc["tensors"][name]
        if layout == "NZ":
            body["layout"] = "NZ"
        else:
            body.pop("layout", None)
    out = taskgraph_from_dict(doc, "<layouts>")
    return TaskGraph(out.tensors, out.tasks, tg.constants)


def _with_reformats(tg: TaskGraph, inputs: Sequence[str]) -> TaskGraph:
    """``tg`` with an AIV reformat task per input of ``inputs``: an ``elementwise`` ``copy``
    into ``<input>@nz`` (NZ), which the Cube's readers of the input read instead."""
    from staticsched.tasks import kind_of

    doc = taskgraph_to_dict(tg, constants="")
    doc.pop("constants", None)
    copies = []
    for name in inputs:
        copy = name + NZ_COPY
        doc["tensors"][copy] = {**doc["tensors"][name], "layout": "NZ"}
        for task, body in zip(tg.tasks, doc["tasks"], strict=True):
            cube = set(kind_of(task).cube_operands(task))
            if name in cube:
                for key in ("a", "b", "q", "k", "v"):
                    if body.get(key) == name:
                        body[key] = copy
        copies.append({"id": f"layout/{name}", "type": "elementwise", "op": "copy", "inputs": [name],
                       "out": copy})
    # after the loop: the zip above pairs the graph's tasks with the document's, one to one
    doc["tasks"][:0] = copies
    out = taskgraph_from_dict(doc, "<layouts>")
    return TaskGraph(out.tensors, out.tasks, tg.constants)


def assign_layouts(tg: TaskGraph, hw: Hardware, *, mode: str = "rules", fixed: Iterable[str] = (),
                   weights_nz: bool = True,
                   measure: Callable[[TaskGraph], int] | None = None) -> Layouts:
    """Decide every tensor's layout (see the module docstring).

    Parameters
    ----------
    tg
        The (fused, mapped) task graph.
    hw
        The hardware whose ND2NZ costs decide.
    mode
        One of :data:`LAYOUT_MODES`.
    fixed
        Tensors that stay ND whatever they cost (the model's inputs and outputs: the caller's
        arrays are row-major).
    weights_nz
        Let constants take NZ (converted at load time); False keeps them ND.
    measure
        ``search``'s makespan of a candidate graph (the list method).
    """
    if mode == "given":
        return Layouts(tg, mode, (), note="the graph's own layouts")
    cube = hw.cube
    if cube is None or not cube.models_layouts:
        return Layouts(_with_layouts(tg, {t.name: "ND" for t in tg.tensors if t.layout == "NZ"}), mode, (),
                       note=f"hardware '{hw.name}' converts layouts at no cost: every tensor ND")
    fixed = set(fixed)
    prices = price_accesses(tg, hw)
    constants = set(tg.constants)
    writers = tg.writer
    decisions: list[Decision] = []
    layouts: dict[str, str] = {}
    reformats: list[str] = []
    for t in tg.tensors:
        acc = tuple(prices.get(t.name, ()))
        nd_extra = sum(a.nd - a.plain for a in acc)
        nz_extra = sum(a.nz - a.plain for a in acc)
        role = ("constant" if t.name in constants else "input" if t.name not in writers
                else "output" if t.name in fixed else "intermediate")
        shape = t.shape2d
        if role in ("input", "output") or (role == "intermediate" and t.name in fixed):
            layout, rule = "ND", "the caller's arrays are row-major"
            copy_cost = _reformat_cost(hw, t, acc)
            saved = sum(a.nd - a.nz for a in acc if a.what == "Cube loads")
            if role == "input" and copy_cost and saved > copy_cost:
                reformats.append(t.name)
                rule += (f"; its Cube loads' conversions (+{saved:,}) cost more than an NZ copy "
                         f"({copy_cost:,})")
                decisions.append(Decision(t.name, shape, "ND", role, nd_extra, nz_extra, acc, rule,
                                          f"layout/{t.name}", copy_cost))
                continue
            if role == "input" and saved > 0:
                rule += (f"; an NZ copy ({copy_cost:,} cycles) would cost more than the conversions it "
                         f"saves ({saved:,})")
        elif role == "constant" and not weights_nz:
            layout, rule = "ND", "constants kept ND (--no-weights-nz)"
        elif nz_extra < nd_extra:
            layout, rule = "NZ", "fewer cycles NZ"
        else:
            layout, rule = "ND", "no fewer cycles NZ" if acc else "not accessed"
        layouts[t.name] = layout
        decisions.append(Decision(t.name, shape, layout, role, nd_extra, nz_extra, acc, rule))
    graph = _with_layouts(tg, layouts)
    if reformats:
        graph = _with_reformats(graph, reformats)
    search: list[str] = []
    if mode == "search" and measure is not None:
        graph, decisions, search = _search(tg, graph, layouts, reformats, decisions, measure)
    return Layouts(graph, mode, decisions, search)


def _reformat_cost(hw: Hardware, tensor: Any, acc: Sequence[Access]) -> int:
    """The pipe cycles of an AIV copy of ``tensor`` into NZ, 0 when no Cube load reads it: its
    bytes loaded into the vector buffer and stored back, each at its path's full rate."""
    if not any(a.what == "Cube loads" for a in acc):
        return 0
    from staticsched.model.dtypes import itemsize

    rows, cols = tensor.shape2d
    nbytes = rows * cols * itemsize(tensor.dtype)
    glob, ub = hw.role_space("global"), hw.role_space("vector")
    if glob is None or ub is None or not (hw.has_path(glob, ub) and hw.has_path(ub, glob)):
        return 0
    return hw.path(glob, ub).cycles(nbytes) + hw.path(ub, glob).cycles(nbytes)


def _search(tg: TaskGraph, graph: TaskGraph, layouts: dict[str, str], reformats: list[str],
            decisions: list[Decision], measure: Callable[[TaskGraph], int]):
    """Undo each NZ decision and each reformat task in turn; keep the change when the list
    schedule is faster (ties keep the rules' choice)."""
    best = measure(graph)
    lines = [f"rules' layouts: {best:,}"]
    layouts, reformats = dict(layouts), list(reformats)
    changed: set[str] = set()
    for d in decisions:
        if d.layout != "NZ" and not d.reformat:
            continue
        trial_layouts = {**layouts, d.tensor: "ND"}
        trial_reformats = [r for r in reformats if r != d.tensor]
        trial = _with_layouts(tg, trial_layouts)
        if trial_reformats:
            trial = _with_reformats(trial, trial_reformats)
        ms = measure(trial)
        what = "without its reformat task" if d.reformat else "ND"
        kept = ms < best
        lines.append(f"{d.tensor} {what}: {ms:,}" + (" (kept)" if kept else ""))
        if kept:
            best, graph, layouts, reformats = ms, trial, trial_layouts, trial_reformats
            changed.add(d.tensor)
    out = [attrs.evolve(d, layout="ND", reformat="", reformat_cycles=0,
                        rule=f"{d.rule}; undone by the search")
           if d.tensor in changed else d for d in decisions]
    return graph, out, lines
