"""Random task graphs on random split-core hardware: every emitted program verifies clean,
numbers included, and no cross-core counter exceeds its capacity in any jittered replay."""

from __future__ import annotations

import copy
import json
import tomllib
from collections import Counter
from importlib import resources

from common import THOROUGH, examples
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from strategies import taskgraphs

from staticsched.api import compile_graph
from staticsched.frontend.lowering import estimate_ops, plan_tasks
from staticsched.frontend.taskgraph import dumps_taskgraph, taskgraph_from_dict
from staticsched.model.hardware_toml import hardware_from_dict
from staticsched.tasks.matmul.splitk import PARTIALS
from staticsched.verify import verify

_A2 = tomllib.loads((resources.files("staticsched") / "presets" / "ascend-a2.toml").read_text())


@st.composite
def split_hardware(draw):
    """``ascend-a2`` with 1-4 clusters, 1-4 cross-core ids per core pair and 1-4 usable ids
    per core (a mode-2 flag's), counters of capacity 1-15, a GM-word polling load of 0 or 200."""
    d = copy.deepcopy(_A2)
    d["clusters"] = draw(st.integers(1, 4), label="clusters")
    d["sync"]["cross_core_event_ids"] = draw(st.integers(1, 4), label="cross-core ids")
    d["sync"]["cross_core_ids_per_core"] = draw(st.integers(1, 4), label="ids per core")
    d["sync"]["cross_core_capacity"] = draw(st.integers(1, 15), label="counter capacity")
    # with and without the GM-word wait's polling load (which makes barriers pay)
    d["sync"]["gm_flag_poll"] = draw(st.sampled_from([0, 200]), label="GM-word polling load")
    return hardware_from_dict(d, "split-test")


def test_random_graphs_on_random_split_chips_verify_clean(record_stat):
    counts: Counter = Counter()

    @settings(max_examples=examples(12), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(data=st.data())
    def prop(data):
        hw = data.draw(split_hardware(), label="hw")
        graph = json.loads(dumps_taskgraph(data.draw(taskgraphs(), label="graph")))
        stages = data.draw(st.integers(1, 3), label="workspace stages")
        for task in graph["tasks"]:
            if task["type"] == "matmul" and "tiling" in task:
                task["tiling"]["workspace_stages"] = stages
        tg = taskgraph_from_dict(graph)
        # a few thousand micro-ops by default (a big draw on one cluster took a minute)
        assume(estimate_ops(plan_tasks(tg, hw)) <= (40_000 if THOROUGH else 4_000))
        # a list schedule stuck on the id budgets is rescued by CP-SAT within the limit
        compiled = compile_graph(tg, hw, method="list", time_limit=5.0)
        report = verify(compiled.program, hw, jitter=3, seed=data.draw(st.integers(0, 99)), numeric=True)
        note(report.text())
        assert report.ok
        counts["programs"] += 1
        counts["with cross-core flags"] += any(f.kind == "cross" for f in compiled.plan.flags)
        counts["with mode-2 flags"] += any(f.route == "2" for f in compiled.plan.flags)
        counts["with GM-word flags"] += any(f.route == "gm" for f in compiled.plan.flags)
        counts["with a barrier"] += any(f.route == "0" for f in compiled.plan.flags)
        counts["with a workspace"] += any(t.workspace for t in compiled.graph.tensors)
        counts["with split-K"] += any(t.name.endswith(PARTIALS) for t in compiled.graph.tensors)
        counts["with a row reduction in an epilogue"] += any(
            t.type == "matmul" and t.reduces and not t.on_vector for t in tg.tasks)

    prop()
    record_stat(f"split chips: {counts['programs']} programs, {counts['with cross-core flags']} with "
                f"cross-core flags ({counts['with mode-2 flags']} with mode 2, "
                f"{counts['with GM-word flags']} with GM words, {counts['with a barrier']} with a barrier), "
                f"{counts['with a workspace']} with a "
                f"workspace, {counts['with split-K']} with split-K, "
                f"{counts['with a row reduction in an epilogue']} with a row reduction in an epilogue")
    assert counts["with a workspace"] > 0, counts
    assert counts["with mode-2 flags"] > 0, counts
