"""Mapping by arithmetic intensity (seed §3.1): each task's FLOP per GM byte against the
balance points of the hardware's Cube and Vector engines.

A unit's balance point is its peak FLOP per cycle over the chip's GM bandwidth per cycle (the
shared link the GM loads cross, or the slowest GM path when there is no link): a task whose
intensity is above the Cube's balance point is compute-bound on the Cube, one below the
Vector's balance point is memory-bound even on the Vector unit, so the Cube would idle. The
rule: above the Cube balance -> Cube (with the Cube's ND operand loads priced at their ND2NZ
ratio on a chip that prices layouts: the converting load is that much slower, so it counts as
that many more bytes); below the Vector balance -> Vector; in between, next to
its neighbours (the engine of the task it reads from). :func:`mapping` states, per task, the
intensity, the rule's engine and the engine that runs it: the kind's only lowering unless the
task names another with ``"engine"`` (which is obeyed when the kind has that lowering).

:func:`choose_engines` is the decision for a model: a ``matmul`` with no explicit engine that
the rule sends to the Vector unit gets ``"engine": "vector"`` (its Vector lowering: broadcast
multiplies and column sums), or, with ``mode="search"``, both engines are scheduled and the
faster kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping

import attrs

from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.tasks.rowops import ROWOPS

MAPPING_MODES = ("rules", "search")
#: the engine each kind's lowering runs on (attention runs on both: its matmuls on the Cube)
KIND_ENGINE = {"matmul": "cube", "elementwise": "vector", "rowwise": "vector", "attention": "cube"}
ELEM = 2  # bytes of an fp16 value


@attrs.frozen
class Balance:
    """The hardware's balance points (FLOP per GM byte) and what they come from."""

    cube: float
    vector: float
    bytes_per_cycle: float
    source: str

    def line(self) -> str:
        return (f"balance points: Cube {self.cube:.1f} FLOP/B, Vector {self.vector:.2f} FLOP/B "
                f"(GM bandwidth {self.bytes_per_cycle:,.0f} B/cycle, {self.source})")


@attrs.frozen
class Mapped:
    """One task: FLOPs, GM bytes, intensity, the rule's engine and the engine used."""

    task: str
    kind: str
    flops: int
    gm_bytes: int
    rule: str
    engine: str
    #: what the Cube's loads of ND operands add, as GM bytes: each such operand's bytes times
    #: its tile's ND2NZ ratio less one (the load takes that much longer at the same rate)
    converted: int = 0

    @property
    def intensity(self) -> float:
        return self.flops / max(1, self.gm_bytes)

    @property
    def cube_intensity(self) -> float:
        """FLOP per GM byte as the Cube sees it, its ND operands' conversions priced."""
        return self.flops / max(1, self.gm_bytes + self.converted)

    def line(self) -> str:
        note = ""
        if self.rule != self.engine:
            why = ("explicit, measured, or a tiling or row reduction the Vector lowering does not take"
                   if self.kind == "matmul" else
                   f"a {self.kind} task has no {self.rule} lowering in this version")
            note = f" (rule says {self.rule}; {why})"
        conv = (f" ({self.cube_intensity:.2f} on the Cube with {self.converted:,} B-equivalents of "
                f"ND2NZ conversion)" if self.converted else "")
        return (f"{self.task} ({self.kind}): {self.flops:,} FLOP / {self.gm_bytes:,} B = "
                f"{self.intensity:.2f} FLOP/B{conv} -> {self.engine}{note}")


def balance(hw: Hardware) -> Balance:
    """The Cube's and the Vector unit's balance points on ``hw``."""
    gm = hw.role("global")
    links = [lk for lk in hw.links if any(src == gm for src, _ in lk.paths)]
    if links:
        link = min(links, key=lambda lk: lk.bytes_per_cycle)
        bw, source = link.bytes_per_cycle, f"link {link.name}"
    else:
        paths = [p for p in hw.paths if p.src == gm]
        bw = sum(p.bytes_per_cycle for p in paths) * hw.cores if paths else 1.0
        source = "the GM paths of every core"
    cube = 0.0
    if hw.cube is not None:
        cube = 2.0 * dict(hw.cube.macs_per_cycle).get("float16", 0) * len(hw.engine_cores("cube")) / bw
    vector = 0.0
    if hw.vector is not None:
        vector = hw.vector.bytes_per_cycle / ELEM * len(hw.engine_cores("vector")) / bw
    return Balance(cube, vector, bw, source)


def _elems(tg: TaskGraph, name: str) -> int:
    return math.prod(tg.tensor_map[name].shape)


def _flops(task: object, tg: TaskGraph) -> int:
    kind = getattr(task, "type", "")
    if kind == "matmul":
        batch = math.prod(getattr(task, "batch", ()) or (1,))
        out = batch * task.m * task.n  # type: ignore[attr-defined]
        steps = sum(5 if s.op in ROWOPS else 1 for s in task.epilogue)  # type: ignore[attr-defined]
        return 2 * out * task.k + out * steps  # type: ignore[attr-defined]
    if kind == "attention":
        t = task
        per = 2 * t.sq * t.sk * t.d + 2 * t.sq * t.sk * t.dv + 5 * t.sq * t.sk  # type: ignore[attr-defined]
        return t.heads * per  # type: ignore[attr-defined]
    if kind == "rowwise":
        return 5 * _elems(tg, task.input)  # type: ignore[attr-defined]
    return _elems(tg, task.writes[0])  # type: ignore[attr-defined]


def _converted(task: object, tg: TaskGraph, hw: Hardware) -> int:
    """The byte-equivalents the Cube's ND operand loads of ``task`` add (:attr:`Mapped.converted`):
    a matmul's A and B at its tiling's base tiles (:meth:`MatmulTask.load_ratio`), attention's
    Q, K and V at its Q and K/V blocks; 0 on a chip that prices no layouts, or when no tiling
    fits (the lowering says why)."""
    from staticsched.errors import StaticschedError

    cube = hw.cube
    if cube is None or not cube.models_layouts or getattr(task, "engine", "") == "vector":
        return 0
    kind = getattr(task, "type", "")
    try:
        if kind == "matmul":
            from staticsched.tasks.matmul.tiling import derive_tiling

            t = task.tiling or derive_tiling(task, hw)  # type: ignore[attr-defined]
            tiles = {"a": (t.base_m, t.base_k), "b": (t.base_k, t.base_n)}
            ratios = {getattr(task, w): task.load_ratio(hw, w, *tiles[w])  # type: ignore[attr-defined]
                      for w in ("a", "b")}
        elif kind == "attention":
            from staticsched.tasks.attention.tiling import derive_tiling as derive_attention

            t = task.tiling or derive_attention(task, hw)  # type: ignore[attr-defined]
            ratios = {}
            for name, rows, cols in ((task.q, t.block_q, task.d), (task.k, t.block_kv, task.d),  # type: ignore[attr-defined]
                                     (task.v, t.block_kv, task.dv)):  # type: ignore[attr-defined]
                decl = tg.tensor_map[name]
                ratios[name] = 1.0 if decl.layout == "NZ" else cube.nd2nz_ratio(rows, cols, decl.shape[-1])
        else:
            return 0
    except StaticschedError:
        return 0
    return sum(round(_elems(tg, n) * DTYPE_BYTES[tg.tensor_map[n].dtype] * (r - 1.0))
               for n, r in sorted(ratios.items()))


def mapping(tg: TaskGraph, hw: Hardware) -> tuple[Balance, list[Mapped]]:
    """Every task's intensity, the rule's engine and the engine that runs it."""
    bal = balance(hw)
    engine_of: dict[str, str] = {}
    writer = tg.writer
    out: list[Mapped] = []
    for task in tg.ordered_tasks:
        names = sorted(set(task.reads) | set(task.writes))
        gm = sum(_elems(tg, n) * DTYPE_BYTES[tg.tensor_map[n].dtype] for n in names)
        flops = _flops(task, tg)
        intensity = flops / max(1, gm)
        converted = _converted(task, tg, hw)
        # the Cube's side prices its loads' conversions: a matmul fed by ND activations must
        # clear the Cube's balance point with them (the Vector unit reads ND as it is)
        if flops / max(1, gm + converted) >= bal.cube:
            rule = "cube"
        elif intensity <= bal.vector:
            rule = "vector"
        else:  # between the balance points: next to the task it reads from
            srcs = [engine_of[writer[n]] for n in task.reads if n in writer and writer[n] in engine_of]
            rule = srcs[0] if srcs else KIND_ENGINE.get(task.type, "vector")
        engine = getattr(task, "engine", "") or KIND_ENGINE.get(task.type, "vector")
        engine_of[task.id] = engine
        out.append(Mapped(task.id, task.type, flops, gm, rule, engine, converted))
    return bal, out


def mapping_lines(tg: TaskGraph, hw: Hardware, origin: Mapping[str, str] | None = None) -> list[str]:
    """The summary's mapping section: a line per task up to :data:`MAPPING_LINES`, then the
    rest counted by kind and engine (a 10^5-node model would print 10^5 lines)."""
    bal, rows = mapping(tg, hw)
    shown, rest = rows[:MAPPING_LINES], rows[MAPPING_LINES:]
    lines = [f"mapping      : {bal.line()}", *(f"  {m.line()}" for m in shown)]
    if rest:
        counts = Counter((m.kind, m.engine) for m in rest)
        lines.append(f"  ... and {len(rest):,} more: " + ", ".join(
            f"{n:,} {kind} -> {engine}" for (kind, engine), n in sorted(counts.items())))
    return lines


#: the tasks the summary's mapping section lists one by one
MAPPING_LINES = 40


def _vector_ok(task: object) -> bool:
    """Whether the matmul's Vector lowering takes ``task`` (no row reduction, derived tiling)."""
    return (getattr(task, "type", "") == "matmul" and getattr(task, "tiling", None) is None
            and not any(s.op in ROWOPS for s in getattr(task, "epilogue", ())))


def _with_engine(tg: TaskGraph, engines: Mapping[str, str]) -> TaskGraph:
    """``tg`` with these matmuls' engines; an operand of a matmul moved to the Vector engine
    goes back to the row-major layout (a weight the Cube no longer reads is not converted)."""
    doc = taskgraph_to_dict(tg)
    doc.pop("constants", None)
    for body in doc["tasks"]:
        if body["id"] in engines:
            body["engine"] = engines[body["id"]]
            if engines[body["id"]] == "vector":
                for key in ("a", "b"):
                    doc["tensors"][body[key]].pop("layout", None)
    out = taskgraph_from_dict(doc, "<mapped graph>")
    return TaskGraph(out.tensors, out.tasks, tg.constants)


def choose_engines(tg: TaskGraph, hw: Hardware, *, mode: str = "rules",
                   measure: Callable[[TaskGraph], int] | None = None) -> tuple[TaskGraph, list[str]]:
    """Give each matmul without an explicit engine the one the rule (or, with ``"search"``,
    the faster schedule by ``measure``) picks; the decisions, one line each."""
    if mode not in MAPPING_MODES:
        from staticsched.errors import InputError

        raise InputError(f"mapping mode {mode!r} is not one of {', '.join(MAPPING_MODES)}")
    _, rows = mapping(tg, hw)
    rule = {m.task: m for m in rows}
    engines: dict[str, str] = {}
    lines: list[str] = []
    for task in tg.ordered_tasks:
        if not _vector_ok(task) or getattr(task, "engine", ""):
            continue
        m = rule[task.id]
        if mode == "rules":
            if m.rule == "vector":
                engines[task.id] = "vector"
                lines.append(f"{task.id}: {m.intensity:.2f} FLOP/B -> vector (the rule)")
            continue
        assert measure is not None
        spans = {}
        for engine in ("cube", "vector"):
            spans[engine] = measure(_with_engine(tg, {**engines, task.id: engine}))
        best = "vector" if spans["vector"] < spans["cube"] else "cube"
        if best == "vector":
            engines[task.id] = "vector"
        lines.append(f"{task.id}: cube {spans['cube']:,} cycles, vector {spans['vector']:,} cycles -> {best} "
                     f"(the rule says {m.rule})")
    return (_with_engine(tg, engines) if engines else tg), lines
