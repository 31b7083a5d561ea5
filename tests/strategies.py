"""Hypothesis strategies for hardware models, OpGraphs and TaskGraphs.

Graphs are built by construction, never by filtering: DAG edges go from earlier to later ops
(``i < j``), and every OpGraph is memory-feasible in list order (the live bytes of each
core's bounded space, counted in list positions, never exceed its capacity), so a schedule
always exists and the pipeline must find one.
"""

from __future__ import annotations

from common import preset
from hypothesis import strategies as st
from task_strategies import STRATEGIES

from staticsched.frontend.taskgraph import TaskGraph, taskgraph_from_dict
from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.tasks import KINDS

UNIT_POOL = ("MTE2", "MTE1", "CUBE", "VECTOR", "MTE3")
@st.composite
def hardware_models(draw, *, max_cores: int = 3, item_bytes: int = 1024) -> Hardware:
    """Hardware with 2-5 pipes, 1-``max_cores`` cores, an L1 from one slot to plenty,
    event ids 1-8 and flag latency 0-10."""
    n_units = draw(st.integers(2, len(UNIT_POOL)), label="units")
    slots = draw(st.sampled_from([1, 2, 3, 4, 8, 64]), label="L1 slots")
    alignment = draw(st.sampled_from([1, 32, 512]), label="alignment")
    aligned = -(-item_bytes // alignment) * alignment
    flag_latency = draw(st.integers(0, 10), label="flag latency")
    return Hardware(
        name="gen",
        cores=draw(st.integers(1, max_cores), label="cores"),
        units=[Unit(u) for u in UNIT_POOL[:n_units]],
        spaces=[Space("GM", 0, 1), Space("L1", aligned * slots, alignment)],
        sync=SyncModel(
            event_ids=draw(st.integers(1, 8), label="event ids"),
            flag_latency=flag_latency,
            # the hardware's 16 (Ascend): the solver gives every concurrently live cross-core
            # dependency its own id, so tiny budgets make fan-out graphs infeasible by design
            cross_core_event_ids=16,
            cross_core_latency=flag_latency + draw(st.integers(0, 10), label="cross latency"),
        ),
    )


@st.composite
def opgraphs(
    draw,
    hw: Hardware,
    *,
    max_ops: int = 16,
    item_bytes: int = 1024,
    deps: bool = True,
    touch: bool = False,
) -> OpGraph:
    """A DAG of opaque ops on ``hw`` with L1 items (core-local) and GM items (shared).

    Ops may write a new item, overwrite an item (reuse), read items written earlier on the
    same core (L1) or on any core (GM), and carry explicit deps on earlier ops. With ``touch``
    every op reads or writes at least one item.
    """
    n = draw(st.integers(1, max_ops), label="ops")
    units = hw.unit_names
    l1 = hw.space("L1")
    size = -(-item_bytes // l1.alignment) * l1.alignment
    cap_slots = l1.capacity // size
    ops: list[Op] = []
    items: dict[str, Item] = {}
    core_of: dict[str, int] = {}
    # per core: list-position interval [first, last] of each L1 item, to keep live bytes <= cap
    live: dict[str, list[int]] = {}

    def live_count(core: int, pos: int, skip: str = "") -> int:
        return sum(
            1 for name, (a, b) in live.items()
            if name != skip and core_of[name] == core and a <= pos <= b
        )

    for j in range(n):
        core = draw(st.integers(0, hw.cores - 1), label=f"op{j} core")
        unit = draw(st.sampled_from(units), label=f"op{j} unit")
        duration = draw(st.integers(1, 1000), label=f"op{j} duration")
        dep_ix = draw(st.lists(st.integers(0, j - 1), max_size=2), label=f"op{j} deps") if (
            j and deps
        ) else []
        reads: list[str] = []
        for name in draw(st.lists(st.sampled_from(sorted(items)), max_size=2, unique=True),
                         label=f"op{j} reads") if items else []:
            it = items[name]
            if it.space == "L1":
                if core_of[name] != core:
                    continue
                a, b = live[name]
                # extending the item's life to j must keep every position within capacity
                if any(live_count(core, p, skip=name) + 1 > cap_slots for p in range(b, j + 1)):
                    continue
                live[name] = [a, j]
            reads.append(name)
        writes: list[str] = []
        choice = draw(st.sampled_from(["new_l1", "new_gm", "reuse", "none"]), label=f"op{j} write")
        if choice == "new_l1" and live_count(core, j) + 1 <= cap_slots:
            name = f"t{len(items)}"
            items[name] = Item(name, "L1", item_bytes)
            core_of[name] = core
            live[name] = [j, j]
            writes.append(name)
        elif choice == "new_gm":
            name = f"g{len(items)}"
            items[name] = Item(name, "GM", item_bytes)
            core_of[name] = core
            writes.append(name)
        elif choice == "reuse" and reads:
            writes.append(reads[0])  # read-modify-write of an item already live here
        if touch and not reads and not writes:
            # every op touches data, so reordering it is observable (GM takes no capacity)
            name = f"g{len(items)}"
            items[name] = Item(name, "GM", item_bytes)
            core_of[name] = core
            writes.append(name)
        ops.append(
            Op(f"op{j}", unit, duration, core, [f"op{d}" for d in sorted(set(dep_ix))], reads, writes)
        )
    return OpGraph(sorted(items.values(), key=lambda it: it.name), ops)


@st.composite
def taskgraphs(draw, *, first: str | None = None, follow: int = 2) -> TaskGraph:
    """A task of a registered kind (``first``, or drawn; each kind's strategy of
    :mod:`task_strategies` draws random
    shapes with tails, batch dims, ops, explicit tilings), then up to ``follow`` tasks chained
    on the previous output, so consumer blocks depend on producer blocks on other cores. Every
    kind of the registry takes part (with its strategy), so a new kind is covered by the
    end-to-end properties without touching this file."""
    tensors: dict = {}
    tasks: list[dict] = []
    src = None
    for i in range(1 + draw(st.integers(0, follow), label="chained tasks")):
        # a follow-up task reads the previous output: the kinds that can
        pool = tuple(KINDS) if src is None else tuple(n for n in KINDS if STRATEGIES[n].follows)
        name = first if i == 0 and first else draw(st.sampled_from(pool), label=f"kind {i}")
        task = STRATEGIES[name].draw(draw, f"t{i}_", tensors, src)
        tasks.append(task)
        out = task["out"]
        src = (out, tuple(tensors[out]["shape"]))
    return taskgraph_from_dict(
        {"format": "staticsched.taskgraph", "version": 1, "tensors": tensors, "tasks": tasks}
    )


def seed_hw() -> Hardware:
    return preset("seed-davinci")
