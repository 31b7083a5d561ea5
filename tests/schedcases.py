"""Small schedules and instances several test modules build on: hand-timed schedules of
tiny hardware (the double buffer of ``examples/double_buffer.json``), the classic job shops,
and random solver instances with memory (a Hypothesis strategy)."""

from __future__ import annotations

from common import EXAMPLES, preset
from hypothesis import strategies as st
from oracles import semi_active_starts

from benchmarks.synthetic import job_shop
from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph, load_opgraph
from staticsched.model.schedule import OpTime, Placement, Schedule


def make_schedule(graph: OpGraph, hw: Hardware, starts: dict[str, int], offsets=None, status="heuristic"):
    """A Schedule with the given op starts; items live from first access start to last end."""
    offsets = offsets or {}
    ops = [OpTime(op.id, op.core, op.unit, starts[op.id], starts[op.id] + op.duration) for op in graph.ops]
    by_id = {t.id: t for t in ops}
    items = []
    for it in graph.items:
        acc = graph.accesses.get(it.name, [])
        times = [by_id[graph.ops[i].id] for i, _ in acc]
        core = times[0].core if times else 0
        start = min((t.start for t in times), default=0)
        end = max((t.end for t in times), default=0)
        items.append(Placement(it.name, core, it.space, offsets.get(it.name, 0), it.bytes, start, end))
    ms = max((t.end for t in ops), default=0)
    return Schedule(graph, hw, ops, items, (), ms, ms, status, method="test")


def list_schedule(graph: OpGraph, hw: Hardware) -> Schedule:
    """Every pipe runs its ops in graph order, each as early as its edges allow (items take no
    addresses, so there is no address reuse)."""
    graph.check(hw)
    order: dict[tuple[int, str], list[str]] = {}
    for op in graph.ops:
        order.setdefault((op.core, op.unit), []).append(op.id)
    return make_schedule(graph, hw, semi_active_starts(graph, hw, order, graph.edges))


def double_buffer_schedule() -> Schedule:
    """The seed's double-buffering instance on its two-slot L1, timed by hand.

    Ten tiles, load 60, compute 100, tile i in slot i % 2. Loads 0 and 1 run back to back
    (0, 60); load i >= 2 reuses the slot of tile i-2 and waits for mm(i-2) to finish, at
    60 + 100 (i-1) ... i.e. mm(i-2) ends at 160 + 100 (i-2). mm i starts when load i and
    mm i-1 are done: 60 + 100 i. Makespan 60 + 100 * 10 = 1060 (the seed's figure).
    """
    graph = load_opgraph(EXAMPLES / "double_buffer.json")
    hw = preset("double-buffer-demo")
    starts = {}
    for i in range(10):
        starts[f"load{i}"] = 60 * i if i < 2 else 160 + 100 * (i - 2)
        starts[f"mm{i}"] = 60 + 100 * i
    offsets = {f"t{i}": (i % 2) * 32768 for i in range(10)}
    return make_schedule(graph, hw, starts, offsets, status="optimal")


def tiny_hw(units=("A", "B"), event_ids=8, latency=0, cross_ids=16, cores=2, l1_slots=0) -> Hardware:
    """A tiny chip; with ``l1_slots`` it has an L1 of that many 64-byte slots."""
    spaces = [Space("GM", 0)] + ([Space("L1", 64 * l1_slots, 32)] if l1_slots else [])
    return Hardware(
        name="tiny",
        cores=cores,
        units=[Unit(u) for u in units],
        spaces=spaces,
        sync=SyncModel(event_ids, latency, cross_ids, latency),
    )


# --------------------------------------------------------------------------- independent checks


FT06 = """
2 1 0 3 1 6 3 7 5 3 4 6
1 8 2 5 4 10 5 10 0 10 3 4
2 5 3 4 5 8 0 9 1 1 4 7
1 5 0 5 2 5 3 3 4 8 5 9
2 9 1 3 4 5 5 4 0 3 3 1
1 3 3 3 5 9 0 10 4 4 2 1
"""

# Lawrence (1984) 10x5 "la01", optimum 666
LA01 = """
1 21 0 53 4 95 3 55 2 34
0 21 3 52 4 16 2 26 1 71
3 39 4 98 1 42 2 31 0 12
1 77 0 55 4 79 2 66 3 77
0 83 3 34 2 64 1 19 4 37
1 54 2 43 4 79 0 92 3 62
3 69 4 77 1 87 2 87 0 93
2 38 0 60 1 41 3 24 4 83
3 17 1 49 4 25 0 44 2 98
4 77 3 79 2 43 1 75 0 96
"""


def jobshop(text: str) -> tuple[OpGraph, Hardware]:
    rows = [[int(x) for x in line.split()] for line in text.strip().splitlines()]
    return job_shop([list(zip(row[::2], row[1::2], strict=True)) for row in rows])


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
