"""Properties of the verifier on random programs, against an independent naive oracle.

Programs are built from a random *trace*: a sequence of micro-ops on random pipes and of
set/wait pairs whose set is appended to the source pipe and whose wait to the destination
pipe at that point of the trace. Executing the trace in order satisfies every wait, so the
programs never deadlock, while ids are reused freely (so reuse-rule violations and races
occur often). The oracle computes happens-before as graph reachability with networkx
(program order plus n-th set -> n-th wait per flag key) and compares every pair of
accesses; the verifier's FastTrack detector must agree with it.
"""

from __future__ import annotations

import itertools

import networkx as nx
from common import SEED
from hypothesis import given, settings
from hypothesis import strategies as st

from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.verify import retime, verify

HW = SEED
UNITS = HW.unit_names  # alphabetical: CUBE FIXPIPE MTE1 MTE2 MTE3 VECTOR
PROPS = settings(max_examples=120, deadline=None)


@st.composite
def traced_programs(draw) -> Program:
    nstreams = draw(st.integers(2, 4))
    units = UNITS[:nstreams]
    items = []
    for k in range(draw(st.integers(1, 4))):
        # L1 offsets overlap sometimes; GM items are distinct by name
        space = draw(st.sampled_from(["L1", "L1", "GM"]))
        offset = draw(st.sampled_from([0, 32, 64])) if space == "L1" else 0
        items.append(ProgItem(f"i{k}", 0, space, offset, draw(st.sampled_from([32, 64])), 0, 0))
    names = [it.name for it in items]
    instrs: dict[str, list[Instr]] = {u: [] for u in units}
    for e in range(draw(st.integers(1, 24))):
        if draw(st.integers(0, 2)) < 2:
            u = draw(st.sampled_from(units))
            reads = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
            writes = draw(st.lists(st.sampled_from(names), max_size=1, unique=True))
            instrs[u].append(
                Instr("op", 0, id=f"o{e}", duration=draw(st.integers(1, 30)), reads=reads, writes=writes)
            )
        else:
            a, b = draw(st.lists(st.sampled_from(units), min_size=2, max_size=2, unique=True))
            event = draw(st.integers(0, 2))
            instrs[a].append(Instr("set_flag", 0, src=a, dst=b, event=event))
            instrs[b].append(Instr("wait_flag", 0, src=a, dst=b, event=event))
    streams = [Stream(0, u, instrs[u]) for u in units if instrs[u]]
    return retime(Program(HW.name, "flags", 0, (), items, streams), HW)


class Oracle:
    """Happens-before by reachability and races by comparing every pair of accesses."""

    def __init__(self, p: Program) -> None:
        self.p = p
        g = nx.DiGraph()
        self.label = {}
        sets: dict[tuple, list] = {}
        waits: dict[tuple, list] = {}
        for st_ in p.streams:
            prev = None
            for i, ins in enumerate(st_.instrs):
                node = (st_.unit, i)
                g.add_node(node)
                self.label[node] = ins.id if not ins.is_sync else f"core0.{st_.unit}#{i}"
                if prev is not None:
                    g.add_edge(prev, node)
                prev = node
                if ins.kind == "set_flag":
                    sets.setdefault((ins.src, ins.dst, ins.event), []).append(node)
                elif ins.kind == "wait_flag":
                    waits.setdefault((ins.src, ins.dst, ins.event), []).append(node)
        for key, ss in sets.items():
            for s, w in zip(ss, waits.get(key, []), strict=False):
                g.add_edge(s, w)
        self.g = g
        self.sets, self.waits = sets, waits
        self.reach = {n: nx.descendants(g, n) for n in g}

    def hb(self, a, b) -> bool:
        return b in self.reach[a]

    def races(self) -> set[frozenset[str]]:
        items = {it.name: it for it in self.p.items}
        acc = []
        for st_ in self.p.streams:
            for i, ins in enumerate(st_.instrs):
                if not ins.is_sync:
                    acc.extend(((st_.unit, i), n, False) for n in ins.reads)
                    acc.extend(((st_.unit, i), n, True) for n in ins.writes)
        out = set()
        for (x, nx_, wx), (y, ny, wy) in itertools.combinations(acc, 2):
            if x[0] == y[0] or not (wx or wy):
                continue
            a, b = items[nx_], items[ny]
            if a.space == "GM" or b.space == "GM":
                overlap = nx_ == ny
            else:
                overlap = a.offset < b.offset + b.bytes and b.offset < a.offset + a.bytes
            if overlap and not self.hb(x, y) and not self.hb(y, x):
                out.add(frozenset((self.label[x], self.label[y])))
        return out

    def reuse_violations(self) -> set[str]:
        out = set()
        for key, ss in self.sets.items():
            ws = self.waits.get(key, [])
            for i in range(1, len(ss)):
                if i - 1 >= len(ws) or not self.hb(ws[i - 1], ss[i]):
                    out.add(self.label[ss[i]])
        return out


@PROPS
@given(traced_programs())
def test_races_agree_with_pairwise_oracle(p):
    report = verify(p, HW)
    found = {frozenset(f.ops) for f in report.by_check("race")}
    expected = Oracle(p).races()
    assert found <= expected
    assert bool(found) == bool(expected)


@PROPS
@given(traced_programs())
def test_reuse_rule_agrees_with_oracle(p):
    report = verify(p, HW)
    found = {f.ops[0] for f in report.findings if f.kind == "reuse_rule"}
    assert found == Oracle(p).reuse_violations()


@PROPS
@given(traced_programs(), st.integers(0, 2**16))
def test_every_double_set_breaks_the_reuse_rule(p, seed):
    # the reuse rule is sufficient: a set that is happens-after the previous wait cannot
    # double-set under any timing, so every dynamic double set names a reuse-rule violator
    report = verify(p, HW, jitter=3, seed=seed)
    violators = {f.ops[0] for f in report.findings if f.kind == "reuse_rule"}
    doubles = {f.ops[0] for f in report.findings if f.kind == "double_set"}
    assert doubles <= violators


@PROPS
@given(traced_programs())
def test_traced_programs_never_deadlock_and_conform(p):
    report = verify(p, HW)
    assert not report.by_check("deadlock")
    assert not report.by_check("conformance")
    assert report.stat["replay_makespan"] == p.makespan


@settings(max_examples=30, deadline=None)
@given(traced_programs(), st.integers(0, 2**16))
def test_same_input_same_report(p, seed):
    a = verify(p, HW, jitter=2, seed=seed)
    b = verify(p, HW, jitter=2, seed=seed)
    assert a.text() == b.text()
    assert a.to_dict() == b.to_dict()
