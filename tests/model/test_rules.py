"""The rules the package defines once (docs/design.md, "One definition per rule"), each tested
through that one definition: an edge's latency, an item's tail accesses, the address-reuse
rule, padding, Kahn's order, longest paths, union-find, an op's JSON operands and pool keys."""

from __future__ import annotations

import random

import pytest

from staticsched.model.deps import first_write, reuse_predecessors, tail_accesses
from staticsched.model.graphs import DisjointSets, longest_starts, longest_tails, topological_order
from staticsched.model.hardware import SyncModel, round_up
from staticsched.model.opgraph import operands_to_json
from staticsched.model.pools import PoolKey


def test_edge_latency_same_pipe_cross_pipe_cross_core():
    sync = SyncModel(flag_latency=3, cross_core_latency=7)
    assert sync.latency((0, "CUBE"), (0, "CUBE")) == 0
    assert sync.latency((0, "MTE2"), (0, "CUBE")) == 3
    assert sync.latency((0, "CUBE"), (1, "CUBE")) == 7
    assert sync.latency((1, "MTE2"), (0, "CUBE")) == 7


def test_tail_accesses_are_the_last_write_and_the_reads_after_it():
    # w0 r1 r2 w3 r4 r5, and op 6 reads and writes (a read-modify-write)
    acc = [(0, "w"), (1, "r"), (2, "r"), (3, "w"), (5, "r"), (4, "r"), (6, "r"), (6, "w")]
    assert first_write(acc) == 0
    assert tail_accesses(acc) == (6, [])
    assert tail_accesses(acc[:6]) == (3, [4, 5])
    assert tail_accesses([(2, "r")]) == (None, [2])
    assert first_write([(2, "r")]) is None


def test_reuse_predecessors_are_the_latest_occupants_of_each_byte():
    # a [0, 8), b [8, 16), then c [4, 12) over both, then d [0, 16) over a's rest and c
    assert reuse_predecessors([(0, 8), (8, 16), (4, 12), (0, 16)]) == [set(), set(), {0, 1}, {0, 1, 2}]
    # an occupant hidden behind a later one on all its bytes is no predecessor any more
    assert reuse_predecessors([(0, 8), (0, 8), (0, 8)]) == [set(), {0}, {1}]


@pytest.mark.parametrize("seed", range(20))
def test_reuse_predecessors_match_a_byte_by_byte_walk(seed):
    rng = random.Random(seed)
    spans = []
    for _ in range(12):
        lo = rng.randrange(0, 60)
        spans.append((lo, lo + rng.randrange(1, 20)))
    owner: dict[int, int] = {}
    want = []
    for k, (lo, hi) in enumerate(spans):
        want.append({owner[b] for b in range(lo, hi) if b in owner})
        owner.update(dict.fromkeys(range(lo, hi), k))
    assert reuse_predecessors(spans) == want


def test_round_up():
    assert [round_up(x, 16) for x in (0, 1, 16, 17, 32)] == [0, 16, 16, 32, 32]


def test_topological_order_with_and_without_a_key():
    succ = [[2], [2], [3], []]
    assert topological_order(succ, key=[0, 1, 2, 3]) == [0, 1, 2, 3]
    assert topological_order(succ, key=[1, 0, 2, 3]) == [1, 0, 2, 3]
    any_order = topological_order(succ)
    assert sorted(any_order) == [0, 1, 2, 3] and any_order.index(2) < any_order.index(3)
    # a cycle leaves its nodes, and those behind it, out
    assert topological_order([[1], [0], [0]]) == [2]


def test_longest_paths():
    dur = [2, 3, 4]
    edges = [(0, 2, 1), (1, 2, 0)]
    assert longest_starts(dur, edges) == [0, 0, 3]
    assert longest_tails(dur, edges) == [7, 7, 4]
    assert longest_starts(dur, [(0, 1, 0), (1, 0, 0)]) is None


def test_disjoint_sets_are_named_by_their_smallest_member():
    sets = DisjointSets([5, 3, 9, 1])
    sets.union(9, 3)
    sets.union(5, 9)
    assert sets.find(5) == 3 and sets.find(1) == 1
    assert sets.groups() == [(1,), (3, 5, 9)]
    assert 9 in sets and 4 not in sets


def test_operands_to_json_writes_only_what_an_op_has():
    types = {"m": "int", "init": "bool"}
    out = operands_to_json({"id": "x"}, ("a", "b"), ("c",), (("m", 16), ("init", False)), types)
    assert out == {"id": "x", "reads": ["a", "b"], "writes": ["c"], "attrs": {"m": 16, "init": False}}
    assert list(out) == ["id", "reads", "writes", "attrs"]
    assert operands_to_json({}, (), (), (), {}) == {}


def test_pool_keys():
    sync = SyncModel(event_ids=4, cross_core_event_ids=2)
    flag, cross = PoolKey.flag(0, "MTE2", "CUBE"), PoolKey.cross(0, 1)
    assert flag.reverse() == PoolKey.flag(0, "CUBE", "MTE2") and cross.reverse() == PoolKey.cross(1, 0)
    assert (flag.budget(sync), cross.budget(sync)) == (4, 2)
    assert sorted([flag, cross]) == [cross, flag]

