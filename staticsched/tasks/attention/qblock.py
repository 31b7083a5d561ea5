"""One Q block of one (batch, head) of the ``attention`` lowering on a coupled core, in the
stages the plan emits in software-pipelined order (:meth:`~staticsched.tasks.attention.plan.
AttentionPlan.lower`); :mod:`.split` overrides the stages that cross between a split chip's
AIC and AIVs."""

from __future__ import annotations

from staticsched.model.hardware import round_up
from staticsched.tasks.builder import FP16, FP32, Builder


class QBlock:
    """The ops of one Q block of one (batch, head), in stages (see the module docstring)."""

    def __init__(
        self, plan, em: Builder, core: int, p: str, h: int, qs: tuple[int, int]
    ) -> None:
        task = plan.task
        assert em.hw.cube is not None  # needs() checked it
        fm, fn, fk = em.hw.cube.fractal
        self.task, self.em, self.core, self.p, self.qs = task, em, core, p, qs
        self.fn = fn
        self.pd, self.pdv = round_up(task.d, fk), round_up(task.dv, fn)
        # every tile has its block's full (padded) size, tails included: tiles of one size never
        # fragment a space, and cube_b holds exactly one K and one V tile
        self.rows, self.pq = qs[1] - qs[0], round_up(plan.tiling.block_q, fm)
        self.pk = round_up(plan.tiling.block_kv, fn)
        #: the (batch, head) matrix: its GM regions are ``task.region(operand, h, ...)``
        self.h = h
        self.m = self.lsum = self.o = self.l0q = ""
        # per K/V block in flight: S, V in cube_b, P V in the accumulator, alpha (not the first)
        self.s: dict[int, str] = {}
        self.v: dict[int, str] = {}
        self.acc: dict[int, str] = {}
        self.alpha: dict[int, str] = {}

    def start(self) -> None:
        """Q: GM -> operand buffer -> cube_a, where it stays for every K/V block."""
        em, task, p = self.em, self.task, self.p
        q0, q1 = self.qs
        l1q = em.item(f"{p}.l1q", "operand", FP16, (self.pq, self.pd))
        self.l0q = em.item(f"{p}.l0q", "cube_a", FP16, (self.pq, self.pd))
        em.load(f"{p}.load_q", self.core, l1q, task.q, task.region("q", self.h, q0, q1))
        em.move(f"{p}.move_q", self.core, l1q, self.l0q, self.rows, task.d)

    def qk(self, j: int, ks: tuple[int, int]) -> None:
        """S = Q Kᵀ on the Cube (K loaded transposed into [d, cols]), drained as fp32."""
        s, cols = f"{self.p}.j{j}", ks[1] - ks[0]
        acc_s = self.qk_acc(j, ks)
        self.s[j] = self.em.item(f"{s}.s", "vector", FP32, (self.pq, self.pk))
        self.em.fixpipe(f"{s}.fix_s", self.core, acc_s, self.s[j], self.rows, cols)

    def qk_acc(self, j: int, ks: tuple[int, int]) -> str:
        """K (transposed into [d, cols]) to the Cube and ``S = Q Kᵀ`` into the accumulator;
        the accumulator item."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        cols, pk = k1 - k0, self.pk
        l1k = em.item(f"{s}.l1k", "operand", FP16, (self.pd, pk))
        l0k = em.item(f"{s}.l0k", "cube_b", FP16, (self.pd, pk))
        acc_s = em.item(f"{s}.l0s", "accumulator", FP32, (self.pq, pk))
        em.load(f"{s}.load_k", core, l1k, task.k, task.region("k", self.h, k0, k1), transpose=True)
        em.move(f"{s}.move_k", core, l1k, l0k, task.d, cols)
        em.mmad(f"{s}.qk", core, self.l0q, l0k, acc_s, self.rows, cols, task.d, True)
        return acc_s

    def load_v(self, j: int, ks: tuple[int, int]) -> None:
        """V: GM -> operand buffer -> cube_b."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        pk = self.pk
        l1v = em.item(f"{s}.l1v", "operand", FP16, (pk, self.pdv))
        self.v[j] = em.item(f"{s}.l0v", "cube_b", FP16, (pk, self.pdv))
        em.load(f"{s}.load_v", core, l1v, task.v, task.region("v", self.h, k0, k1))
        em.move(f"{s}.move_v", core, l1v, self.v[j], k1 - k0, task.dv)

    def softmax(self, j: int, ks: tuple[int, int]) -> None:
        """The online softmax of block j on the Vector unit: scale, additive and causal masks,
        the running maximum and its rescale factor, ``exp(S - m)`` and the running sum."""
        online_softmax(self.em, self.task, self, self.core, f"{self.p}.j{j}", self.s[j], j, self.rows,
                       self.pq, self.qs[0], ks, self.h, self.pk)

    def pv(self, j: int, ks: tuple[int, int]) -> None:
        """P (cast to fp16) to the Cube's input path — vector buffer -> operand buffer ->
        cube_a — and ``P V`` on the Cube."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        k0, k1 = ks
        rows, pq = self.rows, self.pq
        cols, pk = k1 - k0, self.pk
        ub_p = em.item(f"{s}.p", "vector", FP16, (pq, pk))
        em.vec(f"{s}.cast", core, "cast", (self.s.pop(j),), ub_p, (rows, cols))
        l1p = em.item(f"{s}.l1p", "operand", FP16, (pq, pk))
        l0p = em.item(f"{s}.l0p", "cube_a", FP16, (pq, pk))
        em.move(f"{s}.move_p", core, ub_p, l1p, rows, cols)
        em.move(f"{s}.move_p0", core, l1p, l0p, rows, cols)
        self.acc[j] = em.item(f"{s}.l0o", "accumulator", FP32, (pq, self.pdv))
        em.mmad(f"{s}.pv", core, l0p, self.v.pop(j), self.acc[j], rows, task.dv, cols, True)

    def update(self, j: int) -> None:
        """``P V`` drained as fp32; the running output rescaled and accumulated."""
        em, task, core, s = self.em, self.task, self.core, f"{self.p}.j{j}"
        rows = self.rows
        ub_o = em.item(f"{s}.pv", "vector", FP32, (self.pq, self.pdv))
        em.fixpipe(f"{s}.fix_o", core, self.acc.pop(j), ub_o, rows, task.dv)
        accumulate(em, self, core, s, ub_o, j, (rows, task.dv))

    def finish(self) -> None:
        """O / l as fp16, stored."""
        em, task, p = self.em, self.task, self.p
        q0, q1 = self.qs
        out16 = em.item(f"{p}.o", "vector", FP16, (self.pq, self.pdv))
        em.vec(f"{p}.norm", self.core, "div_row", (self.o, self.lsum), out16, (self.rows, task.dv))
        em.store(f"{p}.store", self.core, out16, task.out, task.region("out", self.h, q0, q1))


def online_softmax(em: Builder, task, st, core: int, s: str, ub_s: str, j: int, rows: int, height: int,
                   row0: int, ks: tuple[int, int], h: int, pk: int) -> None:
    """The online softmax of K/V block ``j`` of ``rows`` query rows from ``row0`` of matrix
    ``h`` in ``ub_s`` on ``core``: scale, the additive mask (its row of the block's keys loaded
    into a ``1 x pk`` tile and added by ``bias``), causal mask, the running maximum ``st.m`` and
    its rescale factor ``st.alpha[j]``, ``exp(S - m)`` and the running sum ``st.lsum``
    (``height`` rows each; the sum named after ``st.p``). Ops are named after ``s``."""
    k0, k1 = ks
    cols = k1 - k0
    if task.mask:
        ub_mask = em.item(f"{s}.amask", "vector", FP16, (1, pk))
        em.load(f"{s}.load_amask", core, ub_mask, task.mask, task.mask_region(h, k0, k1))
    em.vec(f"{s}.scale", core, "scale", (ub_s,), ub_s, (rows, cols), scalar=task.softmax_scale)
    if task.mask:
        em.vec(f"{s}.add_amask", core, "bias", (ub_s, ub_mask), ub_s, (rows, cols))
    if task.causal and k1 - 1 > row0:
        em.vec(f"{s}.mask", core, "mask_causal", (ub_s,), ub_s, (rows, cols), row0=row0, col0=k0)
    m_new = em.item(f"{s}.m", "vector", FP32, (height, 1))
    em.vec(f"{s}.rowmax", core, "rowmax", (ub_s, st.m) if st.m else (ub_s,), m_new, (rows, cols))
    if st.m:
        alpha = st.alpha[j] = em.item(f"{s}.alpha", "vector", FP32, (height, 1))
        em.vec(f"{s}.dmax", core, "sub", (st.m, m_new), alpha, (rows, 1))
        em.vec(f"{s}.alpha", core, "exp", (alpha,), alpha, (rows, 1))
        em.vec(f"{s}.rescale_l", core, "mul", (st.lsum, alpha), st.lsum, (rows, 1))
    em.vec(f"{s}.sub", core, "sub_row", (ub_s, m_new), ub_s, (rows, cols))
    em.vec(f"{s}.exp", core, "exp", (ub_s,), ub_s, (rows, cols))
    if not st.m:
        st.lsum = em.item(f"{st.p}.l", "vector", FP32, (height, 1))
    reads = (ub_s, st.lsum) if st.m else (ub_s,)
    em.vec(f"{s}.rowsum", core, "rowsum", reads, st.lsum, (rows, cols))
    st.m = m_new


def accumulate(em: Builder, st, core: int, s: str, ub_o: str, j: int, extent: tuple[int, int]) -> None:
    """The running output ``st.o`` rescaled by ``st.alpha[j]`` and ``P V`` (``ub_o``) added;
    the first block's ``P V`` becomes it."""
    if st.o:
        alpha = st.alpha.pop(j)
        em.vec(f"{s}.rescale_o", core, "mul_row", (st.o, alpha), st.o, extent)
        em.vec(f"{s}.acc_o", core, "add", (st.o, ub_o), st.o, extent)
    else:
        st.o = ub_o
