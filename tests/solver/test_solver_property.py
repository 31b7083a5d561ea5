"""Properties of the solver over random graphs and hardware.

Graphs are DAGs by construction: op ``i`` reads only items written by earlier ops of its core
and depends only on earlier ops, so every edge goes from a lower to a higher index. Each
bounded space's capacity lies between what the sequential program needs at once ("one slot")
and plenty; event ids 1-8, flag latency 0-10.

Fast by default (small graphs, few examples). For a long exploration run::

    HYPOTHESIS_PROFILE=thorough pytest tests/solver/test_solver_property.py

which multiplies the number of examples by 50 (the convention of ``tests/strategies.py``).
"""

from __future__ import annotations

from common import THOROUGH, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from staticsched.errors import InfeasibleError
from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.solver import solve

PROOF = "CP-SAT proves that no schedule satisfies these constraints"


ALIGN = {"A": 32, "B": 64}


def _footprint(nbytes: int, space: str) -> int:
    return -(-nbytes // ALIGN[space]) * ALIGN[space]


def sequential_need(graph: OpGraph, space: str, core: int) -> int:
    """Largest aligned footprint live at once when the ops run one by one in list order."""
    need = 0
    ranges = []
    for it in graph.items:
        uses = graph.accesses.get(it.name)
        if it.space == space and uses and graph.ops[uses[0][0]].core == core:
            ranges.append((uses[0][0], uses[-1][0], _footprint(it.bytes, space)))
    for i in range(len(graph.ops)):
        need = max(need, sum(f for a, b, f in ranges if a <= i <= b))
    return need


@st.composite
def instances(draw, max_ops: int = 10, max_cores: int = 2) -> tuple[OpGraph, Hardware]:
    cores = draw(st.integers(1, max_cores))
    units = [f"U{k}" for k in range(draw(st.integers(1, 3)))]
    spaces = ["A", "B"][: draw(st.integers(1, 2))]
    sizes = {}
    for s in spaces:
        base = ALIGN[s] * draw(st.sampled_from([1, 2, 4]))
        mixed = draw(st.booleans())
        sizes[s] = [base, 2 * base, 3 * base] if mixed else [base]
    n = draw(st.integers(2, max_ops))
    ops, items = [], []
    written: dict[int, list[str]] = {c: [] for c in range(cores)}
    for i in range(n):
        core = draw(st.integers(0, cores - 1))
        pool = written[core]
        reads = draw(st.lists(st.sampled_from(pool), max_size=2, unique=True)) if pool else []
        writes = []
        if not pool or draw(st.integers(0, 9)) < 7:
            space = draw(st.sampled_from(spaces))
            name = f"t{len(items)}"
            items.append(Item(name, space, draw(st.sampled_from(sizes[space]))))
            writes.append(name)
            pool.append(name)
        elif reads and draw(st.booleans()):
            writes.append(reads[0])  # read-modify-write
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        ops.append(
            Op(
                f"o{i}",
                draw(st.sampled_from(units)),
                draw(st.integers(1, 20)),
                core,
                [f"o{j}" for j in sorted(deps)],
                reads,
                writes,
            )
        )
    graph = OpGraph(items, ops)
    hw_spaces = [Space("GM", 0)]
    for s in spaces:
        one_slot = max(max(sizes[s]), *(sequential_need(graph, s, c) for c in range(cores)))
        extra = draw(st.sampled_from([0, 0, 1, 4]))
        hw_spaces.append(Space(s, one_slot + extra * max(sizes[s]), ALIGN[s]))
    sync = SyncModel(
        event_ids=draw(st.integers(1, 8)),
        flag_latency=draw(st.integers(0, 10)),
        # a producer may need one cross-core flag per pipe of the other core at once
        cross_core_event_ids=draw(st.integers(len(units), 16)),
        cross_core_latency=draw(st.integers(0, 10)),
    )
    return graph, Hardware("random", cores, [Unit(u) for u in units], hw_spaces, sync)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=not THOROUGH,
)
@given(instances())
def test_schedules_verify_and_cpsat_sits_between_bound_and_list(case):
    graph, hw = case
    graph.check(hw)
    try:
        listed = solve(graph, hw, method="list")
    except InfeasibleError as err:
        # only a proven infeasibility may stop the list scheduler on inputs this small
        assert all(PROOF in line for line in err.problems), err.problems
        return
    best = solve(graph, hw, time_limit=5)
    assert listed.verify() == ()
    assert best.verify() == ()
    assert best.lower_bound <= best.makespan <= listed.makespan
    assert listed.lower_bound == best.lower_bound


@settings(max_examples=examples(15), deadline=None, derandomize=not THOROUGH)
@given(instances(max_ops=8))
def test_same_input_same_schedule(case):
    graph, hw = case
    graph.check(hw)
    try:
        a = solve(graph, hw, time_limit=5)
    except InfeasibleError:
        return
    b = solve(graph, hw, time_limit=5)
    assert (a.ops, a.items, a.makespan, a.status) == (b.ops, b.items, b.makespan, b.status)
