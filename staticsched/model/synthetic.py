"""Synthetic instances for tests and benchmarks (shared/reference/cpsat-at-scale.md §4.4)."""

from __future__ import annotations

import random

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
