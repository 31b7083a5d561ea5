"""What one static program saves over launching kernel after kernel (seed article §1.2: every
kernel launch has a fixed cost of 3–10 µs, so a 200-node subgraph pays 0.6–2 ms to launch
0.3 ms of work; graphs-and-split-cores.md §3).

:func:`compare_dispatch` schedules a TaskGraph three ways on one chip:

(a) **static**: the whole graph as one program (:func:`staticsched.pipeline.compile_graph`),
    launched once: its makespan plus one ``launch_overhead_us``;
(b) **kernels**: each task as a kernel of its own (a one-task graph whose inputs are the
    task's reads, scheduled alone on the whole chip), run back to back: the sum of their
    makespans plus one launch per task;
(c) **unfused**: the graph taken apart into one kernel per node
    (:func:`staticsched.frontend.unfuse.unfuse`: every matmul epilogue step a task), each
    scheduled alone, back to back: the sum plus one launch per node.

Kernels run back to back here: no overlap between consecutive kernels and no host-side
pipelining of launches (the overhead is paid in full, in series). Identical kernels (the same
canonical TaskGraph text) are scheduled once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import attrs

from staticsched.frontend.taskgraph import TaskGraph, dumps_taskgraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.frontend.unfuse import unfuse
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.options import DEFAULT_OP_BUDGET
from staticsched.pipeline import compile_graph
from staticsched.tasks import kind_of

__all__ = ["Dispatch", "compare_dispatch", "dispatch_table", "kernel_graph"]


@attrs.frozen
class Dispatch:
    """One TaskGraph run three ways on one chip: as one static program, as one kernel per
    task, and unfused as one kernel per node.

    Attributes
    ----------
    graph
        The graph's name (for tables; empty when not given).
    hw
        The chip: its clock converts cycles to µs, its ``launch_overhead_us`` is the fixed
        cost of one kernel launch.
    static_cycles
        (a) The whole graph's makespan as one program, in cycles.
    kernel_cycles
        (b) ``(task id, makespan in cycles)`` of each task scheduled alone, in the graph's
        task order.
    node_cycles
        (c) ``(task id, makespan in cycles)`` of each task of the unfused graph scheduled
        alone, in its task order.
    """

    graph: str
    hw: Hardware = attrs.field(repr=lambda h: repr(h.name))
    static_cycles: int
    kernel_cycles: tuple[tuple[str, int], ...] = attrs.field(converter=lambda v: tuple(map(tuple, v)))
    node_cycles: tuple[tuple[str, int], ...] = attrs.field(converter=lambda v: tuple(map(tuple, v)))

    @property
    def launch_overhead_us(self) -> float:
        """The fixed cost of one kernel launch on the chip, in µs."""
        return self.hw.launch_overhead_us

    @property
    def n_tasks(self) -> int:
        """Tasks of the graph: the kernels of (b)."""
        return len(self.kernel_cycles)

    @property
    def n_nodes(self) -> int:
        """Tasks of the unfused graph: the kernels of (c)."""
        return len(self.node_cycles)

    @property
    def static_compute_us(self) -> float:
        """(a) without its launch: the static program's makespan in µs."""
        return self.hw.cycles_to_us(self.static_cycles)

    @property
    def kernel_compute_us(self) -> float:
        """(b) without launches: the sum of the separate kernels' makespans in µs."""
        return self.hw.cycles_to_us(sum(c for _, c in self.kernel_cycles))

    @property
    def node_compute_us(self) -> float:
        """(c) without launches: the sum of the per-node kernels' makespans in µs."""
        return self.hw.cycles_to_us(sum(c for _, c in self.node_cycles))

    @property
    def static_us(self) -> float:
        """(a) The static program: its makespan plus one launch, in µs."""
        return self.static_compute_us + self.launch_overhead_us

    @property
    def kernels_us(self) -> float:
        """(b) One kernel per task, back to back: their makespans plus ``n_tasks`` launches."""
        return self.kernel_compute_us + self.n_tasks * self.launch_overhead_us

    @property
    def unfused_us(self) -> float:
        """(c) One kernel per node, back to back: their makespans plus ``n_nodes`` launches."""
        return self.node_compute_us + self.n_nodes * self.launch_overhead_us


def kernel_graph(tg: TaskGraph, task_id: str) -> TaskGraph:
    """Task ``task_id`` of ``tg`` as a graph of its own: the task, the tensors it reads (now
    the graph's inputs) and the tensors it writes, declared as in ``tg`` (with the values of
    those of ``tg``'s constants it reads).

    Raises
    ------
    KeyError
        When ``tg`` has no task ``task_id``.
    """
    task = {t.id: t for t in tg.tasks}[task_id]
    doc = taskgraph_to_dict(tg)
    names = set(task.reads) | set(task.writes)
    doc["tensors"] = {k: v for k, v in doc["tensors"].items() if k in names}
    if isinstance(doc.get("constants"), dict):  # inline input values: the kernel's own only
        doc["constants"] = {k: v for k, v in doc["constants"].items() if k in names}
    doc["tasks"] = [kind_of(task).to_dict(task)]
    return taskgraph_from_dict(doc, f"<kernel {task_id}>")


def compare_dispatch(
    tg: TaskGraph,
    hw: Hardware | str,
    *,
    method: str = "list",
    name: str = "",
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 1,
    mode: str = "flags",
    op_budget: int | None = DEFAULT_OP_BUDGET,
    progress: Callable[[str], None] | None = None,
) -> Dispatch:
    """Schedule ``tg`` as one static program, as one kernel per task and unfused as one kernel
    per node (see the module's docstring).

    Parameters
    ----------
    tg
        The task graph.
    hw
        A :class:`Hardware`, a preset name or a TOML path; its ``launch_overhead_us`` is the
        cost of each launch (0 when the model does not give it).
    method, time_limit, seed, workers, mode, op_budget
        How every schedule is made, as :func:`staticsched.compile_graph` takes them.
    name
        The graph's name in the result.
    progress
        Called with one line per schedule made (which, its makespan and its wall time).

    Returns
    -------
    Dispatch
        The makespans of the three forms.

    Raises
    ------
    StaticschedError
        When a graph or kernel cannot be lowered or scheduled on ``hw``.
    """
    hw = load_hardware(hw)
    cache: dict[str, int] = {}

    def makespan(graph: TaskGraph, label: str) -> int:
        key = dumps_taskgraph(graph)
        if key not in cache:
            t0 = time.monotonic()
            compiled = compile_graph(graph, hw, method=method, time_limit=time_limit, seed=seed,
                                     workers=workers, mode=mode, op_budget=op_budget)
            cache[key] = compiled.schedule.makespan
            if progress is not None:
                progress(f"{hw.name} {name or 'graph'} {label}: {len(compiled.graph.ops)} ops, "
                         f"makespan {cache[key]} cycles, {time.monotonic() - t0:.1f} s")
        return cache[key]

    def each(graph: TaskGraph, what: str) -> list[tuple[str, int]]:
        return [(t.id, makespan(kernel_graph(graph, t.id), f"{what} {t.id}")) for t in graph.tasks]

    static = makespan(tg, "static")
    kernels = each(tg, "kernel")
    nodes = each(unfuse(tg), "node")
    return Dispatch(name, hw, static, kernels, nodes)


def dispatch_table(rows: Sequence[Dispatch]) -> list[str]:
    """A Markdown table of ``rows``: graph, tasks, nodes, (a), (b), (c) in µs, and (b)/(a),
    (c)/(a); the legend follows it."""
    out = ["| graph | tasks | nodes | (a) µs | (b) µs | (c) µs | (b)/(a) | (c)/(a) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        a = r.static_us
        out.append(f"| {r.graph or '-'} | {r.n_tasks} | {r.n_nodes} | {a:.2f} | {r.kernels_us:.2f} | "
                   f"{r.unfused_us:.2f} | {_ratio(r.kernels_us, a)} | {_ratio(r.unfused_us, a)} |")
    if rows:
        launch = ", ".join(sorted({f"{r.launch_overhead_us:g} µs" for r in rows}))
        out.append(f"(a) one static program (makespan + 1 launch); (b) one kernel per task, back to back "
                   f"(sum + tasks x launch); (c) one kernel per node, unfused (sum + nodes x launch); "
                   f"launch = {launch}")
    return out


def _ratio(x: float, a: float) -> str:
    return f"{x / a:.2f}" if a > 0 else "-"
