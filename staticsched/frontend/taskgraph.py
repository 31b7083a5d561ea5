"""TaskGraph: GM tensors and fused tasks (DESIGN §4), read from and written to JSON.

Tasks depend on each other only through GM tensors: a task reading a tensor another task
writes runs after it. What a task of each ``type`` is lives in its kind's module
(:mod:`staticsched.tasks`); this module reads the file's header and tensors, dispatches each
task to its kind's reader through the registry, and checks what spans tasks (one writer per
tensor, no cycles). Every problem in a file is reported at once, one line each, naming the
task, key or tensor and the numbers.

Tensors are declared with 1 to 4 dims (leading batch and head dims, then a matrix); every
GM tensor is 2-D everywhere else, its leading dims flattened into rows, and a 1-D ``[N]``
tensor is the row ``[1, N]`` (lowering, reference, OpGraph tensors).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import networkx as nx
import numpy as np

from staticsched._fields import (
    Problems,
    check_keys,
    check_name,
    get_int,
    get_list,
    get_mapping,
    get_str,
    is_int,
)
from staticsched.errors import GraphError, InputError, TilingError
from staticsched.model.dtypes import COMPUTE_DTYPES, numpy_dtype
from staticsched.model.opgraph import FORMAT as OPGRAPH_FORMAT
from staticsched.model.opgraph import OpGraph, load_json_file, opgraph_from_dict
from staticsched.tasks import KIND_OF_OP, KINDS, kind_of
from staticsched.tasks.base import LAYOUTS, MAX_RANK, ReadContext, Task, TensorDecl

FORMAT = "staticsched.taskgraph"
VERSION = 1

#: the dtypes a tensor may declare (docs/formats.md, "Dtypes"): a task's operands share one,
#: matmuls accumulate in fp32 and FixPipe converts to the output's
DTYPES = tuple(COMPUTE_DTYPES)

__all__ = [
    "FORMAT",
    "VERSION",
    "TaskGraph",
    "TensorDecl",
    "constants_npz",
    "dumps_taskgraph",
    "load_graph",
    "load_taskgraph",
    "taskgraph_from_dict",
    "taskgraph_to_dict",
]


@attrs.frozen
class TaskGraph:
    """Declared GM tensors and tasks; build it with :func:`taskgraph_from_dict` so it is valid."""

    tensors: tuple[TensorDecl, ...] = attrs.field(converter=tuple)
    tasks: tuple[Task, ...] = attrs.field(converter=tuple)
    #: input tensors whose values travel with the graph (a model's weights): name -> array of
    #: the tensor's dtype and 2-D shape; the numeric replay uses them instead of drawn values
    constants: Mapping[str, np.ndarray] = attrs.field(factory=dict, eq=False, repr=False)

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


_TOP_KEYS = ("format", "version", "tensors", "tasks", "constants")
_TENSOR_KEYS = ("shape", "dtype", "space", "layout")


def taskgraph_from_dict(data: Any, where: str = "<taskgraph>", base: Path | None = None) -> TaskGraph:
    """Build a :class:`TaskGraph` from decoded JSON, reporting every problem at once.

    Parameters
    ----------
    data
        The decoded JSON document (``{"format": "staticsched.taskgraph", ...}``).
    where
        Prefix of every problem line (usually the file path).
    base
        The directory a ``"constants"`` file name is relative to (the JSON file's); the
        current directory when None.

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
        kind = KINDS.get(get_str(body, "type", w, pr, choices=tuple(KINDS)))
        if kind is not None:
            task = kind.read(body, ReadContext(tmap, w, task_id, pr, tiling_pr, KIND_OF_OP))
            if task is not None:
                tasks.append(task)

    _check_writers(tasks, where, pr)
    if not pr:  # with every task read, a cycle is a problem of its own
        _check_cycles(tasks, where, pr)
    constants = _read_constants(data, tensors, tasks, where, base, pr)
    if pr:
        pr.lines.extend(tiling_pr.lines)
        pr.raise_if_any(GraphError)
    tiling_pr.raise_if_any(TilingError)
    return TaskGraph(tensors, tasks, constants)


def _read_constants(data: Mapping[str, Any], tensors: list[TensorDecl], tasks: list[Task], where: str,
                    base: Path | None, pr: Problems) -> dict[str, np.ndarray]:
    """The ``"constants"`` key: a ``.npz`` file name, or inline ``{name: {"base64": ...}}``
    (the tensor's dtype, little-endian, row-major); every value is a declared input of its
    shape, stored in its tensor's dtype (bfloat16 as its 16-bit patterns, ``uint16``)."""
    raw = data.get("constants")
    if raw is None:
        return {}
    w = f"{where}: constants"
    declared = {t.name: t for t in tensors}
    values: dict[str, np.ndarray] = {}
    if isinstance(raw, str):
        path = (base or Path(".")) / raw
        try:
            with np.load(path, allow_pickle=False) as npz:
                stored = {k: npz[k] for k in sorted(npz.files)}
        except (OSError, ValueError) as exc:
            pr.add(f"{w}: cannot read '{path}' ({type(exc).__name__}: {exc})")
            return {}
        for name, value in stored.items():
            t = declared.get(name)
            if t is None:
                values[name] = value  # reported below
                continue
            want = _stored_dtype(t.dtype)
            kinds = "uV" if t.dtype == "bfloat16" else want.kind
            if value.dtype.kind not in kinds or value.dtype.itemsize != want.itemsize:
                pr.add(f"{w}: '{name}' is {value.dtype} in '{raw}', tensor '{name}' is {t.dtype} "
                       f"(stored as {want})")
                continue
            values[name] = _from_stored(value, t.dtype)
    elif isinstance(raw, Mapping):
        for name, body in sorted(raw.items()):
            t = declared.get(name)
            dtype = t.dtype if t is not None and t.dtype in DTYPES else "float16"
            if not isinstance(body, Mapping) or set(body) != {"base64"} or not isinstance(body["base64"],
                                                                                          str):
                pr.add(f"{w}: '{name}' must be {{\"base64\": \"...\"}} ({dtype} bytes), got {body!r:.60}")
                continue
            try:
                buf = base64.b64decode(body["base64"], validate=True)
            except ValueError as exc:
                pr.add(f"{w}: '{name}' is not base64 ({exc})")
                continue
            size = numpy_dtype(dtype).itemsize
            if len(buf) % size:
                pr.add(f"{w}: '{name}' has {len(buf)} bytes, not a whole number of {dtype} values")
                continue
            values[name] = _from_stored(np.frombuffer(buf, dtype=_stored_dtype(dtype)), dtype)
    else:
        pr.add(f"{w}: must be a .npz file name or an object of inline values, got {type(raw).__name__}")
        return {}
    written = {name for t in tasks for name in t.writes}
    out: dict[str, np.ndarray] = {}
    for name, value in values.items():
        t = declared.get(name)
        if t is None:
            pr.add(f"{w}: '{name}' is not a declared tensor")
        elif name in written:
            pr.add(f"{w}: '{name}' is written by a task; only inputs of the graph can be constants")
        elif value.size != t.shape2d[0] * t.shape2d[1]:
            pr.add(f"{w}: '{name}' has {value.size} values, tensor {list(t.shape)} needs "
                   f"{t.shape2d[0] * t.shape2d[1]}")
        elif np.isnan(value.astype(np.float32)).any():
            pr.add(f"{w}: '{name}' holds NaN")
        else:
            arr = np.ascontiguousarray(value.reshape(t.shape2d))
            arr.flags.writeable = False
            out[name] = arr
    return out


def _stored_dtype(dtype: str) -> np.dtype:
    """How a constant of ``dtype`` is stored: its own little-endian dtype, bfloat16 as the
    ``uint16`` of its bits (a ``.npz`` cannot name ml_dtypes' bfloat16)."""
    return np.dtype("<u2") if dtype == "bfloat16" else numpy_dtype(dtype).newbyteorder("<")


def _from_stored(value: np.ndarray, dtype: str) -> np.ndarray:
    """A stored constant as an array of ``dtype``."""
    if dtype == "bfloat16":
        return np.ascontiguousarray(value).view(np.dtype("<u2")).view(numpy_dtype(dtype))
    return value.astype(numpy_dtype(dtype))


def _to_stored(value: np.ndarray, dtype: str) -> np.ndarray:
    """A constant of ``dtype`` as it is stored (:func:`_stored_dtype`)."""
    arr = np.ascontiguousarray(np.asarray(value).astype(numpy_dtype(dtype)))
    if dtype == "bfloat16":
        return arr.view(np.dtype("<u2"))
    return arr.astype(_stored_dtype(dtype))


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
        if not 1 <= len(shape) <= MAX_RANK or not all(is_int(x) for x in shape):
            pr.add(f"{w}: 'shape' must be a list of 1 to {MAX_RANK} integers (leading batch/head dims, "
                   f"then rows and columns), got {body.get('shape')!r}")
            shape = [1]
            bad_shapes.add(name)
        elif any(x <= 0 for x in shape):
            pr.add(f"{w}: every dim of 'shape' must be positive, got {list(shape)}")
            shape = [1]
            bad_shapes.add(name)
        dtype = get_str(body, "dtype", w, pr, default="float16")
        if dtype and dtype not in DTYPES:
            pr.add(f"{w}: dtype {dtype!r} is not supported (dtypes: {', '.join(DTYPES)}; matmuls "
                   f"accumulate in fp32)")
            dtype = "float16"
        space = get_str(body, "space", w, pr, default="")
        layout = get_str(body, "layout", w, pr, default="ND", choices=LAYOUTS)
        out.append(TensorDecl(name, tuple(shape), dtype, space, layout if layout in LAYOUTS else "ND"))
    return out, bad_shapes


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
    if nx.is_directed_acyclic_graph(g):  # linear; find_cycle's edge DFS costs ~10x on 10^5 tasks
        return
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
    return taskgraph_from_dict(load_json_file(path), str(path), Path(path).parent)


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
        return taskgraph_from_dict(data, str(path), Path(path).parent)
    if fmt == OPGRAPH_FORMAT:
        return opgraph_from_dict(data, str(path))
    raise InputError(f"{path}: 'format' must be '{FORMAT}' or '{OPGRAPH_FORMAT}', got {fmt!r}")


# --------------------------------------------------------------------------- writing


def taskgraph_to_dict(tg: TaskGraph, constants: str | None = None) -> dict[str, Any]:
    """The JSON form; ``taskgraph_from_dict(taskgraph_to_dict(tg)) == tg``.

    Constants are inline (base64, each in its tensor's dtype) unless ``constants`` names the
    ``.npz`` file the caller writes them to (:func:`constants_npz`).
    """
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "tensors": {t.name: _tensor_dict(t) for t in tg.tensors},
        "tasks": [kind_of(t).to_dict(t) for t in tg.tasks],
    }
    if constants is not None:
        out["constants"] = constants
    elif tg.constants:  # absent without constants: graphs without them keep their text
        tmap = tg.tensor_map
        out["constants"] = {name: {"base64": base64.b64encode(_to_stored(value, tmap[name].dtype).tobytes())
                                   .decode("ascii")} for name, value in sorted(tg.constants.items())}
    return out


def constants_npz(tg: TaskGraph) -> bytes:
    """``tg``'s constants as the bytes of a ``.npz`` file, by tensor name, each in its tensor's
    dtype (bfloat16 as ``uint16`` bits)."""
    buf = io.BytesIO()
    tmap = tg.tensor_map
    arrays: dict[str, Any] = {name: _to_stored(v, tmap[name].dtype)
                              for name, v in sorted(tg.constants.items())}
    np.savez(buf, **arrays)
    return buf.getvalue()


def _tensor_dict(t: TensorDecl) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": list(t.shape), "dtype": t.dtype}
    if t.space:  # absent means the global space: graphs without placements keep their text
        out["space"] = t.space
    if t.layout != "ND":  # likewise: ND is the default, graphs without layouts keep their text
        out["layout"] = t.layout
    return out


def dumps_taskgraph(tg: TaskGraph) -> str:
    """Canonical JSON text of ``tg``: sorted keys, no spaces, one line.

    Equal graphs give identical strings; this is what ``OpGraph.source`` holds.
    """
    return json.dumps(taskgraph_to_dict(tg), sort_keys=True, separators=(",", ":"), allow_nan=False)
