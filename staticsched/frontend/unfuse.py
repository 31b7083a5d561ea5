"""A fused TaskGraph taken apart into per-node kernels (:func:`unfuse`): what a runtime that
launches one kernel per graph node would run.

Every ``matmul`` loses its epilogue: the bare matmul writes a new GM tensor and each epilogue
step becomes a task of its own reading the previous step's tensor, an ``elementwise`` task
for a Vector op and a ``rowwise`` task for a row reduction (softmax, layernorm, rmsnorm); the
last step writes the matmul's original output. ``elementwise``, ``rowwise`` and ``attention``
tasks stay as they are. The computation is the same one: every fused epilogue step already
rounds its tile to fp16, as the separate tasks' GM tensors do, so the NumPy references agree.
"""

from __future__ import annotations

from typing import Any

from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.tasks import kind_of

__all__ = ["unfuse"]


def _fresh(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``, ... the first not in ``taken`` (which it joins)."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def unfuse(tg: TaskGraph) -> TaskGraph:
    """The same computation as one task per graph node: no matmul keeps an epilogue.

    A matmul ``T`` with epilogue steps ``s1 .. sn`` becomes the bare matmul ``T`` writing the
    tensor ``T.0``, then for each step ``i`` a task ``T_<op><i>`` (``elementwise`` for a Vector
    op, ``rowwise`` for a row reduction) reading ``T.<i-1>`` (and the step's own tensor,
    ``gamma``, ``beta``) and writing ``T.<i>``; the last step writes the matmul's original
    output. Intermediate tensors have the matmul output's declared shape. A name already
    taken gets a ``_2``, ``_3``, ... suffix. Tasks keep their order, each matmul's steps right
    after it, so the result is deterministic.

    Parameters
    ----------
    tg
        A valid task graph.

    Returns
    -------
    TaskGraph
        The unfused graph, built through :func:`taskgraph_from_dict` (so it is validated); it
        has the same input and output tensors as ``tg`` plus the intermediates.
    """
    doc = taskgraph_to_dict(tg)
    tensors: dict[str, Any] = doc["tensors"]
    task_ids = {t.id for t in tg.tasks}
    tensor_names = set(tensors)
    tasks: list[dict[str, Any]] = []
    for task in tg.tasks:
        task: Any = task  # a matmul's epilogue and out are read below, after its type is known
        body = kind_of(task).to_dict(task)
        if task.type != "matmul" or not task.epilogue:
            tasks.append(body)
            continue
        out_decl = dict(tensors[task.out])
        out_decl.pop("space", None)  # intermediates live in the global space
        prev = _fresh(f"{task.id}.0", tensor_names)
        tensors[prev] = dict(out_decl)
        body["epilogue"] = []
        body["out"] = prev
        tasks.append(body)
        last = len(task.epilogue)
        for i, step in enumerate(task.epilogue, start=1):
            if i == last:
                out = task.out
            else:
                out = _fresh(f"{task.id}.{i}", tensor_names)
                tensors[out] = dict(out_decl)
            step_id = _fresh(f"{task.id}_{step.op}{i}", task_ids)
            if step.reduces:
                node: dict[str, Any] = {"id": step_id, "type": "rowwise", "op": step.op, "input": prev,
                                        "out": out}
                for key in ("gamma", "beta"):
                    if getattr(step, key):
                        node[key] = getattr(step, key)
                if step.eps is not None:
                    node["eps"] = step.eps
            else:
                node = {"id": step_id, "type": "elementwise", "op": step.op,
                        "inputs": [prev, step.tensor] if step.tensor else [prev], "out": out}
                if step.value is not None:
                    node["value"] = step.value
            tasks.append(node)
            prev = out
    doc["tasks"] = tasks
    return taskgraph_from_dict(doc, "<unfused>")
