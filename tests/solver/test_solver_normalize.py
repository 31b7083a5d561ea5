"""The solver's index-space normalisation equals the reference functions on op names
(``deps.address_edges`` + ``oracles.semi_active_starts``) and never delays an op."""

from common import examples
from hypothesis import HealthCheck, given, settings
from oracles import semi_active_starts
from schedcases import instances

from staticsched.model import deps
from staticsched.model.schedule import Placement
from staticsched.solver import build_problems, list_schedule
from staticsched.solver.families.memory import live_ranges
from staticsched.solver.list_sched import Stuck
from staticsched.solver.normalize import semi_active


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_ops=12))
def test_index_space_normalisation_matches_deps(case):
    graph, hw = case
    graph.check(hw)
    for prob, pmap in build_problems(graph, hw):
        tt = list_schedule(prob)
        if isinstance(tt, Stuck):
            continue
        ours = semi_active(prob, tt.starts, tt.offsets)
        assert all(a <= b for a, b in zip(ours, tt.starts, strict=True))
        # the same timetable through the reference functions, on the graph's names
        live = live_ranges(prob, tt.starts)
        local_item = {g: k for k, g in enumerate(pmap.items)}
        placements = []
        for g, it in enumerate(graph.items):
            k = local_item.get(g)
            if k is None:
                continue
            core = pmap.cores[prob.spaces[prob.items[k].space].core]
            placements.append(Placement(it.name, core, it.space, tt.offsets[k], it.bytes, *live[k]))
        order = {}
        for li in sorted(range(prob.n), key=lambda i: (tt.starts[i], i)):
            op = graph.ops[pmap.ops[li]]
            order.setdefault((op.core, op.unit), []).append(op.id)
        inside = {graph.ops[g].id for g in pmap.ops}
        edges = [e for e in (*graph.edges, *deps.address_edges(graph, placements)) if e.src in inside]
        ref = semi_active_starts(graph, hw, order, edges)
        assert [ref[graph.ops[g].id] for g in pmap.ops] == ours
