"""Helpers for the task-kind tests: TaskGraph documents, a sequential replay of the lowered ops
against the NumPy reference, and the CLI's answer to a bad graph."""

from __future__ import annotations

import json

import numpy as np
from common import SEED, replay

from staticsched.cli import main
from staticsched.frontend.lowering import estimate_ops, lower, plan_tasks
from staticsched.frontend.reference import make_inputs, reference
from staticsched.frontend.taskgraph import taskgraph_from_dict


def graph(tensors: dict, *tasks: dict) -> dict:
    """A TaskGraph document: tensor name -> shape, then the tasks."""
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {k: {"shape": list(v)} for k, v in tensors.items()}, "tasks": list(tasks)}


def with_task(d: dict, **task) -> dict:
    """``d`` with its only task updated."""
    return {**d, "tasks": [{**d["tasks"][0], **task}]}


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


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the CLI on ``argv``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def mlp(m: int, d: int, f: int) -> dict:
    """x[m, d] . W1[d, f] + b1 -> gelu -> . W2[f, d] + b2: two matmuls chained through GM."""
    return {
        "format": "staticsched.taskgraph",
        "version": 1,
        "tensors": {
            "x": {"shape": [m, d]}, "w1": {"shape": [d, f]}, "b1": {"shape": [f]},
            "h": {"shape": [m, f]}, "w2": {"shape": [f, d]}, "b2": {"shape": [d]},
            "y": {"shape": [m, d]},
        },
        "tasks": [
            {"id": "up", "type": "matmul", "a": "x", "b": "w1", "out": "h",
             "epilogue": [{"op": "bias", "tensor": "b1"}, {"op": "gelu"}]},
            {"id": "down", "type": "matmul", "a": "h", "b": "w2", "out": "y",
             "epilogue": [{"op": "bias", "tensor": "b2"}]},
        ],
    }
