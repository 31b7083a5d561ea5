"""Hand-built programs with correct flags, for examples, tests and benchmarks.

They are written the way an emitter would write them (streams in the
hardware's unit order, one flag per cross-pipe dependency, credit flags for
buffer reuse, ids alternating per buffer slot) and then timed by
:func:`staticsched.verify.replay.retime`, so they verify clean. Mutating them
(see ``tests/mutations.py``) gives programs with known bugs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from staticsched.errors import InputError
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import Tensor
from staticsched.model.opkinds import KINDS, ItemShape
from staticsched.model.program import Instr, ProgItem, Program, Stream
from staticsched.verify.replay import retime


class _Builder:
    """Collects per-(core, unit) instruction lists and items, then makes a timed Program."""

    def __init__(self, hw: Hardware) -> None:
        self.hw = hw
        self.streams: dict[tuple[int, str], list[Instr]] = {}
        self.items: list[ProgItem] = []

    def emit(self, core: int, unit: str, ins: Instr) -> None:
        self.streams.setdefault((core, unit), []).append(ins)

    def op(self, core: int, unit: str, op_id: str, duration: int, **kw) -> None:
        self.emit(core, unit, Instr(kind=kw.pop("kind", "op"), cycle=0, id=op_id, duration=duration, **kw))

    def set(self, core: int, src: str, dst: str, event: int) -> None:
        self.emit(core, src, Instr(kind="set_flag", cycle=0, src=src, dst=dst, event=event))

    def wait(self, core: int, src: str, dst: str, event: int) -> None:
        self.emit(core, dst, Instr(kind="wait_flag", cycle=0, src=src, dst=dst, event=event))

    def item(self, name: str, core: int, space: str, offset: int, nbytes: int, dtype="", shape=()) -> None:
        self.items.append(ProgItem(name, core, space, offset, nbytes, 0, 0, dtype, shape))

    def program(self, tensors: Sequence[Tensor] = (), source: str = "") -> Program:
        order = {u: i for i, u in enumerate(self.hw.unit_names)}
        keys = sorted(self.streams, key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))
        streams = [Stream(c, u, self.streams[(c, u)]) for c, u in keys]
        prog = Program(self.hw.name, "flags", 0, tensors, self.items, streams, source)
        return retime(prog, self.hw)


def pingpong_program(
    hw: Hardware | str = "double-buffer-demo",
    *,
    tiles: int = 10,
    load: int = 60,
    compute: int = 100,
    slots: int = 2,
    tile_bytes: int = 32768,
    loader: str = "DMA",
    computer: str = "CUBE",
    space: str = "L1",
) -> Program:
    """The seed's double-buffering micro-instance: ``loader`` fills ``slots`` buffers of
    ``space`` that ``computer`` consumes (opaque ops, no data).

    Tile ``t`` uses slot ``t % slots`` and flag id ``t % slots`` both ways: a "full" flag
    loader->computer after each load and a "free" credit computer->loader after each compute
    whose slot is loaded again. With the defaults the makespan is 60 + 10 * 100 = 1060
    cycles (1600 with one slot).
    """
    hw = load_hardware(hw)
    b = _Builder(hw)
    for t in range(tiles):
        slot = t % slots
        b.item(f"a{t}", 0, space, slot * tile_bytes, tile_bytes)
        if t >= slots:
            b.wait(0, computer, loader, slot)
        b.op(0, loader, f"load{t}", load, writes=(f"a{t}",))
        b.set(0, loader, computer, slot)
    for t in range(tiles):
        slot = t % slots
        b.wait(0, loader, computer, slot)
        b.op(0, computer, f"mm{t}", compute, reads=(f"a{t}",))
        if t + slots < tiles:
            b.set(0, computer, loader, slot)
    return b.program()


def matmul_source(m: int, n: int, k: int, name: str = "mm") -> str:
    """The TaskGraph JSON of ``C[m, n] = A[m, k] @ B[k, n]`` (fp16, fp32 accumulation)."""
    return json.dumps(
        {
            "format": "staticsched.taskgraph",
            "version": 1,
            "tensors": {
                "A": {"shape": [m, k], "dtype": "float16"},
                "B": {"shape": [k, n], "dtype": "float16"},
                "C": {"shape": [m, n], "dtype": "float16"},
            },
            "tasks": [{"id": name, "type": "matmul", "a": "A", "b": "B", "out": "C"}],
        },
        sort_keys=True,
    )


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def matmul_program(
    hw: Hardware | str = "seed-davinci",
    m: int = 64,
    n: int = 64,
    k: int = 64,
    *,
    base: tuple[int, int, int] = (32, 32, 32),
    cores: int = 1,
    only_cores: Sequence[int] | None = None,
) -> Program:
    """A double-buffered GEMM ``C = A @ B`` in the seed's pipe structure, with its source.

    Output tiles ``base_m x base_n`` are dealt round-robin to ``cores``; per core, step ``q``
    of the flattened (tile, K-step) loop loads A/B tiles GM->L1 (MTE2), moves them to
    L0A/L0B (MTE1) and runs MMAD into the tile's L0C accumulator (CUBE); each finished tile
    goes L0C->UB (FIXPIPE, fp32->fp16) and UB->GM (MTE3). Every buffer has two slots; a
    "full" flag follows each producer and a "free" credit each last reader whose slot is
    reused, with flag id = slot. Tail tiles use the top-left corner of full-size buffers; every
    op states its real extent.
    ``only_cores`` keeps just those cores' streams (e.g. one core of a 16-core GEMM).
    """
    hw = load_hardware(hw)
    bm, bn, bk = base
    for space in ("L1", "L0A", "L0B", "L0C", "UB"):
        if not hw.has_space(space):
            raise InputError(f"matmul_program: hardware '{hw.name}' has no space {space}")
    shapes = {
        "la": ItemShape("L1", bm * bk * 2, "float16", (bm, bk)),
        "lb": ItemShape("L1", bk * bn * 2, "float16", (bk, bn)),
        "a": ItemShape("L0A", bm * bk * 2, "float16", (bm, bk)),
        "b": ItemShape("L0B", bk * bn * 2, "float16", (bk, bn)),
        "c": ItemShape("L0C", bm * bn * 4, "float32", (bm, bn)),
        "u": ItemShape("UB", bm * bn * 2, "float16", (bm, bn)),
    }
    mte2 = KINDS["load"].unit(hw, {}, (), (shapes["la"],))
    mte1 = KINDS["move"].unit(hw, {}, (shapes["la"],), (shapes["a"],))
    if KINDS["move"].unit(hw, {}, (shapes["lb"],), (shapes["b"],)) != mte1:
        raise InputError("matmul_program: L1->L0A and L1->L0B must be the same pipe")
    cube = KINDS["mmad"].unit(hw, {}, (shapes["a"], shapes["b"]), (shapes["c"],))
    fix = KINDS["fixpipe"].unit(hw, {}, (shapes["c"],), (shapes["u"],))
    mte3 = KINDS["store"].unit(hw, {}, (shapes["u"],), ())
    slot = {key: _align(sh.bytes, hw.space(sh.space).alignment) for key, sh in shapes.items()}
    l1_pair = slot["la"] + slot["lb"]

    tiles = [(i, j) for i in range(math.ceil(m / bm)) for j in range(math.ceil(n / bn))]
    ksteps = math.ceil(k / bk)
    b = _Builder(hw)
    keep = set(range(cores)) if only_cores is None else set(only_cores)

    def dur(kind: str, attrs: dict, reads: Sequence[str], writes: Sequence[str]) -> int:
        return KINDS[kind].duration(hw, attrs, [shapes[r] for r in reads], [shapes[w] for w in writes])

    for core in sorted(keep):
        mine = tiles[core::cores]
        nq = len(mine) * ksteps
        p = f"c{core}_"
        for bi, (i, j) in enumerate(mine):
            rows = (i * bm, min(m, (i + 1) * bm))
            cols = (j * bn, min(n, (j + 1) * bn))
            c_item, u_item = f"{p}c{bi}", f"{p}u{bi}"
            b.item(c_item, core, "L0C", (bi % 2) * slot["c"], shapes["c"].bytes, "float32", (bm, bn))
            b.item(u_item, core, "UB", (bi % 2) * slot["u"], shapes["u"].bytes, "float16", (bm, bn))
            for kk in range(ksteps):
                q = bi * ksteps + kk
                s = q % 2
                ks = (kk * bk, min(k, (kk + 1) * bk))
                la, lb, a0, b0 = f"{p}la{q}", f"{p}lb{q}", f"{p}a{q}", f"{p}b{q}"
                b.item(la, core, "L1", s * l1_pair, shapes["la"].bytes, "float16", (bm, bk))
                b.item(lb, core, "L1", s * l1_pair + slot["la"], shapes["lb"].bytes, "float16", (bk, bn))
                b.item(a0, core, "L0A", s * slot["a"], shapes["a"].bytes, "float16", (bm, bk))
                b.item(b0, core, "L0B", s * slot["b"], shapes["b"].bytes, "float16", (bk, bn))
                # MTE2: wait for the L1 slot, load both tiles, tell MTE1
                if q >= 2:
                    b.wait(core, mte1, mte2, s)
                for name, tensor, region, item, shape in (
                    ("ldA", "A", (rows, ks), la, "la"),
                    ("ldB", "B", (ks, cols), lb, "lb"),
                ):
                    at = {"tensor": tensor, "region": region, "transpose": False}
                    d = dur("load", at, (), (shape,))
                    b.op(core, mte2, f"{p}{name}{q}", d, kind="load", writes=(item,), attrs=at)
                b.set(core, mte2, mte1, s)
                # MTE1: wait for the data and for the L0 slot, move, free L1, tell CUBE
                b.wait(core, mte2, mte1, s)
                if q >= 2:
                    b.wait(core, cube, mte1, s)
                tm, tn, tk = rows[1] - rows[0], cols[1] - cols[0], ks[1] - ks[0]
                for name, src, dst, extent, shape in (
                    ("mvA", la, a0, (tm, tk), ("la", "a")),
                    ("mvB", lb, b0, (tk, tn), ("lb", "b")),
                ):
                    at = {"rows": extent[0], "cols": extent[1]}
                    d = dur("move", at, shape[:1], shape[1:])
                    b.op(core, mte1, f"{p}{name}{q}", d, kind="move", reads=(src,), writes=(dst,), attrs=at)
                if q + 2 < nq:
                    b.set(core, mte1, mte2, s)
                b.set(core, mte1, cube, s)
                # CUBE: a new accumulator waits for its L0C slot; then the operands
                if kk == 0 and bi >= 2:
                    b.wait(core, fix, cube, bi % 2)
                b.wait(core, mte1, cube, s)
                at = {"m": tm, "n": tn, "k": tk, "init": kk == 0}
                reads = (a0, b0) if kk == 0 else (a0, b0, c_item)
                b.op(
                    core,
                    cube,
                    f"{p}mm{q}",
                    dur("mmad", at, ("a", "b"), ("c",)),
                    kind="mmad",
                    reads=reads,
                    writes=(c_item,),
                    attrs=at,
                )
                if q + 2 < nq:
                    b.set(core, cube, mte1, s)
            b.set(core, cube, fix, bi % 2)
            # FIXPIPE: accumulator -> UB once the UB slot is free; free L0C, tell MTE3
            b.wait(core, cube, fix, bi % 2)
            if bi >= 2:
                b.wait(core, mte3, fix, bi % 2)
            at = {"rows": rows[1] - rows[0], "cols": cols[1] - cols[0]}
            b.op(
                core,
                fix,
                f"{p}fx{bi}",
                dur("fixpipe", at, ("c",), ("u",)),
                kind="fixpipe",
                reads=(c_item,),
                writes=(u_item,),
                attrs=at,
            )
            if bi + 2 < len(mine):
                b.set(core, fix, cube, bi % 2)
            b.set(core, fix, mte3, bi % 2)
            # MTE3: store, free the UB slot
            b.wait(core, fix, mte3, bi % 2)
            at = {"tensor": "C", "region": (rows, cols)}
            b.op(
                core,
                mte3,
                f"{p}st{bi}",
                dur("store", at, ("u",), ()),
                kind="store",
                reads=(u_item,),
                attrs=at,
            )
            if bi + 2 < len(mine):
                b.set(core, mte3, fix, bi % 2)
    tensors = [Tensor("A", (m, k)), Tensor("B", (k, n)), Tensor("C", (m, n))]
    return b.program(tensors, matmul_source(m, n, k))
