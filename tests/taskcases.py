"""Helpers for the task-kind tests: TaskGraph documents, a sequential replay of the lowered ops
against the NumPy reference, and the CLI's answer to a bad graph."""

from __future__ import annotations

import json

import numpy as np

from staticsched.cli import main
from staticsched.frontend.lowering import estimate_ops, lower, plan_tasks
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opkinds import KINDS as OPKINDS

SEED = load_hardware("seed-davinci")


def graph(tensors: dict, *tasks: dict) -> dict:
    """A TaskGraph document: tensor name -> shape, then the tasks."""
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": list(v)} for k, v in tensors.items()}, "tasks": list(tasks)}


def with_task(d: dict, **task) -> dict:
    """``d`` with its only task updated."""
    return {**d, "tasks": [{**d["tasks"][0], **task}]}


def replay(g, inputs):
    """The ops' NumPy semantics in list order (a valid sequential execution)."""
    gm = {t.name: np.zeros(t.shape, dtype=t.dtype) for t in g.tensors}
    for name, value in inputs.items():
        gm[name][...] = value
    bufs = {it.name: np.full(it.shape, np.nan, dtype=it.dtype) for it in g.items}
    with np.errstate(all="ignore"):
        for op in g.ops:
            OPKINDS[op.kind].semantics(op.attr, [bufs[n] for n in op.reads], [bufs[n] for n in op.writes], gm)
    return gm


def max_error(d: dict, hw=SEED) -> float:
    """Max element error (relative to max(1, |reference|)) of a sequential replay of the
    lowered ops against the reference; checks the op estimate and the OpGraph on the way."""
    tg = taskgraph_from_dict(d)
    g = lower(tg, hw)
    assert len(g.ops) == estimate_ops(plan_tasks(tg, hw))
    g.check(hw)
    inputs = make_inputs(tg, 1)
    got, want = replay(g, inputs), reference(tg, inputs)
    errors = [np.abs(got[k].astype(np.float64) - v.astype(np.float64)) / np.maximum(1, np.abs(v))
              for k, v in want.items()]
    return max(float(np.max(e)) for e in errors)


def cli_error_lines(d: dict, tmp_path, capsys) -> tuple[int, list[str]]:
    """Exit code and stderr lines of ``staticsched schedule`` on the graph ``d``; checks that no
    traceback and no output directory appear."""
    path = tmp_path / "g.json"
    path.write_text(json.dumps(d))
    code = main(["schedule", str(path), "--hw", "seed-davinci", "-o", str(tmp_path / "out"), "--quiet"])
    _, err = capsys.readouterr()
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    return code, err.strip().splitlines()
