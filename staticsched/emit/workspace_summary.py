"""The summary lines of the GM workspaces a lowering adds: a split chip's rings of output-tile
slots between AIC and AIVs, and split-K's fp32 partial sums with the time of their reduction."""

from __future__ import annotations

from staticsched.model.hardware import DTYPE_BYTES
from staticsched.model.schedule import Schedule
from staticsched.tasks.matmul.splitk import PARTIALS


def workspace_lines(schedule: Schedule) -> list[str]:
    """One line per workspace tensor: its shape and bytes and what it holds; for split-K
    partials also the reduction's ops (the loads of the partials and the Vector ops reading
    them), their busy cycles and the cycles from the first partial's store to the last of
    them."""
    lines = []
    for t in schedule.graph.tensors:
        if not t.workspace:
            continue
        nbytes = t.shape[0] * t.shape[1] * DTYPE_BYTES[t.dtype]
        head = f"workspace    : {t.name} {t.shape[0]}x{t.shape[1]} {t.dtype}, {nbytes / 2**20:.2f} MiB"
        if not t.name.endswith(PARTIALS):
            lines.append(f"{head} (a ring of tile slots per AIC)")
            continue
        lines.append(f"{head} (split-K partial sums, written once and read back once)")
        lines.append("split-K      : " + _reduction(schedule, t.name))
    return lines


def reduction_ops(graph, tensor: str) -> tuple[list, list]:
    """The reduction of split-K partials ``tensor``: its ops (the loads of the partials and the
    Vector ops reading what they loaded) and the stores of the partials, in program order."""
    loaded: set[str] = set()
    ops, stores = [], []
    for op in graph.ops:
        target = dict(op.attrs).get("tensor")
        if op.kind == "load" and target == tensor:
            loaded.update(op.writes)
            ops.append(op)
        elif op.kind == "store" and target == tensor:
            stores.append(op)
        elif op.kind == "vec" and loaded.intersection(op.reads):
            ops.append(op)
    return ops, stores


def _reduction(schedule: Schedule, tensor: str) -> str:
    when = {t.id: (t.start, t.end) for t in schedule.ops}
    ops, stores = reduction_ops(schedule.graph, tensor)
    if not ops or not stores:
        return "no reduction ops"
    busy = sum(when[op.id][1] - when[op.id][0] for op in ops)
    first = min(when[op.id][0] for op in stores)
    last_store = max(when[op.id][1] for op in stores)
    end = max(when[op.id][1] for op in ops)
    cores = len({op.core for op in ops})
    return (f"reduction of {tensor}: {len(ops)} ops on {cores} cores, {busy} busy cycles; partials "
            f"stored from cycle {first}, the last at {last_store}, reduced by {end} "
            f"({end - last_store} cycles after the last partial)")
