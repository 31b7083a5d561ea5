"""Fusion decisions: which tasks of an unfused TaskGraph become one (seed §2.2).

:func:`fuse` grows each ``matmul`` task's epilogue along the chain of tasks that consume its
output, one candidate at a time, and records for every candidate the rule that decided it and
its numbers (:class:`Decision`):

- **chain**: the tile must flow on chip, so the output is read by exactly one task and is not
  a tensor that must reach GM (a model output);
- **kind**: an ``elementwise`` task whose first operand is the tile, with an op an epilogue
  takes, joins; a ``rowwise`` softmax, layernorm or rmsnorm joins as a row epilogue when the
  matmul's tiling can hold its row panel (the kind's own check, with its arithmetic); any
  other reduction ends the epilogue (reductions are natural cuts);
- **balance**: an epilogue whose Vector time would exceed the matmul's time on the Cube cores
  (its MACs or its operands' loads, an ND operand's at its ND2NZ-derated rate, whichever is
  more) is split off (the Vector unit would hold the Cube back), both from the cost model on
  this hardware and shared over the cores that run each engine;
- **cap**: at most ``max_steps`` fused ops per task (the instruction buffer's limit,
  :attr:`Hardware.max_fused_ops`).

``mode="none"`` keeps the graph as it is; ``"search"`` (:func:`search_fusion`) schedules each
matmul's candidate boundaries and keeps the fastest, as ``tune`` does for tilings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from staticsched.errors import InputError, StaticschedError
from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware import Hardware
from staticsched.model.vecops import VECOPS
from staticsched.tasks.matmul.task import EPILOGUE_OPS

FUSION_MODES = ("none", "rules", "search")
#: row reductions a matmul epilogue takes (the rest end an epilogue)
ROW_EPILOGUES = ("softmax", "layernorm", "rmsnorm")
#: the Vector ops each row reduction runs over the panel, for its cost estimate
ROW_STEPS: dict[str, tuple[str, ...]] = {
    "softmax": ("rowmax", "sub_row", "exp", "rowsum", "div_row"),
    "layernorm": ("rowsum", "rowsumsq", "sub_row", "mul_row", "mul_col", "bias"),
    "rmsnorm": ("rowsumsq", "mul_row", "mul_col"),
}
#: Vector ops whose two full operands may swap, so the tile can be either
COMMUTATIVE = ("add", "mul", "max")
#: the cap when the hardware states none
DEFAULT_MAX_STEPS = 16


@attrs.frozen
class Decision:
    """One candidate of one matmul's epilogue: fused or not, by which rule, with the numbers."""

    task: str
    candidate: str
    fused: bool
    rule: str
    why: str

    def line(self, origin: Mapping[str, str] | None = None) -> str:
        src = f" (node '{origin[self.candidate]}')" if origin and self.candidate in origin else ""
        verb = "fused into" if self.fused else "kept apart from"
        return f"{self.candidate}{src} {verb} {self.task}: [{self.rule}] {self.why}"


@attrs.frozen
class Fused:
    """The fused graph and every decision taken on the way."""

    graph: TaskGraph
    decisions: tuple[Decision, ...] = attrs.field(converter=tuple)
    mode: str = "rules"
    members: dict[str, tuple[str, ...]] = attrs.field(factory=dict, eq=False)

    def text(self, origin: Mapping[str, str] | None = None) -> str:
        """``fusion.txt``: each task and the tasks (and ONNX nodes) it holds, then the decisions."""
        lines = [f"fusion mode: {self.mode}", f"tasks: {len(self.graph.tasks)} "
                 f"(from {sum(len(v) for v in self.members.values())} unfused)", ""]
        for task in self.graph.tasks:
            held = self.members.get(task.id, (task.id,))
            nodes = [origin.get(t, t) for t in held] if origin else list(held)
            lines.append(f"task {task.id} ({task.type}): {', '.join(nodes)}")
        lines.append("")
        lines.append("decisions:")
        lines.extend(f"  {d.line(origin)}" for d in self.decisions)
        return "\n".join(lines) + "\n"


def max_steps_of(hw: Hardware) -> int:
    """The cap on fused ops per task: the hardware's ``max_fused_ops``, else the default."""
    return hw.max_fused_ops or DEFAULT_MAX_STEPS


def _cube_cycles(task: Any, hw: Hardware) -> float:
    """The matmul's time per Cube core: its MACs at the Cube's rate for its operands' dtype or
    its operands' loads at the rate a core can count on, whichever is larger, summed over its
    blocks as the plan balances them (:meth:`BlockGrid.work`). An ND operand's load converts
    it at its tile's ND2NZ ratio, so a matmul whose loads convert runs longer and hides more
    Vector work. Per-instruction overheads are left out: they depend on the tiling's op
    count, not on the fusion. A matmul with no Cube tiling (explicitly on the Vector engine,
    or none fits) counts its MACs only."""
    from staticsched.tasks.matmul.grid import BlockGrid
    from staticsched.tasks.matmul.tiling import derive_tiling

    assert hw.cube is not None
    ncores = len(hw.engine_cores("cube"))
    if not task.on_vector:
        try:
            tiling = task.tiling or derive_tiling(task, hw)
        except StaticschedError:
            tiling = None
        if tiling is not None:
            return sum(BlockGrid(task, tiling).work(hw)) / ncores
    rates = dict(hw.cube.macs_per_cycle)
    rate = rates.get(task.dtype) or rates["float16"]
    return task.batches * task.m * task.n * task.k / rate / ncores


def _vector_cycles(ops: Iterable[str], elems: int, hw: Hardware, elem_bytes: int = 2) -> float:
    """Cycles of ``ops`` over ``elems`` values of ``elem_bytes`` each at the Vector unit's rate
    and each op's passes, spread over the Vector cores (overheads left out, as for the Cube)."""
    assert hw.vector is not None
    passes = dict(hw.vector.passes)
    total = sum(elems * elem_bytes * passes.get(op, VECOPS[op].passes) / hw.vector.bytes_per_cycle
                for op in ops)
    return total / len(hw.engine_cores("vector"))


def _step_ops(step: Mapping[str, Any]) -> tuple[str, ...]:
    return ROW_STEPS.get(step["op"], (step["op"],))


def fuse(tg: TaskGraph, hw: Hardware, *, mode: str = "rules", keep: Iterable[str] = (),
         max_steps: int | None = None, limits: Mapping[str, int] | None = None) -> Fused:
    """Fuse ``tg``'s epilogue chains by the rules (see the module docstring).

    Parameters
    ----------
    tg
        The graph (usually unfused: every matmul without epilogue, one Vector op per task).
    hw
        The hardware whose cost model the balance rule uses.
    mode
        ``"none"`` (keep ``tg``) or ``"rules"``; ``"search"`` is :func:`search_fusion`.
    keep
        Tensors that must reach GM (a model's outputs): a chain ends at them.
    max_steps
        The cap on fused ops per task (default: the hardware's ``max_fused_ops``).
    limits
        Per matmul id, at most this many candidates are fused (what the search tries).

    Raises
    ------
    InputError
        An unknown mode.
    """
    if mode not in FUSION_MODES:
        raise InputError(f"fusion mode {mode!r} is not one of {', '.join(FUSION_MODES)}")
    doc = taskgraph_to_dict(tg)
    tasks: list[dict[str, Any]] = doc["tasks"]
    members = {t["id"]: (t["id"],) for t in tasks}
    if mode == "none":
        return Fused(tg, (), mode, members)
    cap = max_steps if max_steps is not None else max_steps_of(hw)
    keep = set(keep)
    decisions: list[Decision] = []
    removed: set[str] = set()
    by_id = {t["id"]: t for t in tasks}
    for task in list(tasks):
        if task["type"] != "matmul" or task["id"] in removed:
            continue
        limit = (limits or {}).get(task["id"])
        _grow(task, tasks, by_id, removed, members, keep, cap, limit, hw, tg, decisions)
    doc["tasks"] = [t for t in tasks if t["id"] not in removed]
    used = {name for t in doc["tasks"] for name in _names(t)}
    doc["tensors"] = {k: v for k, v in doc["tensors"].items() if k in used}
    if "constants" in doc:
        doc.pop("constants")
    graph = taskgraph_from_dict(doc, "<fused graph>")
    graph = TaskGraph(graph.tensors, graph.tasks, {k: v for k, v in tg.constants.items() if k in used})
    return Fused(graph, decisions, mode, {t["id"]: members[t["id"]] for t in doc["tasks"]})


def _names(task: Mapping[str, Any]) -> set[str]:
    out = set()
    for key in ("a", "b", "out", "input", "gamma", "beta", "q", "k", "v", "mask"):
        if isinstance(task.get(key), str):
            out.add(task[key])
    out.update(task.get("inputs", ()))
    for step in task.get("epilogue", ()):
        out.update(step.get(k) for k in ("tensor", "gamma", "beta") if step.get(k))
    return out


def _grow(task: dict[str, Any], tasks: list[dict[str, Any]], by_id: dict[str, dict[str, Any]],
          removed: set[str], members: dict[str, tuple[str, ...]], keep: set[str], cap: int,
          limit: int | None, hw: Hardware, tg: TaskGraph, decisions: list[Decision]) -> None:
    mm: Any = next(t for t in tg.tasks if t.id == task["id"])
    cube = _cube_cycles(mm, hw) if hw.cube is not None else 0.0
    elems = max(1, mm.m * mm.n)
    for d in mm.batch:
        elems *= d
    steps: list[dict[str, Any]] = list(task.get("epilogue", []))
    taken = 0
    while True:
        cur = task["out"]
        readers = [t for t in tasks if t["id"] not in removed and t["id"] != task["id"] and cur in _reads(t)]
        if not readers:
            return
        cand = readers[0]["id"]

        def stop(rule: str, why: str, cand: str = cand) -> None:
            decisions.append(Decision(task["id"], cand, False, rule, why))

        if cur in keep:
            return stop("chain", f"'{cur}' is an output of the model: it is written to GM")
        if len(readers) > 1:
            return stop("chain", f"'{cur}' is read by {len(readers)} tasks "
                                 f"({', '.join(t['id'] for t in readers)}): it is written to GM once")
        nxt = readers[0]
        step, why = _as_step(nxt, cur)
        if step is None:
            return stop("kind", why)
        mixed = _dtype_mismatch(mm, step, nxt, tg)
        if mixed:
            return stop("kind", mixed)
        if len(steps) + 1 > cap:
            return stop("cap", f"{len(steps)} ops already fused; the cap is {cap} per task")
        if limit is not None and taken >= limit:
            return stop("search", f"the search kept {limit} fused op(s) here")
        ops = [op for s in (*steps, step) for op in _step_ops(s)]
        vector = _vector_cycles(ops, elems, hw, mm.out_bytes) if hw.vector is not None else 0.0
        if vector > cube:
            return stop("balance", f"Vector time {_cyc(vector)} cycles/core > matmul time {_cyc(cube)} "
                                   f"cycles/core with '{step['op']}': split off")
        trial = dict(task, epilogue=[*steps, step], out=nxt["out"])
        plan, problem = _trial_plan(trial, tg, hw)
        if problem:
            return stop("kind", f"'{step['op']}' as a row epilogue does not fit: {problem}")
        if step["op"] in ROW_EPILOGUES and not any(s["op"] in ROW_EPILOGUES for s in steps):
            # a row epilogue makes each row panel one core's work: with fewer panels than Cube
            # cores the matmul runs on that many, which can cost more than the task it saves
            ncores = len(hw.engine_cores("cube")) if hw.cube is not None else 1
            panels = getattr(plan, "blocks", ncores)
            if panels < ncores:
                alone = (_vector_cycles(_step_ops(step), elems, hw, mm.out_bytes)
                         if hw.vector is not None else 0.0)
                fused = cube * ncores / panels
                if fused > cube + alone:
                    return stop("balance", f"'{step['op']}' as a row epilogue leaves {panels} row panel(s) "
                                           f"for {ncores} Cube cores: matmul time {_cyc(fused)} cycles/core "
                                           f"> {_cyc(cube)} + {_cyc(alone)} as its own task: split off")
        steps.append(step)
        task["epilogue"] = list(steps)
        task["out"] = nxt["out"]
        removed.add(nxt["id"])
        members[task["id"]] = (*members[task["id"]], *members[nxt["id"]])
        taken += 1
        decisions.append(Decision(task["id"], nxt["id"], True, "balance",
                                  f"Vector time {_cyc(vector)} cycles/core <= matmul time {_cyc(cube)} "
                                  f"cycles/core with '{step['op']}'"))


def _dtype_mismatch(mm: Any, step: Mapping[str, Any], task: Mapping[str, Any], tg: TaskGraph) -> str:
    """Why ``task`` (as epilogue ``step``) cannot join matmul ``mm`` for its dtypes, or "": an
    epilogue runs on the output's tile and reads tensors of the operands' dtype."""
    tmap = tg.tensor_map
    out = tmap[task["out"]].dtype
    if out != mm.out_dtype:
        return f"'{task['id']}' writes {out}, the tile is {mm.out_dtype}: a conversion is a task of its own"
    for key in ("tensor", "gamma", "beta"):
        name = step.get(key)
        if name and tmap[name].dtype != mm.dtype:
            return (f"'{name}' is {tmap[name].dtype}, the matmul's operands are {mm.dtype}: an epilogue's "
                    f"operands share the matmul's dtype")
    return ""


def _cyc(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _reads(task: Mapping[str, Any]) -> set[str]:
    return _names(task) - {task.get("out")}


def _as_step(task: Mapping[str, Any], tile: str) -> tuple[dict[str, Any] | None, str]:
    """The epilogue step ``task`` becomes on the tile ``tile``, or None and why not."""
    if task["type"] == "elementwise":
        op = task["op"]
        inputs = list(task["inputs"])
        if len(inputs) == 2 and inputs[1] == tile and op in COMMUTATIVE:
            inputs.reverse()
        if inputs[0] != tile:
            return None, f"'{tile}' is not the first operand of '{op}'"
        if tile in inputs[1:]:
            return None, f"'{op}' reads the tile twice"
        if op not in EPILOGUE_OPS:
            return None, f"'{op}' is not an epilogue op"
        step: dict[str, Any] = {"op": op}
        if len(inputs) > 1:
            step["tensor"] = inputs[1]
        if task.get("value") is not None:
            step["value"] = task["value"]
        return step, ""
    if task["type"] == "rowwise":
        if task["op"] not in ROW_EPILOGUES:
            return None, f"rowwise '{task['op']}' reduces the row to one value: reductions end an epilogue"
        step = {"op": task["op"]}
        for key in ("gamma", "beta", "eps"):
            if task.get(key) not in (None, ""):
                step[key] = task[key]
        return step, ""
    article = "an" if task["type"][0] in "aeiou" else "a"
    return None, f"{article} {task['type']} task does not fuse into an epilogue"


def _tiling_problem(trial: dict[str, Any], tg: TaskGraph, by_id: Mapping[str, Any], hw: Hardware) -> str:
    """Why the matmul ``trial`` cannot be tiled on ``hw`` (its kind's words), or ""."""
    return _trial_plan(trial, tg, hw)[1]


def _trial_plan(trial: dict[str, Any], tg: TaskGraph, hw: Hardware) -> tuple[Any, str]:
    """The plan of the matmul ``trial`` on ``hw`` and "", or None and why it cannot be tiled."""
    from staticsched.frontend.lowering import plan_tasks

    doc = taskgraph_to_dict(tg)
    names = _names(trial)
    doc["tensors"] = {k: v for k, v in doc["tensors"].items() if k in names}
    doc.pop("constants", None)
    doc["tasks"] = [trial]
    try:
        (plan,) = plan_tasks(taskgraph_from_dict(doc, "<fusion trial>"), hw)
    except StaticschedError as exc:
        return None, "; ".join(exc.problems)
    return plan, ""


def search_fusion(tg: TaskGraph, hw: Hardware, measure: Callable[[TaskGraph], int], *,
                  keep: Iterable[str] = (), max_steps: int | None = None) -> tuple[Fused, list[str]]:
    """Fuse by the rules, then for each matmul try every shorter epilogue (0 .. its length)
    with the rest of the graph as the rules left it, keep the fastest by ``measure`` (a
    makespan), and report the makespans tried.

    The candidates of one matmul are measured with the others at their current choice, in
    task order, so the search is deterministic; ties keep the longer epilogue.
    """
    keep = tuple(keep)
    ruled = fuse(tg, hw, mode="rules", keep=keep, max_steps=max_steps)
    lengths = {t.id: len(getattr(t, "epilogue", ())) for t in ruled.graph.tasks if t.type == "matmul"}
    limits: dict[str, int] = dict(lengths)
    report: list[str] = []
    for mid, longest in lengths.items():
        tried = []
        for n in range(longest, -1, -1):
            limits[mid] = n
            trial = fuse(tg, hw, mode="rules", keep=keep, max_steps=max_steps, limits=limits)
            tried.append((measure(trial.graph), -n, n))
        best = min(tried)
        limits[mid] = best[2]
        report.append(f"{mid}: " + ", ".join(f"{n} fused -> {span:,} cycles" for span, _, n in sorted(
            tried, key=lambda x: -x[2])) + f"; kept {best[2]}")
    final = fuse(tg, hw, mode="rules", keep=keep, max_steps=max_steps, limits=limits)
    return Fused(final.graph, final.decisions, "search", final.members), report
