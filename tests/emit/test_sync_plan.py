"""Sync planning and program building: flag elimination, event ids, credits, nominal timing.

The checks here do not trust the planner's own vector clocks: happens-before is recomputed
as reachability in a networkx graph of the emitted instructions, and flag ids are exercised
by a small binary-flag executor with random durations.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import attrs
import networkx as nx
import pytest
from common import preset
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from oracles import hb_graph, semi_active_starts
from schedcases import double_buffer_schedule, list_schedule, make_schedule, tiny_hw

import staticsched.emit.sync as sync_mod
from staticsched.emit import finalize, plan_sync, plan_timed
from staticsched.emit.sync.groups import plan_by_groups
from staticsched.emit.sync.layout import Layout, dependencies
from staticsched.errors import InfeasibleError, InputError
from staticsched.model.deps import address_edges
from staticsched.model.hardware import Hardware, SyncModel
from staticsched.model.opgraph import Item, Op, OpGraph
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule
from staticsched.solver import solve
from staticsched.verify import verify

# --------------------------------------------------------------------------- schedules by hand


def program_starts(program: Program) -> dict[str, int]:
    """Each micro-op's issue cycle in the program (its nominal replay)."""
    return {i.id: i.cycle for st in program.streams for i in st.instrs if not i.is_sync}


def plan_hb(program: Program, plan) -> tuple[nx.DiGraph, dict[str, tuple[int, int]]]:
    """The happens-before graph (:func:`oracles.hb_graph`) of ``program`` with the plan's own
    set -> wait pairs, and each op's node; the program's instructions must be the plan's slots."""
    op_node: dict[str, tuple[int, int]] = {}
    set_node: dict[int, tuple[int, int]] = {}
    wait_node: dict[int, tuple[int, int]] = {}
    for s, (st_plan, stream) in enumerate(zip(plan.streams, program.streams, strict=True)):
        assert len(st_plan.slots) == len(stream.instrs)
        for k, (what, ref) in enumerate(st_plan.slots):
            if what == "op":
                op_node[ref] = (s, k)
                assert stream.instrs[k].id == ref
            elif what == "set":
                set_node[ref] = (s, k)
                assert stream.instrs[k].kind.startswith("set_")
            else:
                wait_node[ref] = (s, k)
                assert stream.instrs[k].kind.startswith("wait_")
    assert sorted(set_node) == sorted(wait_node) == [f.index for f in plan.flags]
    g = hb_graph(program, [(set_node[f.index], wait_node[f.index]) for f in plan.flags])
    g.graph["set"], g.graph["wait"] = set_node, wait_node
    return g, op_node


def check_plan(schedule: Schedule, program: Program, plan) -> None:
    """Every cross-pipe dependency is implied by program order and the dependency flags alone
    (independent transitive closure over the emitted instructions), every kept dependency flag
    is needed, every id obeys the reuse rule, the program is acyclic and the counts add up."""
    g, op_node = plan_hb(program, plan)
    sets, waits = g.graph["set"], g.graph["wait"]
    assert nx.is_directed_acyclic_graph(g)
    closure = {n: nx.descendants(g, n) for n in g.nodes}
    # without the credits (added for the id budget, not for data)
    bare = g.copy()
    bare.remove_edges_from((sets[f.index], waits[f.index]) for f in plan.flags if f.reason == "credit")
    bare_closure = {n: nx.descendants(bare, n) for n in bare.nodes}
    graph, hw = schedule.graph, schedule.hw
    pipe = {t.id: (t.core, t.unit) for t in schedule.ops}
    bounded = [p for p in schedule.items if p.space and hw.space(p.space).bounded]
    deps = {(e.src, e.dst) for e in (*graph.edges, *address_edges(graph, bounded))}
    cross = {(a, b) for a, b in deps if pipe[a] != pipe[b]}
    assert len(plan.dependencies) == len(cross) == plan.stats.dependencies
    for a, b in sorted(deps):
        assert op_node[b] in bare_closure[op_node[a]], f"edge {a} -> {b} is not happens-before"
    if plan.stats.fallback:
        # the baton plan (ids ran short): dependencies are implied through its relays, every
        # flag uses id 0, and minimality is traded for ids on purpose
        assert {f.event for f in plan.flags} <= {0}
        assert plan.stats.relays == sum(1 for f in plan.flags if f.reason == "relay")
        assert plan.stats.flags_eliminated == plan.stats.dependencies - plan.stats.flags_kept
        _check_reuse(g, closure, plan, hw.sync.cross_core_capacity)
        return
    # a kept dependency flag is needed: with every flag taken as producer end -> consumer start
    # and program order op -> next op, its own edge is not implied without it (the planner may
    # later move a SET behind other WAITs, which can only add order)
    order = nx.DiGraph()
    for stream in plan.streams:
        ops = [ref for what, ref in stream.slots if what == "op"]
        order.add_nodes_from(ops)
        order.add_edges_from(itertools.pairwise(ops))
    flagged = [f for f in plan.flags if f.reason != "credit"]
    order.add_edges_from((f.set_op, f.wait_op) for f in flagged)
    for f in flagged:
        order.remove_edge(f.set_op, f.wait_op)
        assert not nx.has_path(order, f.set_op, f.wait_op), f"flag {f} is redundant"
        order.add_edge(f.set_op, f.wait_op)
    _check_reuse(g, closure, plan, hw.sync.cross_core_capacity)
    budget = {"flag": hw.sync.event_ids, "cross": hw.sync.cross_core_event_ids}
    assert all(0 <= f.event < budget[f.kind] for f in plan.flags)
    kept = sum(1 for f in plan.flags if f.reason != "credit")
    assert plan.stats.flags_kept == kept
    assert plan.stats.flags_eliminated == plan.stats.dependencies - kept
    assert plan.stats.credits == len(plan.flags) - kept


def _check_reuse(g: nx.DiGraph, closure: dict, plan, cross_capacity: int = 15) -> None:
    """The reuse rule: the flags on one id have their SETs in one happens-before chain and their
    WAITs in another, and each SET comes after the WAIT of the flag C back on the id (C = 1 for
    a binary intra-core flag, the counter's capacity for a counting cross-core one); for a
    binary flag the earlier WAIT comes before the later one even without the later flag (else
    the later WAIT could take the earlier SET)."""
    sets, waits = g.graph["set"], g.graph["wait"]
    by_id: dict[tuple, list] = {}
    for f in plan.flags:
        by_id.setdefault((f.id_key, f.event), []).append(f)
    for (key, _), flags in by_id.items():
        cap = cross_capacity if key.kind == "cross" else 1
        chain = sorted(flags, key=lambda f: len(closure[sets[f.index]]), reverse=True)
        for a, b in itertools.pairwise(chain):
            assert sets[b.index] in closure[sets[a.index]], f"SETs of {a} and {b} (one id) are not ordered"
            assert waits[b.index] in closure[waits[a.index]], f"WAITs of {a} and {b} (one id) are not ordered"
        for n in range(cap, len(chain)):
            old, new = chain[n - cap], chain[n]
            assert sets[new.index] in closure[waits[old.index]], f"{new} may overflow the id of {old}"
        if cap == 1:
            for a, b in itertools.pairwise(chain):
                g.remove_edge(sets[b.index], waits[b.index])
                assert nx.has_path(g, waits[a.index], waits[b.index]), f"{b} may take the SET of {a}"
                g.add_edge(sets[b.index], waits[b.index])


def run_binary_flags(program: Program, hw: Hardware, seed: int) -> None:
    """Replay with random durations, binary intra-core flags and counting cross-core flags
    keyed by id: no double set, no counter over its capacity, no deadlock, no flag left set.
    Independent of the planner's flag indices."""
    rng = random.Random(seed)
    streams = program.streams
    at = [0] * len(streams)
    time = [0] * len(streams)
    state: dict[tuple, list[int]] = {}  # key -> visible times of the sets not yet waited

    def key(s: int, ins) -> tuple:
        core = streams[s].core
        if ins.kind == "set_flag":
            return ("f", core, ins.src, ins.dst, ins.event)
        if ins.kind == "wait_flag":
            return ("f", core, ins.src, ins.dst, ins.event)
        if ins.kind == "set_cross":
            return ("x", core, ins.peer_core, ins.event)
        return ("x", ins.peer_core, core, ins.event)

    while True:
        best = None
        for s, stream in enumerate(streams):
            if at[s] == len(stream.instrs):
                continue
            ins = stream.instrs[at[s]]
            when = time[s]
            if ins.kind.startswith("wait_"):
                k = key(s, ins)
                if not state.get(k):
                    continue
                when = max(when, state[k][0])
            if best is None or when < best[0]:
                best = (when, s)
        if best is None:
            break
        when, s = best
        ins = streams[s].instrs[at[s]]
        if ins.kind.startswith("set_"):
            k = key(s, ins)
            cap = hw.sync.cross_core_capacity if ins.kind == "set_cross" else 1
            assert len(state.get(k, ())) < cap, f"double set of {k} at cycle {when}"
            latency = hw.sync.cross_core_latency if ins.kind == "set_cross" else hw.sync.flag_latency
            state.setdefault(k, []).append(when + latency)
            state[k].sort()
        elif ins.kind.startswith("wait_"):
            k = key(s, ins)
            state[k].pop(0)
            if not state[k]:
                del state[k]
        else:
            when += max(1, round(ins.duration * rng.uniform(0.5, 3.0)))
        time[s] = when
        at[s] += 1
    stuck = [(x.core, x.unit) for s, x in enumerate(streams) if at[s] < len(x.instrs)]
    assert not stuck, f"deadlock: pipes {stuck} wait forever"
    assert not state, f"flags left set at the end: {sorted(state)}"


# --------------------------------------------------------------------------- the double buffer


def test_the_list_solver_finds_the_hand_timed_double_buffer():
    hand = double_buffer_schedule()
    solved = solve(hand.graph, hand.hw, method="list")
    assert [(t.id, t.start) for t in solved.ops] == [(t.id, t.start) for t in hand.ops]
    slots = {p.item: p.offset for p in solved.items}
    # ping-pong over the two 32 KiB slots
    assert all(slots[f"t{i}"] != slots[f"t{i + 1}"] for i in range(9))


@pytest.mark.parametrize("source", ["list solver", "by hand"])
def test_double_buffer_is_the_hand_written_ping_pong(source):
    schedule = double_buffer_schedule()
    if source == "list solver":
        schedule = solve(schedule.graph, schedule.hw, method="list")
    final, program, plan = finalize(schedule)
    assert final.makespan == 1060
    assert [t.start for t in final.ops] == [t.start for t in schedule.ops]
    raw = [f for f in plan.flags if (f.set_unit, f.wait_unit) == ("DMA", "CUBE")]
    war = [f for f in plan.flags if (f.set_unit, f.wait_unit) == ("CUBE", "DMA")]
    assert len(raw) + len(war) == len(plan.flags)
    # one RAW flag per tile, one WAR flag per slot reuse (tiles 2..9), nothing else
    assert sorted((f.set_op, f.wait_op) for f in raw) == sorted((f"load{i}", f"mm{i}") for i in range(10))
    assert sorted((f.set_op, f.wait_op) for f in war) == sorted(
        (f"mm{i - 2}", f"load{i}") for i in range(2, 10)
    )
    # ping-pong: tile i uses id i % 2 in both directions
    assert {f.set_op: f.event for f in raw} == {f"load{i}": i % 2 for i in range(10)}
    assert {f.wait_op: f.event for f in war} == {f"load{i}": i % 2 for i in range(2, 10)}
    assert dict(plan.stats.ids_used) == {"c0 DMA->CUBE": 2, "c0 CUBE->DMA": 2}
    assert plan.stats.credits == 0
    check_plan(final, program, plan)
    for seed in range(5):
        run_binary_flags(program, final.hw, seed)


def test_double_buffer_stream_text_is_the_expected_loop():
    _, program, _ = finalize(double_buffer_schedule())
    dma = next(s for s in program.streams if s.unit == "DMA")
    words = [(i.kind, i.id or f"{i.src}>{i.dst}#{i.event}") for i in dma.instrs[:8]]
    assert words == [
        ("op", "load0"),
        ("set_flag", "DMA>CUBE#0"),
        ("op", "load1"),
        ("set_flag", "DMA>CUBE#1"),
        ("wait_flag", "CUBE>DMA#0"),
        ("op", "load2"),
        ("set_flag", "DMA>CUBE#0"),
        ("wait_flag", "CUBE>DMA#1"),
    ]
    # the events carry the nominal cycles: mm0 -> load2 fires at 160 and releases load2 at 160
    events = {(e.producer, e.consumer): e for e in finalize(double_buffer_schedule())[0].events}
    assert (events[("mm0", "load2")].set_cycle, events[("mm0", "load2")].wait_cycle) == (160, 160)
    assert (events[("load1", "mm1")].set_cycle, events[("load1", "mm1")].wait_cycle) == (120, 160)


def test_one_id_per_direction_still_double_buffers():
    # With one id per direction the SET after load1 finds id 0 still owned by load0 -> mm0:
    # a credit from mm0's WAIT (cycle 60) frees it at no cost. After that every Cube SET that
    # frees a slot finds its id owned by the previous one and first passes the next tile's
    # WAIT (already due when the Cube op ends), which orders it after the previous slot's
    # load: the same timetable, one id each way, one credit.
    schedule = double_buffer_schedule()
    hw = attrs.evolve(schedule.hw, sync=SyncModel(event_ids=1))
    final, program, plan = finalize(attrs.evolve(schedule, hw=hw))
    assert [t.start for t in final.ops] == [t.start for t in schedule.ops]
    assert plan.stats.credits == 1
    assert dict(plan.stats.ids_used) == {"c0 DMA->CUBE": 1, "c0 CUBE->DMA": 1}
    (credit,) = [f for f in plan.flags if f.reason == "credit"]
    assert (credit.set_op, credit.wait_op, credit.set_unit) == ("mm0", "load1", "CUBE")
    cube = next(s for s in program.streams if s.unit == "CUBE")
    assert [i.kind for i in cube.instrs[3:6]] == ["wait_flag", "set_flag", "op"]
    check_plan(final, program, plan)
    for seed in range(5):
        run_binary_flags(program, hw, seed)


def test_no_ids_at_all_is_infeasible_and_says_why():
    schedule = double_buffer_schedule()
    hw = attrs.evolve(schedule.hw, sync=SyncModel(event_ids=0))
    with pytest.raises(InfeasibleError) as err:
        plan_sync(attrs.evolve(schedule, hw=hw))
    assert str(err.value) == (
        "core 0: pipes DMA->CUBE: no event id for the flag load0 -> mm0 (SET at cycle 60): "
        "the hardware has no event ids for it (budget 0)"
    )


# --------------------------------------------------------------------------- credits


def streaming_graph(n: int = 10) -> OpGraph:
    """Loads into distinct buffers, each consumed once: only RAW flags DMA -> CUBE."""
    ops = []
    for i in range(n):
        ops.append(Op(f"load{i}", "DMA", 60, writes=[f"t{i}"]))
        ops.append(Op(f"mm{i}", "CUBE", 100, reads=[f"t{i}"]))
    return OpGraph([Item(f"t{i}", "L1", 1024) for i in range(n)], ops)


def test_credits_free_the_single_id_and_retime_the_loads():
    hw = attrs.evolve(preset("double-buffer-demo"), sync=SyncModel(event_ids=1))
    graph = streaming_graph()
    offsets = {f"t{i}": 1024 * i for i in range(10)}
    order = {(0, "DMA"): [f"load{i}" for i in range(10)], (0, "CUBE"): [f"mm{i}" for i in range(10)]}
    schedule = make_schedule(graph, hw, semi_active_starts(graph, hw, order, graph.edges), offsets)
    final, program, plan = finalize(schedule)
    # load i >= 1 finds the one DMA->CUBE id still owned by load(i-1) -> mm(i-1); a credit from
    # mm(i-1)'s wait (when mm(i-1) starts, 60 + 100 (i-1)) back to the SET after load i frees it
    assert plan.stats.credits == 9
    credits = [f for f in plan.flags if f.reason == "credit"]
    assert sorted((f.set_op, f.wait_op) for f in credits) == sorted(
        (f"mm{i - 1}", f"load{i}") for i in range(1, 10)
    )
    assert all((f.set_unit, f.wait_unit, f.event) == ("CUBE", "DMA", 0) for f in credits)
    # the credit WAIT after load i blocks the DMA pipe until mm(i-1) starts, so load i+1 starts
    # at max(end of load i, start of mm(i-1)): 0, 60, 120, 180, then 260, 360, ... (mm(i-2));
    # the Cube chain 60 + 100 i is untouched and the makespan stays 1060
    expect = [0, 60, 120, 180] + [60 + 100 * (i - 2) for i in range(4, 10)]
    ran = program_starts(program)
    assert [ran[f"load{i}"] for i in range(10)] == expect
    assert [ran[f"mm{i}"] for i in range(10)] == [60 + 100 * i for i in range(10)]
    assert final.makespan == 1060
    # the schedule keeps the plan; the program runs what the credits make of it
    assert final.ops == schedule.ops and ran["load5"] != schedule.op_time("load5").start
    # the program's items have the replay's live ranges (the schedule's, the plan's)
    t5 = next(p for p in program.items if p.name == "t5")
    assert (t5.live_start, t5.live_end) == (360, 660)
    check_plan(final, program, plan)
    for seed in range(5):
        run_binary_flags(program, hw, seed)


# --------------------------------------------------------------------------- cross-core


def test_cross_core_flags_use_the_core_pair_pool():
    hw = tiny_hw(units=("MTE2", "MTE3"), cores=2)
    # core 0 writes two GM tiles, core 1 reads them: two cross-core RAW flags, one id reused
    graph = OpGraph(
        [Item("g0", "GM", 64), Item("g1", "GM", 64)],
        [
            Op("w0", "MTE3", 10, core=0, writes=["g0"]),
            Op("r0", "MTE2", 10, core=1, reads=["g0"]),
            Op("w1", "MTE3", 10, core=0, writes=["g1"], deps=["r0"]),
            Op("r1", "MTE2", 10, core=1, reads=["g1"]),
        ],
    )
    final, program, plan = finalize(list_schedule(graph, hw))
    assert [(f.kind, f.set_op, f.wait_op, f.event) for f in plan.flags] == [
        ("cross", "w0", "r0", 0),
        ("cross", "r0", "w1", 0),
        ("cross", "w1", "r1", 0),
    ]
    assert plan.stats.cross_core == 3
    assert dict(plan.stats.ids_used) == {"core0->core1": 1, "core1->core0": 1}
    kinds = [(s.core, s.unit, [i.kind for i in s.instrs]) for s in program.streams if s.instrs]
    assert kinds == [
        (0, "MTE3", ["op", "set_cross", "wait_cross", "op", "set_cross"]),
        (1, "MTE2", ["wait_cross", "op", "set_cross", "wait_cross", "op"]),
    ]
    sets = [i for s in program.streams for i in s.instrs if i.kind == "set_cross"]
    assert [i.peer_core for i in sets] == [1, 1, 0]
    check_plan(final, program, plan)
    run_binary_flags(program, hw, 0)


# --------------------------------------------------------------------------- properties


@st.composite
def random_graphs(draw, l1_slots: int = 0):
    """DAGs by construction: deps and item reads only point at earlier ops.

    With ``l1_slots`` items used by one core only go to an L1 of that many 64-byte slots, as
    long as the op list, run in order, never needs more slots at once (so a schedule exists):
    addresses are then reused, which gives address-reuse flags and, at small id budgets,
    credits.
    """
    n = draw(st.integers(1, 14), label="ops")
    cores = draw(st.integers(1, 2), label="cores")
    units = ("A", "B", "C")[: draw(st.integers(2, 3), label="units")]
    ops, written, items = [], [], []
    for i in range(n):
        reads = draw(st.lists(st.sampled_from(written), max_size=2, unique=True)) if written else []
        if written and draw(st.booleans()):
            writes = [draw(st.sampled_from(written))]
        else:
            writes = [f"x{i}"]
            # no space: GM items would all sit at offset 0 and get address-reuse edges
            items.append(Item(f"x{i}", "", 64))
            written.append(f"x{i}")
        deps = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        ops.append(
            Op(
                f"op{i}",
                draw(st.sampled_from(units)),
                draw(st.integers(1, 20)),
                core=draw(st.integers(0, cores - 1)),
                deps=[f"op{d}" for d in deps],
                reads=[r for r in reads if r not in writes],
                writes=writes,
            )
        )
    if l1_slots:
        items = _place_in_l1(items, ops, l1_slots)
    return OpGraph(items, ops), units


def _place_in_l1(items: list[Item], ops: list[Op], slots: int) -> list[Item]:
    """Items of one core into L1 while, per core, the items live at any list position (first to
    last access) fit ``slots``; the rest keep no space."""
    span: dict[str, list[int]] = {}
    cores: dict[str, set[int]] = {}
    for i, op in enumerate(ops):
        for name in (*op.reads, *op.writes):
            span.setdefault(name, [i, i])[1] = i
            cores.setdefault(name, set()).add(op.core)
    taken: dict[int, list[tuple[int, int]]] = {}
    out = []
    for it in items:
        lo, hi = span[it.name]
        (core,) = cores[it.name] if len(cores[it.name]) == 1 else (None,)
        live = taken.setdefault(core, []) if core is not None else []
        if core is not None and all(sum(a <= p <= b for a, b in live) < slots for p in range(lo, hi + 1)):
            live.append((lo, hi))
            out.append(attrs.evolve(it, space="L1"))
        else:
            out.append(it)
    return out


def _plan_or_count(make_schedule, counts: Counter):
    """``finalize(make_schedule())``: it never fails for an id budget of at least one (ids run
    short -> the baton plan), so every plan is checked; counts how many used the baton."""
    counts["plans"] += 1
    done = finalize(make_schedule())
    counts["baton"] += bool(done[2].stats.fallback)
    return done


def _bounded(counts: Counter, what: str, record_stat) -> None:
    line = (
        f"{what}: {counts['plans']} plans, {counts['baton']} with the baton plan (ids ran "
        f"short), {counts['credits']} with credits, {counts['address']} with address-reuse "
        "dependencies"
    )
    record_stat(line)
    assert counts["plans"] > 0


def test_random_plans_are_sound_minimal_and_race_free(record_stat):
    counts: Counter = Counter()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        random_graphs(), st.integers(1, 4), st.integers(1, 3), st.sampled_from([0, 0, 3]), st.integers(0, 99)
    )
    def prop(gu, ids, cross_ids, latency, seed):
        graph, units = gu
        hw = tiny_hw(units=units, event_ids=ids, latency=latency, cross_ids=cross_ids)
        schedule = list_schedule(graph, hw)
        final, program, plan = _plan_or_count(lambda: schedule, counts)
        note(f"{plan.stats}")
        counts["credits"] += plan.stats.credits > 0
        if plan.stats.credits == 0 and not plan.stats.fallback:
            assert final.ops == schedule.ops
        assert final.makespan >= schedule.makespan
        check_plan(final, program, plan)
        run_binary_flags(program, hw, seed)

    prop()
    _bounded(counts, "sync plans of unplaced items", record_stat)


def test_plans_with_address_reuse_are_sound_and_verify_clean(record_stat):
    # items in a small L1 share addresses: the planner must order every reuse (address-reuse
    # flags) and, at small id budgets, add credits; the verifier must find nothing
    counts: Counter = Counter()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.integers(1, 3).flatmap(lambda k: st.tuples(st.just(k), random_graphs(l1_slots=k))),
        # one id per pipe pair is what forces credits (and sometimes the baton plan)
        st.sampled_from([1, 1, 2, 4]),
        st.sampled_from([1, 2, 3, 16]),
        st.sampled_from([0, 0, 3]),
        st.integers(0, 99),
    )
    def prop(kgu, ids, cross_ids, latency, seed):
        slots, (graph, units) = kgu
        hw = tiny_hw(units=units, event_ids=ids, latency=latency, cross_ids=cross_ids, l1_slots=slots)
        final, program, plan = _plan_or_count(lambda: solve(graph, hw, method="list"), counts)
        note(f"{plan.stats}")
        placed = [p for p in final.items if p.space == "L1"]
        counts["address"] += bool(address_edges(graph, placed))
        counts["credits"] += plan.stats.credits > 0
        check_plan(final, program, plan)
        run_binary_flags(program, hw, seed)
        report = verify(program, hw, jitter=2, seed=seed)
        assert report.ok, report.text()

    prop()
    _bounded(counts, "sync plans of items in a small L1", record_stat)
    # the generator must exercise address reuse; whether a given seed's examples need credits
    # varies, so credits are pinned by the deterministic tests below, not asserted here
    assert counts["address"] > 0, counts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.integers(0, 99))
def test_list_solver_schedules_plan_cleanly_with_realistic_budgets(gu, seed):
    # the solver keeps flag lifetimes within the budget; with Ascend-like budgets (8 per pipe
    # pair, 16 per core pair) every plan must succeed, and without credits reproduce it exactly
    graph, units = gu
    hw = tiny_hw(units=units, event_ids=8, cross_ids=16)
    schedule = solve(graph, hw, method="list")
    final, program, plan = finalize(schedule)
    if plan.stats.credits == 0 and not plan.stats.fallback:
        assert final.ops == schedule.ops
    check_plan(final, program, plan)
    run_binary_flags(program, hw, seed)


def test_large_budgets_never_fail_and_small_ones_use_credits():
    # the same generator with a budget above the number of dependencies, and with one id per
    # pair: both always succeed, and credits (main plan) and the baton (fallback) both occur
    credits = batons = 0
    for seed in range(40):
        rnd = random.Random(seed)
        n = 12
        ops = []
        for i in range(n):
            deps = [f"op{d}" for d in rnd.sample(range(i), min(i, 2))]
            ops.append(Op(f"op{i}", rnd.choice("AB"), rnd.randint(1, 9), core=rnd.randint(0, 1), deps=deps))
        graph = OpGraph([], ops)
        big = finalize(list_schedule(graph, tiny_hw(event_ids=64, cross_ids=64)))
        check_plan(*big)
        small = finalize(list_schedule(graph, tiny_hw(event_ids=1, cross_ids=1)))
        check_plan(*small)
        credits += small[2].stats.credits
        batons += bool(small[2].stats.fallback)
    assert credits > 0 and batons > 0


def _copies(graph: OpGraph, copies: int, other: OpGraph | None) -> OpGraph:
    """``graph`` repeated on ``copies`` disjoint core sets (names suffixed, cores shifted by 2
    per copy), then ``other`` on the next cores: several groups of cores, some of one shape."""
    parts = [(graph, k) for k in range(copies)] + ([(other, copies)] if other is not None else [])
    items, ops = [], []
    for g, k in parts:
        def rn(name: str, k: int = k) -> str:
            return f"{name}_{k}"
        items += [attrs.evolve(it, name=rn(it.name)) for it in g.items]
        ops += [attrs.evolve(op, id=rn(op.id), core=op.core + 2 * k, deps=[rn(d) for d in op.deps],
                             reads=[rn(r) for r in op.reads], writes=[rn(w) for w in op.writes])
                for op in g.ops]
    return OpGraph(items, ops)


def test_planning_once_per_group_of_cores_is_the_whole_plan(record_stat, monkeypatch):
    # plan_sync plans each group of cores that no cross-core dependency connects once per
    # shape (emit/sync/groups.py); its plan must be exactly the whole-schedule planner's
    counts: Counter = Counter()

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(random_graphs(), st.integers(1, 3), st.one_of(st.none(), random_graphs()),
           st.integers(1, 4), st.integers(1, 3))
    def prop(gu, copies, other, ids, cross_ids):
        graph = _copies(gu[0], copies, other[0] if other is not None else None)
        hw = tiny_hw(units=("A", "B", "C"), event_ids=ids, cross_ids=cross_ids,
                     cores=max(op.core for op in graph.ops) + 1)
        schedule = list_schedule(graph, hw)
        grouped = sync_mod.plan_sync(schedule)
        with monkeypatch.context() as m:
            m.setattr(sync_mod, "plan_by_groups", lambda *a, **k: None)
            whole = sync_mod.plan_sync(schedule)
        assert grouped == whole
        lay = Layout.of(schedule)
        counts["plans"] += 1
        counts["by groups"] += plan_by_groups(hw.sync, lay, dependencies(schedule, lay)) is not None

    prop()
    record_stat(f"sync plans by groups of cores: {counts['plans']} plans, {counts['by groups']} "
                "planned once per group shape")
    assert counts["by groups"] > 0, counts


# --------------------------------------------------------------------------- errors and modes


def test_a_timetable_that_violates_an_edge_is_refused():
    schedule = double_buffer_schedule()
    ops = list(schedule.ops)
    ops[1] = attrs.evolve(ops[1], start=30, end=130)  # mm0 before load0 has finished
    with pytest.raises(InfeasibleError) as err:
        plan_sync(attrs.evolve(schedule, ops=ops))
    assert "load0 -> mm0" in str(err.value) and "ends at cycle 60 after mm0 starts at cycle 30" in str(
        err.value
    )


def test_a_timetable_with_idle_slack_is_retimed_to_the_program():
    schedule = double_buffer_schedule()
    ops = [attrs.evolve(t, start=t.start + 5, end=t.end + 5) if t.id == "mm9" else t for t in schedule.ops]
    final, program, _ = finalize(attrs.evolve(schedule, ops=ops, makespan=1065))
    # the executor issues mm9 as soon as its pipe and flag allow: the program and the reported
    # makespan say so, the plan stays as given
    assert program_starts(program)["mm9"] == 960 and final.makespan == 1060
    assert final.op_time("mm9").start == 965 and final.planned_makespan == 1065
    assert dict(final.stats)["retimed_ops"] == 1
    assert program.makespan == 1060


def test_schedule_not_covering_the_graph_is_an_input_error():
    schedule = double_buffer_schedule()
    with pytest.raises(InputError) as err:
        plan_sync(attrs.evolve(schedule, ops=schedule.ops[:-1]))
    assert "schedule has no timing for op 'mm9'" in str(err.value)


def test_unknown_mode_is_an_input_error():
    with pytest.raises(InputError, match="emission mode 'fast'"):
        finalize(double_buffer_schedule(), mode="fast")


def test_timed_mode_has_no_flags_and_timetable_cycles():
    schedule = double_buffer_schedule()
    final, program, plan = finalize(schedule, mode="timed")
    assert program.mode == "timed" and plan.mode == "timed"
    assert not plan.flags and not final.events
    assert all(not i.is_sync for s in program.streams for i in s.instrs)
    cycles = {i.id: i.cycle for s in program.streams for i in s.instrs}
    assert cycles == {t.id: t.start for t in schedule.ops}
    assert plan.stats.dependencies == plan_sync(schedule).stats.dependencies
    assert plan.stats.flags_kept == 0 and plan.stats.flags_eliminated == plan.stats.dependencies
    assert plan_timed(schedule) == plan


def test_flag_latency_is_carried_by_the_kept_flags():
    # with latency 3 a semi-active schedule puts every cross-pipe edge 3 cycles apart; the
    # replay must reproduce it exactly, including edges dropped as implied
    hw = tiny_hw(units=("A", "B"), latency=3, cores=1)
    graph = OpGraph(
        [],
        [
            Op("a0", "A", 5),
            Op("b0", "B", 4, deps=["a0"]),
            Op("a1", "A", 5, deps=["b0"]),
            Op("b1", "B", 4, deps=["a0", "a1"]),
        ],
    )
    final, _, plan = finalize(list_schedule(graph, hw))
    # a0 [0,5) -> b0 [8,12) -> a1 [15,20) -> b1 [23,27); a0 -> b1 is implied
    assert [(t.start, t.end) for t in final.ops] == [(0, 5), (8, 12), (15, 20), (23, 27)]
    assert plan.stats.dependencies == 4 and plan.stats.flags_kept == 3
    assert [(e.set_cycle, e.wait_cycle) for e in final.events] == [(5, 8), (12, 15), (20, 23)]


def test_planning_is_deterministic():
    a = finalize(double_buffer_schedule())
    b = finalize(double_buffer_schedule())
    assert a[1] == b[1] and a[2] == b[2] and a[0].events == b[0].events


def test_no_flag_is_left_set_in_any_example_stream():
    # every SET slot has exactly one WAIT slot and vice versa, per flag
    _, program, plan = finalize(double_buffer_schedule())
    slots = Counter((what, ref) for s in plan.streams for what, ref in s.slots if what != "op")
    assert all(slots[("set", f.index)] == 1 and slots[("wait", f.index)] == 1 for f in plan.flags)
    kinds = Counter(i.kind for s in program.streams for i in s.instrs if i.is_sync)
    assert kinds["set_flag"] == kinds["wait_flag"] == len(plan.flags)
