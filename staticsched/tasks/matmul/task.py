"""The ``matmul`` task as read: its tiling, epilogue steps and the task value, and the
constants the other modules share."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np

from staticsched.model.hardware import DTYPE_BYTES
from staticsched.model.vecops import USER_OPS, VECOPS
from staticsched.tasks.base import spans
from staticsched.tasks.rowops import DEFAULT_EPS, ROWOPS

#: accumulator element bytes (fp32); operands and outputs take their tensors' dtypes
#: (:attr:`MatmulTask.dtype`, :attr:`MatmulTask.out_dtype`)
ACC_BYTES = DTYPE_BYTES["float32"]

#: epilogue ops: every Vector op a TaskGraph may name that keeps the tile's shape
EPILOGUE_OPS = tuple(name for name in USER_OPS if not VECOPS[name].reduces)
#: row reductions an epilogue may hold (those keeping the shape)
REDUCTION_OPS = tuple(name for name, rop in ROWOPS.items() if rop.out == "full" and rop.epilogue)
#: the TaskGraph's ``engine`` values: the Cube lowering (the default) or the Vector one
#: (:mod:`staticsched.tasks.matmul.vector`)
ENGINES = ("cube", "vector")



@attrs.frozen
class Tiling:
    """Base tile sizes of a matmul; ``double_buffer`` reserves room for two of every tile.

    ``step_m x step_n`` output blocks form a group that one core computes together, K step by
    K step (Ascend's ``TCubeTiling`` ``stepM``/``stepN``): one A tile load in L1 serves the
    ``step_n`` blocks of its row, one B tile load the ``step_m`` blocks of its column, at the
    price of ``step_m * step_n`` accumulators and ``step_m + step_n`` operand tiles live at once.

    ``workspace_stages`` is used on a split chip only: the slots of each AIC's ring in global
    memory through which its blocks reach the AIVs (:mod:`staticsched.tasks.matmul.split`).

    ``split_k`` divides each block's K loop into that many contiguous chunks of K steps, each
    a unit of work on its own core: fp32 partial sums go to a GM workspace and a fixed-order
    reduction on the Vector engine adds them (:mod:`staticsched.tasks.matmul.splitk`).

    ``resident_a`` keeps a group's A row panel -- every K tile of it -- in L1 while the
    group's ``step_n`` blocks (``step_m`` is 1) are computed one after another, each with its
    own K loop and one accumulator: A is read from global memory once per group instead of
    once per block, B's tiles stream (Ascend's ``depthA1`` covering K with ``iterateOrder``
    along N). It costs the panel's L1 bytes, and an MTE1 move of A per block and K step.
    """

    base_m: int
    base_n: int
    base_k: int
    double_buffer: bool = True
    step_m: int = 1
    step_n: int = 1
    workspace_stages: int = 2
    split_k: int = 1
    resident_a: bool = False

    @property
    def buffers(self) -> int:
        return 2 if self.double_buffer else 1

    @property
    def reuses(self) -> bool:
        """Whether blocks are grouped (some step above 1)."""
        return self.step_m * self.step_n > 1

    @property
    def accumulators(self) -> int:
        """Output blocks whose accumulators a group keeps live together."""
        return 1 if self.resident_a else self.step_m * self.step_n


@attrs.frozen
class EpilogueStep:
    """One on-chip step after the matmul: ``op`` with an optional GM ``tensor`` or scalar
    ``value``; a row reduction's ``gamma``/``beta`` ``[N]`` tensors and ``eps``."""

    op: str
    tensor: str = ""
    value: float | None = None
    gamma: str = ""
    beta: str = ""
    eps: float | None = None

    @property
    def reduces(self) -> bool:
        return self.op in ROWOPS

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(x for x in (self.tensor, self.gamma, self.beta) if x)

    @property
    def epsilon(self) -> float:
        return DEFAULT_EPS if self.eps is None else self.eps


@attrs.frozen(kw_only=True)
class MatmulTask:
    """``out = epilogue(a @ b)``; ``m, n, k`` are the problem dims resolved from the tensors,
    ``batch`` the output's leading dims and ``a_lead``/``b_lead`` the operands' (broadcast)."""

    type: ClassVar[str] = "matmul"

    id: str
    a: str
    b: str
    out: str
    m: int
    n: int
    k: int
    transpose_a: bool = False
    transpose_b: bool = False
    epilogue: tuple[EpilogueStep, ...] = attrs.field(converter=tuple, default=())
    tiling: Tiling | None = None
    batch: tuple[int, ...] = attrs.field(converter=tuple, default=())
    a_lead: tuple[int, ...] = attrs.field(converter=tuple, default=())
    b_lead: tuple[int, ...] = attrs.field(converter=tuple, default=())
    #: ``engine`` as given (``""``: absent, the Cube lowering as ``"cube"``)
    engine: str = ""
    #: whether ``a``/``b`` are stored in the Cube's fractal format (their tensors' ``"layout":
    #: "NZ"``): their loads then need no ND -> NZ conversion (``nd2nz``)
    a_nz: bool = False
    b_nz: bool = False
    #: the operands' dtype (``a``, ``b`` and the epilogue's tensors share it): the Cube's rate
    #: and the operand tiles' bytes follow it
    dtype: str = "float16"
    #: the output's dtype: FixPipe converts the fp32 accumulator to it, the epilogue runs on
    #: tiles of it
    out_dtype: str = "float16"

    @property
    def elem_bytes(self) -> int:
        """Bytes of one operand element."""
        return DTYPE_BYTES[self.dtype]

    @property
    def out_bytes(self) -> int:
        """Bytes of one output element."""
        return DTYPE_BYTES[self.out_dtype]

    @property
    def on_vector(self) -> bool:
        """Whether the task asked for the Vector lowering."""
        return self.engine == "vector"

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.a, self.b, *(t for s in self.epilogue for t in s.tensors))

    @property
    def cube_operands(self) -> tuple[str, ...]:
        """The tensors loaded from global memory as the Cube's operands (none on the Vector
        engine)."""
        return () if self.on_vector else (self.a, self.b)

    @property
    def reduces(self) -> bool:
        """Whether the epilogue holds a row reduction (row panels stay in the vector buffer)."""
        return any(s.reduces for s in self.epilogue)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.out,)

    @property
    def batches(self) -> int:
        return math.prod(self.batch)

    def stored_tile(self, which: str, rows: int, cols: int) -> tuple[int, int, int]:
        """``(rows, cols, stride)`` of an A (``rows x cols`` = M x K) or B (K x N) tile as its
        tensor stores it: transposed operands hold the tile the other way round; ``stride`` is
        the tensor's row length in elements."""
        transposed = self.transpose_a if which == "a" else self.transpose_b
        # A is M x K (K x M transposed), B is K x N (N x K transposed)
        stride = {("a", False): self.k, ("a", True): self.m, ("b", False): self.n, ("b", True): self.k}[
            (which, transposed)]
        return (cols, rows, stride) if transposed else (rows, cols, stride)

    def load_ratio(self, hw: Any, which: str, rows: int, cols: int) -> float:
        """How many times longer than at its path's rate the load of an A or B tile of ``rows x
        cols`` takes: the chip's ND2NZ ratio for an ND operand, 1 for an NZ one or on a chip
        that does not price layouts (:func:`staticsched.model.opkinds.layout_ratio`'s rule)."""
        cube = hw.cube
        nz = self.a_nz if which == "a" else self.b_nz
        if nz or cube is None or not cube.models_layouts:
            return 1.0
        return cube.nd2nz_ratio(*self.stored_tile(which, rows, cols))

    def operand_index(self, lead: tuple[int, ...], bi: int) -> int:
        """The matrix of an operand with leading dims ``lead`` that batch element ``bi`` reads
        (NumPy broadcasting: missing and size-1 dims repeat)."""
        if not lead:
            return 0
        idx = np.unravel_index(bi, self.batch)[len(self.batch) - len(lead):]
        picked = tuple(i if d > 1 else 0 for i, d in zip(idx, lead, strict=True))
        return int(np.ravel_multi_index(picked, lead))


@attrs.frozen
class SpanGrid:
    """A matmul cut by a tiling's ``base_n`` and ``base_k``: what its Cube plan and its Vector
    plan share."""

    task: MatmulTask
    tiling: Any

    @property
    def n_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.n, self.tiling.base_n)

    @property
    def k_spans(self) -> tuple[tuple[int, int], ...]:
        return spans(self.task.k, self.tiling.base_k)
