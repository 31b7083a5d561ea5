"""The ``attention`` lowering on a split chip (Ascend A2/A3), after CATLASS's A2
FlashAttention (``shared/reference/graphs-and-split-cores.md`` §1.3).

The Cube work of a Q block runs on an AIC, its softmax and output update on the two AIVs of
the AIC's cluster, each taking half of the block's rows (the halves of the padded block, so
that every slot has the same cells; an AIV whose half is past a tail block's rows gets
nothing). Per (Q block, K/V block) pair:

- AIC: ``S = Q Kᵀ`` into the accumulator, FixPipe stores it (fp32) into a slot of the
  ``<task>.ws_s`` ring;
- each AIV: loads its rows of S, runs the online softmax (scale, the additive mask's row
  loaded from GM and added, causal mask, running maximum and sum), casts P to fp16 and
  stores its rows into a slot of ``<task>.ws_p``;
- AIC: loads the whole P (both halves) into L1, moves it to L0A, ``P V`` into the
  accumulator, FixPipe stores it (fp32) into a slot of ``<task>.ws_o``;
- each AIV: loads its rows of ``P V`` and rescales and accumulates its running output; after
  the last pair, O / l in fp16 and its rows stored.

A reused slot is written only after the readers of its previous tile
(:mod:`staticsched.tasks.ring`). Each ring has :data:`STAGES` slots per AIC (CATLASS's default
workspace stages), or more where the plan keeps more tiles in flight: the AIC runs ``S = Q Kᵀ``
:data:`QK_LEAD` pairs ahead of the AIVs' softmax, and the AIVs take in ``P V`` :data:`PV_LAG`
pairs behind their softmax (:meth:`~staticsched.tasks.attention.plan.AttentionPlan.lower`),
so that the S ring needs ``QK_LEAD`` slots and the P V ring ``PV_LAG + 1``. The numbers are
the coupled core's: S and P V in fp32, P in fp16.
"""

from __future__ import annotations

from staticsched.model.hardware import round_up
from staticsched.tasks.attention.qblock import QBlock, accumulate, online_softmax
from staticsched.tasks.builder import FP16, FP32, Builder
from staticsched.tasks.matmul.split import halves
from staticsched.tasks.ring import Ring, Slot, cluster_aivs

#: slots per AIC in each of the S, P and P V rings, at least
STAGES = 2
#: pairs by which the AIC's ``S = Q Kᵀ`` runs ahead of the AIVs' softmax. Each pair is a round
#: trip AIC -> AIV -> AIC -> AIV through the rings (two cross-core latencies, the S, P and P V
#: moves through GM), longer than an AIV's Vector work of a pair: with one pair ahead and
#: ``P V`` taken in before the next P is cast, each AIV's Vector unit waited for every round
#: trip. GPT-2-small's block on ascend-a2, attention on the critical path (no link limit,
#: graph-order list schedule): 58,762 cycles with the old order; 47,370 with lead 2 and lag 2;
#: 43,098 with S loaded one pair ahead as well; 39,474 with lead 3 (lead 4 and lag 3 gain nothing)
QK_LEAD = 3
#: pairs by which the AIVs take in ``P V`` after their softmax (see :data:`QK_LEAD`)
PV_LAG = 2


def half_rows(pq: int, rows: int) -> list[tuple[int, int]]:
    """The AIVs' row ranges of a Q block of ``rows`` rows (``pq`` padded): the halves of the
    padded block, cut at its rows, the empty ones left out."""
    return [(a0, min(a1, rows)) for a0, a1 in halves(pq) if a0 < rows]


class SplitRings:
    """The three workspace rings of one attention task."""

    def __init__(self, plan, em: Builder) -> None:
        task, hw = plan.task, em.hw
        assert hw.cube is not None
        fn = hw.cube.fractal[1]
        self.pq = plan.split_rows
        self.pk = round_up(plan.tiling.block_kv, fn)
        self.pdv = round_up(task.dv, fn)
        aics = hw.engine_cores("cube")
        self.aivs = cluster_aivs(hw)
        self.s = Ring(em, f"{task.id}.ws_s", aics, max(STAGES, QK_LEAD), (self.pq, self.pk), FP32)
        # P goes from the AIVs to the Cube: stored in its fractal format on a chip that prices
        # layouts (each AIV's store writes NZ runs of its half's rows), so the AIC's load of it
        # converts nothing
        self.p = Ring(em, f"{task.id}.ws_p", aics, STAGES, (self.pq, self.pk), FP16,
                      cuts=[a for a, _ in halves(self.pq)],
                      layout="NZ" if hw.cube.models_layouts else "ND")
        self.o = Ring(em, f"{task.id}.ws_o", aics, max(STAGES, PV_LAG + 1), (self.pq, self.pdv), FP32)


class _Half:
    """One AIV's rows ``a0:a1`` of a Q block and its running softmax state."""

    def __init__(self, core: int, p: str, a0: int, a1: int) -> None:
        self.core, self.p, self.a0, self.a1 = core, p, a0, a1
        self.m = self.lsum = self.o = ""
        self.s: dict[int, str] = {}
        self.alpha: dict[int, str] = {}

    @property
    def rows(self) -> int:
        return self.a1 - self.a0


class SplitQBlock(QBlock):
    """The ops of one Q block on an AIC and its cluster's AIVs: the coupled stages, each
    crossing between the two through a ring (the same program order)."""

    def __init__(self, plan, em: Builder, rings: SplitRings, core: int, p: str, h: int,
                 qs: tuple[int, int]) -> None:
        super().__init__(plan, em, core, p, h, qs)
        hw = em.hw
        self.rings, self.pdv = rings, rings.pdv
        cluster = hw.cluster_of(core)
        first = cluster * hw.cluster_size
        cut = half_rows(self.pq, self.rows)
        self.halves = [_Half(v, f"{p}.v{v - first}", a0, a1)
                       for v, (a0, a1) in zip(rings.aivs[cluster], cut, strict=False)]
        self.slot_s: dict[int, Slot] = {}
        self.slot_o: dict[int, Slot] = {}

    def qk(self, j: int, ks: tuple[int, int]) -> None:
        """S = Q Kᵀ on the AIC, stored as fp32 into the S ring."""
        acc_s = self.qk_acc(j, ks)
        slot = self.slot_s[j] = self.rings.s.next(self.core)
        self.em.store(f"{self.p}.j{j}.store_s", self.core, acc_s, self.rings.s.name,
                      ((slot.base, slot.base + self.rows), (0, ks[1] - ks[0])), deps=slot.after)

    def load_s(self, j: int, ks: tuple[int, int]) -> None:
        """Each AIV: its rows of S from the ring (issued a pair ahead of its softmax, so that
        the AIV's MTE2 does not hold it behind the previous pair's ``P V`` load)."""
        em, cols = self.em, ks[1] - ks[0]
        slot = self.slot_s.pop(j)
        loads = []
        for hv in self.halves:
            s = f"{hv.p}.j{j}"
            ub_s = hv.s[j] = em.item(f"{s}.s", "vector", FP32, (hv.rows, self.pk))
            em.load(f"{s}.load_s", hv.core, ub_s, self.rings.s.name,
                    ((slot.base + hv.a0, slot.base + hv.a1), (0, cols)))
            loads.append(f"{s}.load_s")
        self.rings.s.read(slot, loads)

    def softmax(self, j: int, ks: tuple[int, int]) -> None:
        """Each AIV: its rows of S from the ring (unless :meth:`load_s` loaded them), then the
        online softmax."""
        if j in self.slot_s:
            self.load_s(j, ks)
        for hv in self.halves:
            online_softmax(self.em, self.task, hv, hv.core, f"{hv.p}.j{j}", hv.s[j], j, hv.rows, hv.rows,
                           self.qs[0] + hv.a0, ks, self.h, self.pk)

    def pv(self, j: int, ks: tuple[int, int]) -> None:
        """Each AIV casts its rows of P to fp16 and stores them into the P ring; the AIC loads
        the whole P, moves it to L0A and computes ``P V``, stored as fp32 into the O ring."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        cols = k1 - k0
        slot = self.rings.p.next(core)
        for hv in self.halves:
            sv = f"{hv.p}.j{j}"
            ub_p = em.item(f"{sv}.p", "vector", FP16, (hv.rows, self.pk))
            em.vec(f"{sv}.cast", hv.core, "cast", (hv.s.pop(j),), ub_p, (hv.rows, cols))
            em.store(f"{sv}.store_p", hv.core, ub_p, self.rings.p.name,
                     ((slot.base + hv.a0, slot.base + hv.a1), (0, cols)), deps=slot.after)
        l1p = em.item(f"{s}.l1p", "operand", FP16, (self.pq, self.pk))
        l0p = em.item(f"{s}.l0p", "cube_a", FP16, (self.pq, self.pk))
        em.load(f"{s}.load_p", core, l1p, self.rings.p.name, ((slot.base, slot.base + self.rows), (0, cols)))
        self.rings.p.read(slot, [f"{s}.load_p"])
        em.move(f"{s}.move_p0", core, l1p, l0p, self.rows, cols)
        acc = em.item(f"{s}.l0o", "accumulator", FP32, (self.pq, self.pdv))
        em.mmad(f"{s}.pv", core, l0p, self.v.pop(j), acc, self.rows, task.dv, cols, True)
        out = self.slot_o[j] = self.rings.o.next(core)
        em.store(f"{s}.store_o", core, acc, self.rings.o.name,
                 ((out.base, out.base + self.rows), (0, task.dv)), deps=out.after)

    def update(self, j: int) -> None:
        """Each AIV: its rows of ``P V`` from the ring; its running output rescaled and
        accumulated."""
        em, task = self.em, self.task
        slot = self.slot_o.pop(j)
        loads = []
        for hv in self.halves:
            s, core, rows = f"{hv.p}.j{j}", hv.core, hv.rows
            ub_o = em.item(f"{s}.pv", "vector", FP32, (rows, self.pdv))
            em.load(f"{s}.load_o", core, ub_o, self.rings.o.name,
                    ((slot.base + hv.a0, slot.base + hv.a1), (0, task.dv)))
            loads.append(f"{s}.load_o")
            accumulate(em, hv, core, s, ub_o, j, (rows, task.dv))
        self.rings.o.read(slot, loads)

    def finish(self) -> None:
        """Each AIV: O / l as fp16, its rows stored."""
        em, task = self.em, self.task
        q0 = self.qs[0]
        for hv in self.halves:
            out16 = em.item(f"{hv.p}.o", "vector", FP16, (hv.rows, self.pdv))
            em.vec(f"{hv.p}.norm", hv.core, "div_row", (hv.o, hv.lsum), out16, (hv.rows, task.dv))
            r0 = q0 + hv.a0
            em.store(f"{hv.p}.store", hv.core, out16, task.out, task.region("out", self.h, r0, r0 + hv.rows))
