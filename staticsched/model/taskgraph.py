"""TaskGraph: GM tensors and fused tasks (DESIGN §4), read from and written to JSON.

A ``matmul`` task computes ``out = epilogue(a @ b)`` with fp16 operands and fp32
accumulation; an ``elementwise`` task applies one Vector op to GM tensors. Tasks
depend on each other only through GM tensors: a task reading a tensor another
task writes runs after it. Every problem in a file is reported at once, one
line each, naming the task, key or tensor and the numbers.

Tensors are declared 1-D or 2-D; a 1-D ``[N]`` tensor is the row ``[1, N]``
everywhere else (lowering, reference, OpGraph tensors). A step's ``value`` is
its scalar operand: ``scale`` requires one, the other ops accept and ignore it
(DESIGN's example gives ``gelu`` one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import attrs
import networkx as nx

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
)
from staticsched.errors import GraphError, InputError, TilingError
from staticsched.model.opgraph import FORMAT as OPGRAPH_FORMAT
from staticsched.model.opgraph import OpGraph, load_json_file, opgraph_from_dict
from staticsched.model.opkinds import VECTOR_OPS
from staticsched.model.tiling import Tiling

FORMAT = "staticsched.taskgraph"
VERSION = 1

#: version 1 computes in fp16 with fp32 accumulation; other dtypes need other kernels
DTYPES = ("float16",)

#: epilogue steps of a matmul, and which operand each takes: "row" = an [N] tensor,
#: "full" = an [M, N] tensor, "value" = a scalar, "" = nothing
EPILOGUE_OPS: dict[str, str] = {
    "bias": "row",
    "add": "full",
    "scale": "value",
    "relu": "",
    "gelu": "",
    "cast": "",
}


@attrs.frozen
class TensorDecl:
    """A GM tensor as declared: ``shape`` has 1 or 2 dims, row-major."""

    name: str
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    dtype: str = "float16"

    @property
    def shape2d(self) -> tuple[int, int]:
        """The 2-D shape used everywhere else (a 1-D ``[N]`` is ``[1, N]``)."""
        if len(self.shape) == 1:
            return (1, self.shape[0])
        return (self.shape[0], self.shape[1])


@attrs.frozen
class EpilogueStep:
    """One on-chip step after the matmul: ``op`` with an optional GM ``tensor`` or scalar ``value``."""

    op: str
    tensor: str = ""
    value: float | None = None


@attrs.frozen(kw_only=True)
class MatmulTask:
    """``out = epilogue(a @ b)``; ``m, n, k`` are the problem dims resolved from the tensors."""

    type: ClassVar[str] = "matmul"

    id: str
    a: str
    b: str
    out: str
    m: int
    n: int
    k: int
    transpose_b: bool = False
    epilogue: tuple[EpilogueStep, ...] = attrs.field(converter=tuple, default=())
    tiling: Tiling | None = None

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.a, self.b, *(s.tensor for s in self.epilogue if s.tensor))

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)


@attrs.frozen(kw_only=True)
class ElementwiseTask:
    """``out = op(*inputs[, value])`` on the Vector unit; ``rows, cols`` is the 2-D output shape."""

    type: ClassVar[str] = "elementwise"

    id: str
    op: str
    inputs: tuple[str, ...] = attrs.field(converter=tuple)
    out: str
    rows: int
    cols: int
    value: float | None = None

    @property
    def reads(self) -> tuple[str, ...]:
        return self.inputs

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)


Task = MatmulTask | ElementwiseTask


@attrs.frozen
class TaskGraph:
    """Declared GM tensors and tasks; build it with :func:`taskgraph_from_dict` so it is valid."""

    tensors: tuple[TensorDecl, ...] = attrs.field(converter=tuple)
    tasks: tuple[Task, ...] = attrs.field(converter=tuple)

    @cached_property
    def tensor_map(self) -> dict[str, TensorDecl]:
        return {t.name: t for t in self.tensors}

    @cached_property
    def writer(self) -> dict[str, str]:
        """Tensor name -> id of the task writing it."""
        return {name: task.id for task in self.tasks for name in task.writes}

    @cached_property
    def input_names(self) -> tuple[str, ...]:
        """Tensors no task writes (the graph's inputs), sorted."""
        return tuple(sorted(t.name for t in self.tensors if t.name not in self.writer))

    @cached_property
    def output_names(self) -> tuple[str, ...]:
        """Tensors some task writes, sorted."""
        return tuple(sorted(self.writer))

    @cached_property
    def ordered_tasks(self) -> tuple[Task, ...]:
        """Tasks in dependency order; independent tasks keep their file order."""
        index = {t.id: i for i, t in enumerate(self.tasks)}
        g = _task_dependencies(self.tasks)
        order = nx.lexicographical_topological_sort(g, key=lambda n: index[n])
        by_id = {t.id: t for t in self.tasks}
        return tuple(by_id[n] for n in order)


def _task_dependencies(tasks: tuple[Task, ...] | list[Task]) -> nx.DiGraph:
    """Writer -> reader edges labelled with the tensor that carries them."""
    g = nx.DiGraph()
    g.add_nodes_from(t.id for t in tasks)
    writer = {name: t.id for t in tasks for name in t.writes}
    for t in tasks:
        for name in t.reads:
            src = writer.get(name)
            if src is not None and src != t.id:
                g.add_edge(src, t.id, tensor=name)
    return g


# --------------------------------------------------------------------------- reading


#: declared tensors by name; None marks one whose shape is invalid (already reported)
_Tensors = Mapping[str, TensorDecl | None]

_TOP_KEYS = ("format", "version", "tensors", "tasks")
_TENSOR_KEYS = ("shape", "dtype")
_MATMUL_KEYS = ("id", "type", "a", "b", "out", "transpose_b", "epilogue", "tiling")
_ELEMENTWISE_KEYS = ("id", "type", "op", "inputs", "out", "value")
_STEP_KEYS = ("op", "tensor", "value")
_TILING_KEYS = ("base_m", "base_n", "base_k", "double_buffer")


def taskgraph_from_dict(data: Any, where: str = "<taskgraph>") -> TaskGraph:
    """Build a :class:`TaskGraph` from decoded JSON, reporting every problem at once.

    Parameters
    ----------
    data
        The decoded JSON document (``{"format": "staticsched.taskgraph", ...}``).
    where
        Prefix of every problem line (usually the file path).

    Raises
    ------
    GraphError
        One line per problem (unknown keys or tensors, wrong types, shape mismatches with the
        numbers, a tensor written twice, a task reading its own output, dependency cycles).
    TilingError
        When the only problems are in ``tiling`` objects.
    """
    if not isinstance(data, Mapping):
        raise GraphError(f"{where}: top level must be an object, got {type(data).__name__}")
    pr = Problems()
    tiling_pr = Problems()
    check_keys(data, _TOP_KEYS, where, pr)
    fmt = data.get("format")
    if fmt != FORMAT:
        pr.add(f"{where}: 'format' must be '{FORMAT}', got {fmt!r}")
    get_int(data, "version", where, pr, minimum=VERSION, maximum=VERSION)

    tensors, bad_shapes = _read_tensors(data, where, pr)
    # a tensor whose shape is broken stays declared but is left out of shape checks, so that
    # one bad shape gives one problem line, not one per task using it
    tmap = {t.name: (None if t.name in bad_shapes else t) for t in tensors}
    tasks: list[Task] = []
    seen: set[str] = set()
    raw_tasks = get_list(data, "tasks", where, pr)
    if "tasks" in data and isinstance(data["tasks"], list) and not raw_tasks:
        pr.add(f"{where}: 'tasks' is empty; a task graph needs at least one task")
    for i, body in enumerate(raw_tasks):
        w = f"{where}: tasks[{i}]"
        if not isinstance(body, Mapping):
            pr.add(f"{w}: must be an object, got {type(body).__name__}")
            continue
        task_id = get_str(body, "id", w, pr)
        if task_id:
            named = check_name(task_id, "task", w, pr)
            w = f"{where}: task '{task_id}'"
            # the id prefixes op ids and item names, whose parts '.' separates
            if named and "." in task_id:
                pr.add(f"{w}: id must not contain '.' (it separates the parts of op ids)")
            if task_id in seen:
                pr.add(f"{w}: duplicate task id")
            seen.add(task_id)
        kind = get_str(body, "type", w, pr, choices=("matmul", "elementwise"))
        task: Task | None = None
        if kind == "matmul":
            task = _read_matmul(body, task_id, tmap, w, pr, tiling_pr)
        elif kind == "elementwise":
            task = _read_elementwise(body, task_id, tmap, w, pr)
        if task is not None:
            tasks.append(task)

    _check_writers(tasks, where, pr)
    if not pr:  # with every task read, a cycle is a problem of its own
        _check_cycles(tasks, where, pr)
    if pr:
        pr.lines.extend(tiling_pr.lines)
        pr.raise_if_any(GraphError)
    tiling_pr.raise_if_any(TilingError)
    return TaskGraph(tensors, tasks)


def _read_tensors(data: Mapping[str, Any], where: str, pr: Problems) -> tuple[list[TensorDecl], set[str]]:
    out = []
    bad_shapes: set[str] = set()
    for name, body in sorted(get_mapping(data, "tensors", where, pr, required=True).items()):
        w = f"{where}: tensor '{name}'"
        check_name(name, "tensor", where, pr)
        if not isinstance(body, Mapping):
            pr.add(f"{w}: must be an object, got {type(body).__name__}")
            continue
        check_keys(body, _TENSOR_KEYS, w, pr)
        shape = get_list(body, "shape", w, pr)
        if not 1 <= len(shape) <= 2 or not all(_is_int(x) for x in shape):
            pr.add(f"{w}: 'shape' must be a list of 1 or 2 integers, got {body.get('shape')!r}")
            shape = [1]
            bad_shapes.add(name)
        elif any(x <= 0 for x in shape):
            pr.add(f"{w}: every dim of 'shape' must be positive, got {list(shape)}")
            shape = [1]
            bad_shapes.add(name)
        dtype = get_str(body, "dtype", w, pr, default="float16")
        if dtype and dtype not in DTYPES:
            pr.add(
                f"{w}: dtype {dtype!r} is not supported (version {VERSION} computes in "
                f"{', '.join(DTYPES)} with fp32 accumulation)"
            )
        out.append(TensorDecl(name, tuple(shape), dtype))
    return out, bad_shapes


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _tensor_ref(body: Mapping[str, Any], key: str, tmap: _Tensors, w: str, pr: Problems) -> TensorDecl | None:
    """The declared tensor named by ``body[key]``; None if it is not usable (and reported)."""
    name = get_str(body, key, w, pr)
    if not name:
        return None
    if name not in tmap:
        pr.add(f"{w}: '{key}' names unknown tensor '{name}' (tensors: {', '.join(sorted(tmap))})")
    return tmap.get(name)


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(x) for x in shape) + "]"


def _read_matmul(
    body: Mapping[str, Any],
    task_id: str,
    tmap: _Tensors,
    w: str,
    pr: Problems,
    tiling_pr: Problems,
) -> MatmulTask | None:
    check_keys(body, _MATMUL_KEYS, w, pr)
    a = _tensor_ref(body, "a", tmap, w, pr)
    b = _tensor_ref(body, "b", tmap, w, pr)
    out = _tensor_ref(body, "out", tmap, w, pr)
    transpose_b = get_bool(body, "transpose_b", w, pr, default=False)
    steps = _read_epilogue(body, tmap, w, pr)
    tiling = _read_tiling(body, w, tiling_pr) if "tiling" in body else None
    if a is None or b is None or out is None:
        return None
    m, k = a.shape2d
    if transpose_b:
        n, kb = b.shape2d
        b_form = "[N, K] (transpose_b)"
    else:
        kb, n = b.shape2d
        b_form = "[K, N]"
    if k != kb:
        pr.add(
            f"{w}: K mismatch: a '{a.name}' is {_fmt_shape(a.shape2d)} (K = {k}) but b '{b.name}' "
            f"is {_fmt_shape(b.shape2d)}, read as {b_form} (K = {kb})"
        )
    if out.shape2d != (m, n):
        pr.add(
            f"{w}: out '{out.name}' is {_fmt_shape(out.shape2d)}, expected [{m}, {n}] "
            f"(M = {m} from a '{a.name}', N = {n} from b '{b.name}')"
        )
    for i, step in enumerate(steps):
        t = tmap.get(step.tensor)
        if t is None:
            continue
        row = EPILOGUE_OPS[step.op] == "row"
        if t.shape2d != ((1, n) if row else (m, n)):
            pr.add(
                f"{w}: epilogue[{i}] '{step.op}' tensor '{t.name}' is {_fmt_shape(t.shape)}, "
                f"expected {_fmt_shape((n,) if row else (m, n))} (M = {m}, N = {n})"
            )
    for name in sorted({a.name, b.name, *(s.tensor for s in steps if s.tensor)}):
        if name == out.name:
            pr.add(f"{w}: reads its own output tensor '{name}'")
    return MatmulTask(
        id=task_id,
        a=a.name,
        b=b.name,
        out=out.name,
        m=m,
        n=n,
        k=k,
        transpose_b=transpose_b,
        epilogue=steps,
        tiling=tiling,
    )


def _read_value(body: Mapping[str, Any], op: str, w: str, pr: Problems) -> float | None:
    if "value" in body:
        return get_number(body, "value", w, pr)
    if op == "scale":
        pr.add(f"{w}: op 'scale' needs a 'value'")
    return None


def _read_epilogue(body: Mapping[str, Any], tmap: _Tensors, w: str, pr: Problems) -> list[EpilogueStep]:
    steps = []
    for i, raw in enumerate(get_list(body, "epilogue", w, pr, default=[])):
        sw = f"{w}: epilogue[{i}]"
        if not isinstance(raw, Mapping):
            pr.add(f"{sw}: must be an object, got {type(raw).__name__}")
            continue
        check_keys(raw, _STEP_KEYS, sw, pr)
        op = get_str(raw, "op", sw, pr, choices=tuple(EPILOGUE_OPS))
        if op not in EPILOGUE_OPS:
            continue
        operand = EPILOGUE_OPS[op]
        tensor = ""
        if operand in ("row", "full"):
            t = _tensor_ref(raw, "tensor", tmap, sw, pr)
            tensor = t.name if t is not None else ""
        elif "tensor" in raw:
            pr.add(f"{sw}: op '{op}' takes no 'tensor'")
        value = _read_value(raw, op, sw, pr)
        if tensor or operand not in ("row", "full"):
            steps.append(EpilogueStep(op, tensor, value))
    return steps


def _read_tiling(body: Mapping[str, Any], w: str, pr: Problems) -> Tiling | None:
    raw = get_mapping(body, "tiling", w, pr)
    tw = f"{w}: tiling"
    check_keys(raw, _TILING_KEYS, tw, pr)
    before = len(pr.lines)
    sizes = [get_int(raw, key, tw, pr, minimum=1) for key in ("base_m", "base_n", "base_k")]
    double_buffer = get_bool(raw, "double_buffer", tw, pr, default=True)
    if len(pr.lines) > before:
        return None
    return Tiling(*sizes, double_buffer=double_buffer)


def _read_elementwise(
    body: Mapping[str, Any], task_id: str, tmap: _Tensors, w: str, pr: Problems
) -> ElementwiseTask | None:
    check_keys(body, _ELEMENTWISE_KEYS, w, pr)
    op = get_str(body, "op", w, pr, choices=tuple(VECTOR_OPS))
    value = _read_value(body, op, w, pr)
    out = _tensor_ref(body, "out", tmap, w, pr)
    raw_inputs = get_list(body, "inputs", w, pr)
    inputs: list[TensorDecl | None] = []
    for j, name in enumerate(raw_inputs):
        if not isinstance(name, str):
            pr.add(f"{w}: 'inputs'[{j}] must be a tensor name, got {name!r}")
            inputs.append(None)
        elif name not in tmap:
            pr.add(f"{w}: 'inputs'[{j}] names unknown tensor '{name}' (tensors: {', '.join(sorted(tmap))})")
            inputs.append(None)
        else:
            inputs.append(tmap[name])
    if op not in VECTOR_OPS:
        return None
    arity = VECTOR_OPS[op][0]
    if len(raw_inputs) != arity:
        pr.add(f"{w}: op '{op}' takes {arity} input(s), got {len(raw_inputs)}")
        return None
    if out is None or any(t is None for t in inputs):
        return None
    rows, cols = out.shape2d
    for j, t in enumerate(inputs):
        assert t is not None  # checked just above
        row = op == "bias" and j == 1
        if t.shape2d != ((1, cols) if row else (rows, cols)):
            pr.add(
                f"{w}: input '{t.name}' is {_fmt_shape(t.shape)}, expected "
                f"{_fmt_shape((cols,) if row else (rows, cols))} "
                f"(from out '{out.name}' {_fmt_shape(out.shape)})"
            )
        if t.name == out.name:
            pr.add(f"{w}: reads its own output tensor '{t.name}'")
    return ElementwiseTask(
        id=task_id,
        op=op,
        inputs=[t.name for t in inputs if t is not None],
        out=out.name,
        rows=rows,
        cols=cols,
        value=value,
    )


def _check_writers(tasks: list[Task], where: str, pr: Problems) -> None:
    writers: dict[str, list[str]] = {}
    for t in tasks:
        for name in t.writes:
            writers.setdefault(name, []).append(t.id)
    for name in sorted(writers):
        ids = writers[name]
        if len(ids) > 1:
            pr.add(
                f"{where}: tensor '{name}' is written by {len(ids)} tasks "
                f"({', '.join(repr(i) for i in ids)}); each tensor has at most one writer"
            )


def _check_cycles(tasks: list[Task], where: str, pr: Problems) -> None:
    g = _task_dependencies(tasks)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return
    path = " -> ".join(f"'{u}'" for u, _ in cycle) + f" -> '{cycle[0][0]}'"
    through = ", ".join(f"'{g[u][v]['tensor']}'" for u, v in cycle)
    pr.add(f"{where}: task dependency cycle {path} (through tensors {through})")


def load_taskgraph(path: str | Path) -> TaskGraph:
    """Load a TaskGraph JSON file.

    Raises
    ------
    InputError
        If the file is missing or is not JSON; :class:`GraphError`/:class:`TilingError` if it is
        not a valid task graph.
    """
    return taskgraph_from_dict(load_json_file(path), str(path))


def load_graph(path: str | Path) -> TaskGraph | OpGraph:
    """Load a TaskGraph or an OpGraph file, chosen by its ``"format"`` field.

    Raises
    ------
    InputError
        If the file is not JSON or its ``format`` is neither ``staticsched.taskgraph`` nor
        ``staticsched.opgraph``.
    """
    data = load_json_file(path)
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: top level must be a JSON object (a TaskGraph or an OpGraph), "
                         f"got {type(data).__name__}")
    fmt = data.get("format")
    if fmt == FORMAT:
        return taskgraph_from_dict(data, str(path))
    if fmt == OPGRAPH_FORMAT:
        return opgraph_from_dict(data, str(path))
    raise InputError(f"{path}: 'format' must be '{FORMAT}' or '{OPGRAPH_FORMAT}', got {fmt!r}")


# --------------------------------------------------------------------------- writing


def _step_to_dict(step: EpilogueStep) -> dict[str, Any]:
    out: dict[str, Any] = {"op": step.op}
    if step.tensor:
        out["tensor"] = step.tensor
    if step.value is not None:
        out["value"] = step.value
    return out


def _task_to_dict(task: Task) -> dict[str, Any]:
    if isinstance(task, MatmulTask):
        out: dict[str, Any] = {
            "id": task.id,
            "type": task.type,
            "a": task.a,
            "b": task.b,
            "out": task.out,
            "transpose_b": task.transpose_b,
            "epilogue": [_step_to_dict(s) for s in task.epilogue],
        }
        if task.tiling is not None:
            out["tiling"] = {
                "base_m": task.tiling.base_m,
                "base_n": task.tiling.base_n,
                "base_k": task.tiling.base_k,
                "double_buffer": task.tiling.double_buffer,
            }
        return out
    out = {"id": task.id, "type": task.type, "op": task.op, "inputs": list(task.inputs), "out": task.out}
    if task.value is not None:
        out["value"] = task.value
    return out


def taskgraph_to_dict(tg: TaskGraph) -> dict[str, Any]:
    """The JSON form; ``taskgraph_from_dict(taskgraph_to_dict(tg)) == tg``."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "tensors": {t.name: {"shape": list(t.shape), "dtype": t.dtype} for t in tg.tensors},
        "tasks": [_task_to_dict(t) for t in tg.tasks],
    }


def dumps_taskgraph(tg: TaskGraph) -> str:
    """Canonical JSON text of ``tg``: sorted keys, no spaces, one line.

    Equal graphs give identical strings; this is what ``OpGraph.source`` holds.
    """
    return json.dumps(taskgraph_to_dict(tg), sort_keys=True, separators=(",", ":"), allow_nan=False)
