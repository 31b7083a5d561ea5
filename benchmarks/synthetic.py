"""Synthetic instances for tests and benchmarks (shared/reference/cpsat-at-scale.md §4.4): tile
pipelines and job shops as OpGraphs."""

from __future__ import annotations

import random
from collections.abc import Sequence

from staticsched.model.hardware import Hardware, Space, SyncModel, Unit
from staticsched.model.opgraph import Item, Op, OpGraph


def tile_pipeline(
    n: int, seed: int = 0, *, slots: int = 2, event_ids: int = 8, flag_latency: int = 0
) -> tuple[OpGraph, Hardware]:
    """Heterogeneous multi-buffered tiles: load (DMA, 30-120 cycles) -> compute (CUBE, 50-150)
    -> store (DMA_OUT, 15-60), with ``slots`` 32 KiB L1 and 16 KiB UB buffers.

    Returns
    -------
    (OpGraph, Hardware)
        Deterministic for a given ``seed``.
    """
    rng = random.Random(seed)
    items, ops = [], []
    for i in range(n):
        items += [Item(f"in{i}", "L1", 32768), Item(f"out{i}", "UB", 16384)]
        ops.append(Op(f"load{i}", "DMA", rng.randint(30, 120), writes=[f"in{i}"]))
        ops.append(Op(f"mm{i}", "CUBE", rng.randint(50, 150), reads=[f"in{i}"], writes=[f"out{i}"]))
        ops.append(Op(f"store{i}", "DMA_OUT", rng.randint(15, 60), reads=[f"out{i}"]))
    hw = Hardware(
        "pipeline",
        1,
        [Unit("DMA"), Unit("CUBE"), Unit("DMA_OUT")],
        [Space("GM", 0), Space("L1", 32768 * slots, 32), Space("UB", 16384 * slots, 32)],
        SyncModel(event_ids=event_ids, flag_latency=flag_latency),
    )
    return OpGraph(items, ops), hw


def job_shop(jobs: Sequence[Sequence[tuple[int, int]]]) -> tuple[OpGraph, Hardware]:
    """A classic job shop as an OpGraph: one core, one unit ``M<k>`` per machine, each job a
    chain of explicit dependencies over its ``(machine, duration)`` operations, no memory, no
    flag latency and an event-id budget too large to matter.

    Returns
    -------
    (OpGraph, Hardware)
        Ops ``j<job>.<step>`` in job order.
    """
    machines = 1 + max(m for job in jobs for m, _ in job)
    ops = []
    for j, job in enumerate(jobs):
        for k, (m, d) in enumerate(job):
            ops.append(Op(f"j{j}.{k}", f"M{m}", d, deps=[f"j{j}.{k - 1}"] if k else []))
    hw = Hardware(
        "jobshop",
        1,
        [Unit(f"M{m}") for m in range(machines)],
        [Space("GM", 0)],
        SyncModel(event_ids=64, flag_latency=0),
    )
    return OpGraph([], ops), hw


def fragmented_pipeline(n: int, seed: int = 0, *, l1: int = 4096, event_ids: int = 8,
                        flag_latency: int = 0) -> tuple[OpGraph, Hardware]:
    """Two loads of mixed sizes (512 to 2,048 B) per compute in an L1 of ``l1`` bytes, some
    computes depending on earlier ones: first-fit placement in allocation order leaves holes
    that the next item does not fit, so the list scheduler gets stuck on memory and, without
    event ids to relax, only CP-SAT's rescue from scratch goes on (``staticsched.solver.rescue``).
    With ``event_ids=1`` and a ``flag_latency`` the event-id pools bind too (the ``flags``
    family).
    """
    rng = random.Random(seed)
    sizes = (512, 1024, 1536, 2048)
    items, ops = [], []
    for i in range(n):
        items += [Item(f"a{i}", "L1", rng.choice(sizes)), Item(f"b{i}", "L1", rng.choice(sizes)),
                  Item(f"o{i}", "UB", 1024)]
        ops.append(Op(f"la{i}", "DMA", rng.randint(5, 50), writes=[f"a{i}"]))
        ops.append(Op(f"lb{i}", "DMA2", rng.randint(5, 50), writes=[f"b{i}"]))
        deps = [f"mm{rng.randrange(i)}"] if i and rng.random() < 0.3 else []
        ops.append(Op(f"mm{i}", "CUBE", rng.randint(20, 80), reads=[f"a{i}", f"b{i}"], writes=[f"o{i}"],
                      deps=deps))
        ops.append(Op(f"st{i}", "OUT", rng.randint(5, 30), reads=[f"o{i}"]))
    hw = Hardware("fragmented", 1, [Unit("DMA"), Unit("DMA2"), Unit("CUBE"), Unit("OUT")],
                  [Space("GM", 0), Space("L1", l1, 32), Space("UB", 2048, 32)],
                  SyncModel(event_ids=event_ids, flag_latency=flag_latency))
    return OpGraph(items, ops), hw
