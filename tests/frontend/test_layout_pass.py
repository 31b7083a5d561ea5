"""The layout pass (issue 48, ``staticsched.frontend.layouts``): each tensor's layout by the
cycles its accesses cost with the chip's ND2NZ model, an AIV reformat task where an input's NZ
copy is cheaper than its conversions, the search that checks by scheduling, the report, and no
change on a chip that prices no layouts."""

from __future__ import annotations

import pytest
from common import EXAMPLES, preset

from staticsched.api import compile_graph
from staticsched.frontend.layouts import NZ_COPY, assign_layouts
from staticsched.frontend.taskgraph import taskgraph_from_dict
from staticsched.verify import verify

A2 = preset("ascend-a2")


def _chain(k: int = 256, n: int = 256) -> dict:
    """x [128, k] @ w1 -> gelu -> h [128, n] @ w2 -> y: h is made by a matmul's epilogue and
    read by the Cube."""
    return {"format": "staticsched.taskgraph", "version": 1,
            "tensors": {"x": {"shape": [128, k]}, "w1": {"shape": [k, n]}, "h": {"shape": [128, n]},
                        "w2": {"shape": [n, 128]}, "y": {"shape": [128, 128]}},
            "tasks": [{"id": "up", "type": "matmul", "a": "x", "b": "w1", "out": "h",
                       "epilogue": [{"op": "gelu"}]},
                      {"id": "down", "type": "matmul", "a": "h", "b": "w2", "out": "y"}]}


def _decided(doc: dict, hw=A2, **kw):
    tg = taskgraph_from_dict(doc)
    return assign_layouts(tg, hw, fixed=["x", "y"], **kw)


def test_an_intermediate_the_cube_reads_is_written_nz_and_its_loads_convert_nothing():
    out = _decided(_chain())
    by = {d.tensor: d for d in out.decisions}
    assert by["h"].layout == "NZ" and by["h"].role == "intermediate"
    assert by["h"].nz_extra < by["h"].nd_extra
    assert (by["x"].layout, by["x"].role) == ("ND", "input") and by["y"].layout == "ND"
    tmap = out.graph.tensor_map
    assert tmap["h"].layout == "NZ" and tmap["x"].layout == "ND"
    c = compile_graph(out.graph, A2, method="list")
    h_loads = [op for op in c.graph.ops if op.kind == "load" and op.attr["tensor"] == "h"]
    h_stores = [op for op in c.graph.ops if op.kind == "store" and op.attr["tensor"] == "h"]
    assert h_loads and all(op.attr.get("nz") and not op.attr.get("nd2nz") for op in h_loads)
    assert h_stores and all(op.attr.get("nz") for op in h_stores)
    report = verify(c.program, A2, jitter=1, numeric=True)
    assert report.ok, report.text()
    # the decided graph is no slower than everything ND, as the costs said
    nd = compile_graph(taskgraph_from_dict(_chain()), A2, method="list")
    assert c.schedule.makespan <= nd.schedule.makespan


def test_constants_take_nz_when_cheaper_unless_kept_nd():
    doc = _chain()
    tg = taskgraph_from_dict(doc)
    import numpy as np

    consts = {"w1": np.zeros((256, 256), np.float16), "w2": np.zeros((256, 128), np.float16)}
    from staticsched.frontend.taskgraph import TaskGraph

    tg = TaskGraph(tg.tensors, tg.tasks, consts)
    on = assign_layouts(tg, A2, fixed=["x", "y"])
    off = assign_layouts(tg, A2, fixed=["x", "y"], weights_nz=False)
    by_on = {d.tensor: d for d in on.decisions}
    by_off = {d.tensor: d for d in off.decisions}
    assert by_on["w1"].role == "constant"
    # w1's 128 x 128 tiles of an aligned 512-B stride convert at 1.32x: NZ is cheaper
    assert by_on["w1"].layout == "NZ" and by_off["w1"].layout == "ND"
    assert "load time" in by_on["w1"].places()


def test_a_misaligned_input_the_cube_reads_often_gets_an_aiv_reformat_task():
    # x [128, 1000]: rows 2000 B apart (16-B aligned only), read by four N blocks: each of its
    # loads converts at several times the rate; one AIV copy into NZ costs less
    doc = _chain(k=1000, n=512)
    out = _decided(doc)
    (d,) = [d for d in out.decisions if d.tensor == "x"]
    assert d.layout == "ND" and d.reformat == "layout/x" and d.reformat_cycles > 0
    ids = [t.id for t in out.graph.tasks]
    assert ids[0] == "layout/x"
    copy = out.graph.tasks[0]
    assert (copy.type, copy.op, copy.inputs, copy.out) == ("elementwise", "copy", ("x",), "x" + NZ_COPY)
    assert out.graph.tensor_map["x" + NZ_COPY].layout == "NZ"
    up = next(t for t in out.graph.tasks if t.id == "up")
    assert up.a == "x" + NZ_COPY and up.a_nz
    c = compile_graph(out.graph, A2, method="list")
    # the copy is a load and a store per tile (the DMAs reorder), no Vector op
    copy_ops = [op for op in c.graph.ops if op.id.startswith("layout/x.")]
    assert copy_ops and {op.kind for op in copy_ops} == {"load", "store"}
    report = verify(c.program, A2, jitter=1, numeric=True)
    assert report.ok, report.text()
    text = out.text()
    assert "x [128x1000] input: ND" in text and "an AIV reformat task (layout/x" in text


def test_two_misaligned_inputs_each_get_their_reformat_task():
    # x [128, 1000] and z [128, 1000], each read by four N blocks of its own matmul: both copies
    # are made (the second once met the first's task in the document: an internal error)
    doc = _chain(k=1000, n=512)
    doc["tensors"].update({"z": {"shape": [128, 1000]}, "w3": {"shape": [1000, 512]},
                           "g": {"shape": [128, 512]}})
    doc["tasks"].append({"id": "side", "type": "matmul", "a": "z", "b": "w3", "out": "g"})
    out = assign_layouts(taskgraph_from_dict(doc), A2, fixed=["x", "y", "z", "g"])
    assert sorted(d.reformat for d in out.decisions if d.reformat) == ["layout/x", "layout/z"]
    by_id = {t.id: t for t in out.graph.tasks}
    assert by_id["up"].a == "x" + NZ_COPY and by_id["side"].a == "z" + NZ_COPY
    assert {by_id["layout/x"].out, by_id["layout/z"].out} == {"x" + NZ_COPY, "z" + NZ_COPY}
    c = compile_graph(out.graph, A2, method="list")
    assert verify(c.program, A2, jitter=0, numeric=True).ok


def test_search_checks_the_rules_by_scheduling():
    seen = []

    def measure(g):
        ms = compile_graph(g, A2, method="list").schedule.makespan
        seen.append(ms)
        return ms

    out = _decided(_chain(), mode="search", measure=measure)
    assert out.search and out.search[0].startswith("rules' layouts: ")
    assert len(seen) == len(out.search)
    assert min(seen) == measure(out.graph)


def test_a_chip_that_prices_no_layouts_keeps_every_tensor_nd():
    doc = _chain()
    doc["tensors"]["w1"]["layout"] = "NZ"
    out = _decided(doc, hw=preset("seed-davinci"))
    assert all(t.layout == "ND" for t in out.graph.tensors)
    assert out.decisions == () and "converts layouts at no cost" in out.note
    given = _decided(doc, mode="given")
    assert given.graph.tensor_map["w1"].layout == "NZ"


@pytest.mark.parametrize("name", ["gpt_block", "bert_layer"])
def test_the_shipped_models_decide_every_tensor_and_write_layouts_txt(tmp_path, name):
    pytest.importorskip("onnx")
    from staticsched.onnx.tool import import_for_schedule, write_graph

    res = import_for_schedule(EXAMPLES / "onnx" / f"{name}.onnx", A2, fusion="rules", budget=None)
    layouts = res.imported.layouts
    assert len(layouts.decisions) == len(res.graph.tensors) - sum(d.reformat != "" for d in layouts.decisions)
    nz = {d.tensor for d in layouts.decisions if d.layout == "NZ"}
    # every matmul's output that only the Cube reads next is NZ (q, k, v into attention, ...)
    assert any(t.endswith("q_proj/Add_output_0") for t in nz)
    for d in layouts.decisions:
        assert d.layout == ("NZ" if d.nz_extra < d.nd_extra and d.role in ("intermediate", "constant")
                            else "ND") or "undone" in d.rule
    paths = write_graph(res, tmp_path / "g.json")
    assert (tmp_path / "g.layouts.txt") in paths
    assert "layout pass: rules" in (tmp_path / "g.layouts.txt").read_text()
    assert any(line.startswith("layout pass  : rules: ") for line in res.lines())
