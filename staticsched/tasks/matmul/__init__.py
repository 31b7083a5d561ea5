"""The ``matmul`` task kind: ``out = epilogue(a @ b)``, batched, on the Cube, with a fused
Vector epilogue.

``a`` is ``[..., M, K]`` (``[..., K, M]`` with ``transpose_a``), ``b`` is ``[..., K, N]``
(``[..., N, K]`` with ``transpose_b``); the leading batch dims broadcast as in NumPy (a 2-D
``b`` is shared by every batch element) and ``out`` is ``[batch..., M, N]``. fp16 operands,
fp32 accumulation in the accumulator, FixPipe converts back to fp16 into the vector buffer,
where the epilogue runs before the single write-back.

Tiling (seed article 000, §4.3): one block computes a ``base_m x base_n`` output tile with
``base_k`` of reduction per step. Per core and per buffer it needs an A tile in ``cube_a``, a
B tile in ``cube_b``, an fp32 block in the ``accumulator``, both input tiles again in the
``operand`` buffer, and in the ``vector`` buffer the fp16 output block plus each epilogue
operand's tile. With double buffering each of these is needed twice, so that the next tile
can be filled while the current one is used. :func:`matmul_requirements` states those
inequalities once; checking and deriving both read them.

Lowering: blocks in row-major order (batch, then M, then N) go to cores balanced by their
estimated cycles (the costliest first onto the least loaded core: equal blocks round-robin). A block
is, per K step, ``load`` of the A and B tiles into the operand buffer, ``move`` to the cube
inputs, ``mmad`` into the block's accumulator item (``init`` on the first step); then the
epilogue operands are loaded into the vector buffer, ``fixpipe`` drains the accumulator,
the epilogue ``vec`` ops run in place and ``store`` writes the block back.

An epilogue may also hold a row reduction over the output's rows (``softmax``, ``layernorm``,
``rmsnorm``: :mod:`staticsched.tasks.rowops`). Its statistics span every N-block of a row, so
then a whole row panel (one ``base_m`` span, all its N-blocks) is one unit of work on one
core and stays in the vector buffer until the reduction has swept it: statistics over the
blocks, then each block normalised in place (``two-pass``; ``single`` with one N-block). The
tiling must then fit the panel (``base_m * N``) in the vector buffer; when no tiling does, a
separate ``rowwise`` task is the way (the seed article's fusion boundary, §2.2).

``"engine": "vector"`` selects the Vector lowering instead (:mod:`.vector`, issue 25): for a
GEMV or a small-M matmul, column sums of ``b`` tiles times columns of ``a`` on the Vector cores
alone, fp32 sums rounded to fp16 once, then the same epilogue.

The kind is split by job: :mod:`.task` (values), :mod:`.read`, :mod:`.tiling`, :mod:`.plan`
(work balance and lowering), :mod:`.vector` (the Vector lowering) and :mod:`.reference`.
"""

from staticsched.tasks.base import TaskKind
from staticsched.tasks.matmul.plan import MatmulPlan, needs, plan
from staticsched.tasks.matmul.read import operand_fits, operand_shape, read, to_dict
from staticsched.tasks.matmul.reference import input_scales, reference
from staticsched.tasks.matmul.task import (
    ENGINES,
    EPILOGUE_OPS,
    REDUCTION_OPS,
    EpilogueStep,
    MatmulTask,
    Tiling,
)
from staticsched.tasks.matmul.vector import VectorPlan, VectorTiling

__all__ = ["ENGINES", "EPILOGUE_OPS", "KIND", "REDUCTION_OPS", "EpilogueStep", "MatmulPlan", "MatmulTask",
           "Tiling", "VectorPlan", "VectorTiling", "operand_fits", "operand_shape"]

KIND = TaskKind(
    name="matmul",
    read=read,
    to_dict=to_dict,
    plan=plan,
    needs=needs,
    reference=reference,
    input_scales=input_scales,
    cube_operands=lambda task: task.cube_operands,
)
