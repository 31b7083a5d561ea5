"""The ``matmul`` kind's Vector lowering (``"engine": "vector"``, issue 25): ``out =
epilogue(a @ b)`` on the Vector unit alone, for a GEMV or a small-M matmul whose arithmetic
intensity is too low for the Cube (a Cube block pads M to its fractal: 1 row of 16 does useful
work in a GEMV).

Formulation ("broadcast multiply and column sums"): output rows that read the same ``b``
matrix are cut into groups of ``base_m`` rows, ``N`` into blocks of ``base_n`` columns and
``K`` into chunks of ``base_k``; a unit of work is (row group, column block), on one Vector
core (the AIVs on a split chip), balanced like the Cube lowering's blocks. Per K chunk the
unit loads the fp16 tile ``b[k0:k1, n0:n1]`` (``[kc, nb]``; read transposed with
``transpose_b``) into the vector buffer once, and for each of its rows ``m`` the fp16 column
``a[m, k0:k1]`` as a ``[kc, 1]`` row operand (the row of ``a`` loaded transposed: the same
contiguous elements; a column of ``a`` with ``transpose_a``), then

- ``colsum_mul_row(b tile, a column)`` -> ``[1, nb]`` fp32: ``sum_k b[k, n] * a[m, k]``, the
  products exact from fp16, summed in fp32 -- into the row's running sum on the first chunk,
  else into a partial that an fp32 ``add`` folds into the running sum (the op has no running
  operand of its own: the table's running value is a ``row``);

after the last chunk each row's fp32 sum is ``cast`` to fp16 once (what FixPipe does on the
Cube path), the epilogue steps run in place on that ``[1, nb]`` row (a ``col`` operand loaded
once per unit, ``row``/``full`` operands per row) and the row is stored. The NumPy reference
is the Cube path's (:mod:`.reference`): fp32 accumulation, one rounding to fp16, then the
steps; only the order of the fp32 additions differs.

Not lowered here (one line each, when the task is read): a row reduction in the epilogue (its
row panel would have to sit on one core) and an explicit ``tiling`` (the Cube's base sizes,
steps, split-K and workspace stages mean nothing here; the tile is derived).
"""

from __future__ import annotations

import math
from collections import Counter

import attrs

from staticsched.errors import TilingError
from staticsched.model.hardware import Hardware, round_up
from staticsched.model.vecops import VECOPS
from staticsched.tasks.base import TilingInfo, hardware_needs, largest, spans
from staticsched.tasks.builder import FP32, Builder, balance_cores
from staticsched.tasks.matmul.task import ACC_BYTES, MatmulTask, SpanGrid

#: the Vector op of a K chunk: column sums of the b tile times a's column
MAC = "colsum_mul_row"
#: most output rows sharing one b tile (each has its own ops per K chunk)
MAX_ROWS = 16
#: widest column block (wider would only shorten the K chunk of the same tile area)
MAX_COLS = 512

#: the output rows of one row group: (batch element, row m of its matrix) pairs
Rows = tuple[tuple[int, int], ...]


@attrs.frozen
class VectorTiling:
    """The Vector lowering's tile: ``base_m`` output rows share each ``base_k x base_n`` tile
    of ``b`` (a K chunk of a column block); always double buffered."""

    base_m: int
    base_n: int
    base_k: int
    double_buffer: bool = True


def _aligned(nbytes: int, align: int) -> int:
    return round_up(nbytes, max(1, align))


def working_set(task: MatmulTask, rows: int, cols: int, k: int, align: int) -> int:
    """Bytes one unit needs in the vector buffer (one buffer), each tile rounded up to the
    alignment: the ``[k, cols]`` b tile, per row its ``[k, 1]`` column of ``a`` (the operands'
    dtype), its fp32 running sum and (with more than one K chunk) fp32 partial, its output row
    (the output's dtype), and the epilogue's operand tiles (the operands' dtype) and scratch
    (the output's; a column once, row and full operands per row)."""
    e, eo = task.elem_bytes, task.out_bytes
    total = _aligned(k * cols * e, align)
    per_row = (_aligned(k * e, align) + _aligned(cols * ACC_BYTES, align)
               + _aligned(cols * eo, align))
    if k < task.k:
        per_row += _aligned(cols * ACC_BYTES, align)
    for step in task.epilogue:
        vop = VECOPS[step.op]
        for form in vop.operands[1:]:
            if form == "col":
                total += _aligned(cols * e, align)
            else:
                per_row += _aligned((cols if form == "full" else 1) * e, align)
        per_row += vop.scratch * _aligned(cols * eo, align)
    return total + rows * per_row


def row_sets(task: MatmulTask) -> tuple[tuple[int, Rows], ...]:
    """Per ``b`` matrix, in order of first use: its index and the output rows (batch element,
    row) that read it (a 2-D ``b`` serves every batch element: one set of ``batch * M`` rows)."""
    sets: dict[int, list[tuple[int, int]]] = {}
    for bi in range(task.batches):
        sets.setdefault(task.operand_index(task.b_lead, bi), []).extend((bi, m) for m in range(task.m))
    return tuple((b, tuple(rows)) for b, rows in sets.items())


def _vector_space(hw: Hardware) -> tuple[str, int, int]:
    space = hw.role("vector")
    sp = hw.space(space)
    return space, sp.capacity, sp.alignment


def _load_rate(hw: Hardware) -> float:
    """Bytes per cycle a Vector core can count on from global memory: its path's, or its even
    share of a link the path crosses."""
    src, dst = hw.role("global"), hw.role("vector")
    ncores = len(hw.engine_cores("vector"))
    shares = [lk.bytes_per_cycle / ncores for lk in hw.links_of(src, dst)]
    return min([hw.path(src, dst).bytes_per_cycle, *shares])


def chunk_cycles(hw: Hardware, rows: int, cols: int, k: int, elem: int = 2) -> tuple[int, int]:
    """Estimated (load, Vector) cycles of one K chunk of ``k`` for ``rows x cols`` outputs: the b
    tile and ``a``'s columns (``elem`` bytes an element) at :func:`_load_rate` with the path's
    overhead per load; the column sums and the fold of each row's partial into its running sum."""
    vec = hw.vector
    assert vec is not None  # needs() checked it
    path = hw.path(hw.role("global"), hw.role("vector"))
    rate = _load_rate(hw)
    load = (1 + rows) * path.overhead + math.ceil((k * cols + rows * k) * elem / rate)
    sums = rows * (vec.cycles(MAC, k * cols * elem, VECOPS[MAC].passes)
                   + vec.cycles("add", cols * ACC_BYTES, VECOPS["add"].passes))
    return load, sums


def derive_vector_tiling(task: MatmulTask, hw: Hardware) -> VectorTiling:
    """The tile of the Vector lowering, double buffered in the vector buffer.

    ``base_m`` is every row of a ``b`` matrix's set, at most :data:`MAX_ROWS` (each b tile
    serves them all). For each ``base_n`` in whole alignment units up to ``N`` and
    :data:`MAX_COLS`, ``base_k`` is all of K when it fits, else the fewest K chunks that fit,
    made even (``ceil(K / chunks)`` rounded up to the alignment unit). The winner has the
    smallest estimate of its busiest core: ``ceil(units / cores)`` units, each a pipeline of its
    K chunks overlapped as double buffering does (each chunk the larger of its loads and its
    Vector work, :func:`chunk_cycles`, plus the smaller of the first chunk's to fill it); ties go
    to the larger tile, then the wider. (Counting a fill per unit, not per core, favours fewer
    and longer units: the list scheduler leaves bubbles where a unit ends.) Rows are halved
    while not even one alignment unit of columns and of K fits.

    Raises
    ------
    TilingError
        When not even one row, one alignment unit of columns and of K fits, with the bytes.
    """
    space, cap, align = _vector_space(hw)
    granule = max(1, align // task.elem_bytes)
    sets = row_sets(task)
    cores = len(hw.engine_cores("vector"))
    kdim, ndim = task.k, task.n

    def fits(r: int, c: int, k: int) -> bool:
        return cap == 0 or 2 * working_set(task, r, c, k, align) <= cap

    def longest_k(r: int, c: int) -> int:
        """The longest K chunk that fits (all of K, or whole alignment units); 0 if none."""
        if fits(r, c, kdim):
            return kdim
        if kdim <= granule or not fits(r, c, granule):
            return 0
        return largest(1, (kdim - 1) // granule, lambda u: fits(r, c, u * granule)) * granule

    rows = min(max(len(rs) for _, rs in sets), MAX_ROWS)
    top = min(ndim, MAX_COLS)
    widths = [*range(granule, top + 1, granule), *([top] if top % granule else [])]
    while True:
        groups = sum(math.ceil(len(rs) / rows) for _, rs in sets)
        best: tuple[tuple[int, int, int], VectorTiling] | None = None
        for c in widths:
            kmax = longest_k(rows, c)
            if not kmax:
                break  # wider tiles do not fit either
            chunks = math.ceil(kdim / kmax)
            k = kmax if chunks == 1 else min(kmax, round_up(math.ceil(kdim / chunks), granule))
            costs = [chunk_cycles(hw, rows, c, k1 - k0, task.elem_bytes) for k0, k1 in spans(kdim, k)]
            unit = sum(max(x) for x in costs) + min(costs[0])
            key = (math.ceil(groups * math.ceil(ndim / c) / cores) * unit, -k * c, -c)
            if best is None or key < best[0]:
                best = (key, VectorTiling(rows, c, k))
        if best is not None:
            return best[1]
        if rows == 1:
            need = 2 * working_set(task, 1, min(ndim, granule), min(kdim, granule), align)
            raise TilingError(
                f"task '{task.id}': engine 'vector': {space} {cap} B cannot hold the smallest tile "
                f"(1 row, {min(ndim, granule)} columns, {min(kdim, granule)} of K) twice: {need} B with "
                f"the fp32 sums and the epilogue's operands")
        rows = max(1, rows // 2)


@attrs.frozen
class VectorPlan(SpanGrid):
    """How a matmul is cut for the Vector lowering: row groups x column blocks, K chunks."""

    tiling: VectorTiling

    @property
    def groups(self) -> tuple[tuple[int, Rows], ...]:
        """``(b matrix, rows)`` of each row group, in order."""
        size = self.tiling.base_m
        return tuple((b, rows[i:i + size]) for b, rows in row_sets(self.task)
                     for i in range(0, len(rows), size))

    @property
    def blocks(self) -> int:
        """Units of work: row groups x column blocks."""
        return len(self.groups) * len(self.n_spans)

    def _epilogue_loads(self) -> tuple[int, int]:
        """Operand loads of the epilogue: once per unit (columns), once per row (the others)."""
        forms = [VECOPS[s.op].operands[1] for s in self.task.epilogue if s.tensor]
        cols = sum(1 for f in forms if f == "col")
        return cols, len(forms) - cols

    @property
    def op_count(self) -> int:
        """Per unit and K chunk a load of the b tile and per row a load of a's column and the
        column sums (an add from the second chunk on); per unit the column operands' loads; per
        row a cast, the epilogue's ops and per-row operand loads, and a store."""
        chunks = len(self.k_spans)
        col_loads, row_loads = self._epilogue_loads()
        per_row = 2 + len(self.task.epilogue) + row_loads
        ops = 0
        for _, rows in self.groups:
            r = len(rows)
            ops += chunks * (1 + 2 * r) + (chunks - 1) * r + col_loads + r * per_row
        return ops * len(self.n_spans)

    def work(self, hw: Hardware) -> list[int]:
        """Estimated cycles of each unit, in unit order (by which they are balanced over the
        Vector cores): per K chunk the larger of its loads and its Vector work
        (:func:`chunk_cycles`)."""
        out = []
        for _, rows in self.groups:
            for n0, n1 in self.n_spans:
                out.append(sum(max(chunk_cycles(hw, len(rows), n1 - n0, k1 - k0, self.task.elem_bytes))
                               for k0, k1 in self.k_spans))
        return out

    def info(self, hw: Hardware) -> TilingInfo:
        t = self.tiling
        ncores = len(hw.engine_cores("vector"))
        counts = Counter(balance_cores(self.work(hw), ncores))
        per = (min(counts.get(c, 0) for c in range(ncores)), max(counts.values()))
        return TilingInfo(self.task.id, "matmul", (t.base_m, t.base_n, t.base_k), 2, True, self.blocks, per,
                          what="on the Vector engine, base m/n/k")

    def lower(self, em: Builder) -> None:
        """Units in order (row groups, then column blocks), each on its core; a unit's epilogue
        comes after the first K chunk of the next unit on its core in the op list, which is the
        order memory is handed out in: the next b tile then loads while this unit finishes."""
        task = self.task
        em.output(task.out, [(r, r + 1) for r in range(task.batches * task.m)], self.n_spans)
        cores = em.balance(self.work(em.hw), "vector")
        pending: dict[int, tuple] = {}
        u = 0
        for bm, rows in self.groups:
            for ns in self.n_spans:
                p, core = f"{task.id}.b{u}", cores[u]
                u += 1
                acc = [em.item(f"{p}.r{i}.acc", "vector", FP32, (1, ns[1] - ns[0])) for i in range(len(rows))]
                for s, ks in enumerate(self.k_spans):
                    self._chunk(em, p, core, bm, rows, ns, s, ks, acc)
                    if s == 0 and core in pending:
                        self._epilogue(em, *pending.pop(core))
                pending[core] = (p, core, rows, ns, acc)
        for args in pending.values():
            self._epilogue(em, *args)

    def _chunk(self, em: Builder, p: str, core: int, bm: int, rows: Rows, ns: tuple[int, int], s: int,
               ks: tuple[int, int], acc: list[str]) -> None:
        """K chunk ``s`` of a unit: its b tile, and per row a's column and the column sums into
        the running sum (chunk 0) or a partial folded into it."""
        task = self.task
        (n0, n1), (k0, k1) = ns, ks
        q, kc, nb = f"{p}.k{s}", k1 - k0, n1 - n0
        bt = em.item(f"{q}.b", "vector", task.dtype, (kc, nb))
        b0 = bm * (task.n if task.transpose_b else task.k)
        if task.transpose_b:
            em.load(f"{q}.load_b", core, bt, task.b, ((b0 + n0, b0 + n1), (k0, k1)), transpose=True)
        else:
            em.load(f"{q}.load_b", core, bt, task.b, ((b0 + k0, b0 + k1), (n0, n1)))
        a_rows = task.k if task.transpose_a else task.m
        for i, (bi, m) in enumerate(rows):
            a0 = task.operand_index(task.a_lead, bi) * a_rows
            at = em.item(f"{q}.r{i}.a", "vector", task.dtype, (kc, 1))
            if task.transpose_a:  # a column of a [K, M] matrix: already [kc, 1]
                em.load(f"{q}.r{i}.load_a", core, at, task.a, ((a0 + k0, a0 + k1), (m, m + 1)))
            else:  # a row's K chunk, as the [kc, 1] column it is in memory
                em.load(f"{q}.r{i}.load_a", core, at, task.a, ((a0 + m, a0 + m + 1), (k0, k1)),
                        transpose=True)
            if s == 0:
                em.vec(f"{q}.r{i}.mac", core, MAC, (bt, at), acc[i], (kc, nb))
                continue
            part = f"{p}.r{i}.part"
            if s == 1:
                em.item(part, "vector", FP32, (1, nb))
            em.vec(f"{q}.r{i}.mac", core, MAC, (bt, at), part, (kc, nb))
            em.vec(f"{q}.r{i}.add", core, "add", (acc[i], part), acc[i], (1, nb))

    def _epilogue(self, em: Builder, p: str, core: int, rows: Rows, ns: tuple[int, int],
                  acc: list[str]) -> None:
        """Each row's fp32 sum cast to the output's dtype, the epilogue steps in place, the store."""
        task = self.task
        n0, n1 = ns
        nb = n1 - n0
        forms = [VECOPS[s.op].operands[1] if s.tensor else "" for s in task.epilogue]
        cols = {}
        for e, step in enumerate(task.epilogue):
            if forms[e] == "col":
                cols[e] = em.item(f"{p}.e{e}.ub", "vector", task.dtype, (1, nb))
                em.load(f"{p}.e{e}.load", core, cols[e], step.tensor, ((0, 1), (n0, n1)))
        for i, (bi, m) in enumerate(rows):
            q, r = f"{p}.r{i}", bi * task.m + m
            ub = em.item(f"{q}.ub", "vector", task.out_dtype, (1, nb))
            em.vec(f"{q}.cast", core, "cast", (acc[i],), ub, (1, nb))
            for e, step in enumerate(task.epilogue):
                reads = (ub,)
                if e in cols:
                    reads = (ub, cols[e])
                elif forms[e]:
                    shape, region = ((1, 1), ((r, r + 1), (0, 1))) if forms[e] == "row" else \
                        ((1, nb), ((r, r + 1), (n0, n1)))
                    operand = em.item(f"{q}.e{e}.ub", "vector", task.dtype, shape)
                    em.load(f"{q}.e{e}.load", core, operand, step.tensor, region)
                    reads = (ub, operand)
                em.vec(f"{q}.e{e}.{step.op}", core, step.op, reads, ub, (1, nb), scalar=step.value)
            em.store(f"{q}.store", core, ub, task.out, ((r, r + 1), (n0, n1)))


def plan(task: MatmulTask, hw: Hardware) -> VectorPlan:
    if task.tiling is not None:  # the reader refuses one; a tiling set afterwards (tune) is a misfit
        raise TilingError(f"task '{task.id}': engine 'vector' takes no 'tiling'; its tile is derived")
    return VectorPlan(task, derive_vector_tiling(task, hw))


def needs(task: MatmulTask, hw: Hardware) -> list[str]:
    """The vector buffer, its paths from and to global memory, a ``[vector]``: no Cube."""
    return hardware_needs(task.id, hw, roles=("vector",), paths=[("global", "vector"), ("vector", "global")],
                          vector=True)
