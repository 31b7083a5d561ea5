"""Per-tensor placement: a TaskGraph tensor may live in another global space (``"space":
"HBM"``); its transfers then say so, run on that space's paths and links, and the verifier holds
every transfer of a tensor to one global space."""

from __future__ import annotations

import json

import attrs
import pytest
from common import preset

from staticsched.api import compile_graph
from staticsched.cli import main
from staticsched.errors import GraphError
from staticsched.frontend.lowering import lower
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict, taskgraph_to_dict
from staticsched.model.hardware_toml import hardware_document, hardware_from_dict
from staticsched.model.traffic import gm_traffic
from staticsched.verify import verify


def _graph(space: str | None = "HBM") -> dict:
    h = {"shape": [96, 80]}
    if space is not None:
        h["space"] = space
    return {
        "format": "staticsched.taskgraph", "version": 1,
        "tensors": {"x": {"shape": [96, 64]}, "w": {"shape": [64, 80]}, "h": h, "y": {"shape": [96, 80]}},
        "tasks": [
            {"id": "mm", "type": "matmul", "a": "x", "b": "w", "out": "h"},
            {"id": "act", "type": "elementwise", "op": "gelu", "inputs": ["h"], "out": "y"},
        ],
    }


def test_placed_tensor_transfers_name_their_space_and_use_its_link():
    hw = preset("seed-davinci")
    og = lower(taskgraph_from_dict(_graph()), hw)
    for op in og.ops:
        if op.kind in ("load", "store"):
            placed = dict(op.attrs)["tensor"] == "h"
            assert (dict(op.attrs).get("space") == "HBM") == placed, op
    links = dict(gm_traffic(og, hw).links)
    assert links["HBM"] == 2 * 96 * 80 * 2  # written once, read back once
    unplaced = dict(gm_traffic(lower(taskgraph_from_dict(_graph(None)), hw), hw).links)
    assert unplaced["HBM"] == 0
    assert unplaced["L2"] == links["L2"] + links["HBM"]


def test_placed_program_verifies_with_numbers():
    hw = preset("seed-davinci")
    res = compile_graph(taskgraph_from_dict(_graph()), hw, method="list")
    report = verify(res.program, hw, numeric=True)
    assert report.ok, report.text()


def test_space_round_trips_and_absent_space_keeps_the_text():
    tg = taskgraph_from_dict(_graph())
    assert taskgraph_to_dict(tg)["tensors"]["h"]["space"] == "HBM"
    assert taskgraph_from_dict(taskgraph_to_dict(tg)) == tg
    assert '"space"' not in dumps_taskgraph(taskgraph_from_dict(_graph(None)))


@pytest.mark.parametrize(("space", "words"), [("DRAM", "is not a space of hardware"), ("L1", "is on-chip")])
def test_bad_space_is_one_line(space, words):
    with pytest.raises(GraphError) as exc:
        lower(taskgraph_from_dict(_graph(space)), preset("seed-davinci"))
    assert len(exc.value.problems) == 1
    assert "tensor 'h'" in exc.value.problems[0] and words in exc.value.problems[0]


def test_missing_path_from_the_placed_space_is_one_line():
    doc, _ = hardware_document("seed-davinci")
    doc = json.loads(json.dumps(doc))
    doc["paths"] = [p for p in doc["paths"] if not (p["src"] == "HBM" and p["dst"] == "UB")]
    for lk in doc["links"]:
        lk["paths"] = [p for p in lk["paths"] if p != "HBM->UB"]
    hw = hardware_from_dict(doc)
    with pytest.raises(GraphError) as exc:
        lower(taskgraph_from_dict(_graph()), hw)
    assert list(exc.value.problems) == [
        "tensor 'h' (space 'HBM'): hardware 'seed-davinci' has no transfer path HBM->UB in [[paths]]"
    ]


def test_cli_bad_space_exits_2(tmp_path, capsys):
    g = tmp_path / "g.json"
    g.write_text(json.dumps(_graph("DRAM")))
    argv = ["schedule", str(g), "--hw", "seed-davinci", "--method", "list", "-o", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "tensor 'h': space 'DRAM'" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def _respace(program, pick, space):
    """The program with the ``space`` attribute of the first transfer ``pick`` accepts set."""
    streams = list(program.streams)
    s, k = next((s, k) for s, st in enumerate(streams) for k, i in enumerate(st.instrs) if pick(i))
    instrs = list(streams[s].instrs)
    instrs[k] = attrs.evolve(instrs[k], attrs=(*[(n, v) for n, v in instrs[k].attrs if n != "space"],
                                               ("space", space)))
    streams[s] = attrs.evolve(streams[s], instrs=instrs)
    return attrs.evolve(program, streams=streams)


@pytest.mark.parametrize("mode", ["flags", "timed"])
def test_verifier_rejects_a_transfer_in_another_space(mode):
    hw = preset("seed-davinci")
    program = compile_graph(taskgraph_from_dict(_graph()), hw, method="list", mode=mode).program
    assert verify(program, hw).ok
    # the same rate on both paths: only the placement check sees a load reading h from GM
    moved = _respace(program, lambda i: i.kind == "load" and dict(i.attrs).get("tensor") == "h", "GM")
    kinds = {(f.check, f.kind) for f in verify(moved, hw).findings}
    assert ("dataflow", "space_mismatch") in kinds
    on_chip = _respace(program, lambda i: i.kind == "store" and dict(i.attrs).get("tensor") == "h", "L1")
    kinds = {(f.check, f.kind) for f in verify(on_chip, hw).findings}
    assert ("dataflow", "not_global") in kinds
