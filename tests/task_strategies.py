"""Hypothesis strategies of the task kinds, one per kind (:data:`STRATEGIES`), with the
tests rather than in the package: ``strategy(draw, prefix, tensors, src) -> task dict`` draws
a task of the kind, adds its tensors to ``tensors`` (names starting with ``prefix``) and,
with ``src`` (an earlier task's output ``(name, shape)``), reads it. A kind whose tasks cannot
read another task's output says so (``follows=False``). A new task kind adds its strategy
here; the end-to-end properties then cover it.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
from hypothesis import strategies as st

from staticsched.model.vecops import VECOPS
from staticsched.tasks.elementwise import OPS as ELEMENTWISE_OPS
from staticsched.tasks.matmul import EPILOGUE_OPS, REDUCTION_OPS
from staticsched.tasks.move import blocks_of, gather_source
from staticsched.tasks.rowops import ROWOPS
from staticsched.tasks.rowwise import OPS as ROWWISE_OPS

# --------------------------------------------------------------------------- matmul

#: epilogue steps the random properties draw: division and rsqrt of random [-1, 1) data, and
#: exponentials stacked on exponentials, would test the conditioning of fp16 data, not the
#: schedule (the norms and softmax exercise rsqrt, div and exp)
#: the most accumulator elements a drawn L1-reuse group holds: the seed's L0C (256 KiB) is two
#: buffers of fp32 tiles, 32,768 elements, and half of it leaves room for any drawn shape
L0C_GROUP_ELEMENTS = 16384

#: ops the random properties leave out: divisions, square roots and logs of random [-1, 1) data
#: (NaN, or a divisor near zero), exponentials stacked on exponentials, the inverse functions
#: defined on [-1, 1] and tan's poles (a chained input leaves that range), and the steps
#: (floor, ceil, round, sign, a threshold): a product summed in another order than the
#: reference's may land on the other side of a step, which tests BLAS, not the schedule; and
#: celu, whose exp overflows under a negative drawn value
UNSAFE_OPS = ("div", "div_row", "rsqrt", "exp", "sqrt", "reciprocal", "rdivs", "div_col", "rdiv_col",
              "rdiv_row", "log", "acosh", "asin", "acos", "atanh", "tan", "sinh", "cosh", "floor", "ceil",
              "round", "sign", "thresholded_relu", "celu")

SAFE_STEPS = tuple(op for op in EPILOGUE_OPS + REDUCTION_OPS if op not in UNSAFE_OPS)

#: the eps of a drawn norm whose rows can be nearly equal (a chained input, a matmul's
#: epilogue): a norm divides fp16's rounding by the rows' deviation, which tests fp16
#: conditioning, not the schedule; the largest drawn eps keeps the divisor above 0.3
WELL_CONDITIONED_EPS = 0.1


def matmul(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """A matmul with tails: shapes 1-150, optional batch (a 2-D ``b`` broadcast or a batched
    one), either transpose, an epilogue of up to 3 steps of any operand form or a row
    reduction, an optional explicit tiling with L1 reuse steps. With ``src`` it multiplies
    that ``[..., M, K]``."""
    if src is not None:
        a_name, shape = src
        batch, (m, k) = list(shape[:-2]), (shape[-2:] if len(shape) > 1 else (1, shape[0]))
        ta = False
    else:
        m = draw(st.integers(1, 150), label="M")
        k = draw(st.integers(1, 150), label="K")
        batch = draw(st.sampled_from([[], [], [2], [2, 2]]), label="batch")
        ta = draw(st.booleans(), label="transpose_a")
        a_name = f"{prefix}a"
        tensors[a_name] = {"shape": [*batch, k, m] if ta else [*batch, m, k]}
    n = draw(st.integers(1, 150), label="N")
    tb = draw(st.booleans(), label="transpose_b")
    b_batch = batch if batch and draw(st.booleans(), label="batched b") else []
    tensors[f"{prefix}w"] = {"shape": [*b_batch, n, k] if tb else [*b_batch, k, n]}
    out = f"{prefix}y"
    tensors[out] = {"shape": [*batch, m, n]}
    epilogue = []
    # a chained ``a`` (a softmax's or a norm's output) gives rows of nearly equal values: a
    # norm of such rows after row offsets divides fp16 rounding by a tiny deviation (a drawn
    # attention -> softmax -> matmul + add_row + add_row + layernorm differed by 0.03), which
    # tests fp16 conditioning, not the schedule
    ops = st.sampled_from(SAFE_STEPS if src is None else tuple(op for op in SAFE_STEPS if op not in ROWOPS))
    for j, op in enumerate(draw(st.lists(ops, max_size=3), label="epilogue")):
        step: dict[str, Any] = {"op": op}
        if op in ROWOPS:
            for key in ROWOPS[op].params:
                if draw(st.booleans(), label=key):
                    tensors[f"{prefix}{key}{j}"] = {"shape": [n]}
                    step[key] = f"{prefix}{key}{j}"
            if ROWOPS[op].eps:
                # an epilogue's rows can be nearly equal too: a 1-deep product of a small
                # ``a`` element, or a softmax's nearly uniform row (a drawn 1x6 matmul +
                # softmax + add_row + layernorm was 0.024 off, over the 0.02 tolerance)
                step["eps"] = WELL_CONDITIONED_EPS
            epilogue.append(step)
            continue
        vop = VECOPS[op]
        if vop.arity > 1:
            name = f"{prefix}e{j}"
            form = vop.operands[1]
            tensors[name] = {"shape": {"col": [n], "row": [*batch, m, 1], "full": [*batch, m, n]}[form]}
            step["tensor"] = name
        if vop.scalar == "required":
            step["value"] = draw(st.sampled_from([0.5, -1.25, 2.0]), label="value")
        epilogue.append(step)
    task = {"id": f"{prefix}mm", "type": "matmul", "a": a_name, "b": f"{prefix}w", "out": out,
            "transpose_a": ta, "transpose_b": tb, "epilogue": epilogue}
    if draw(st.booleans(), label="explicit tiling"):
        base = draw(st.sampled_from([16, 32, 64]), label="base")
        task["tiling"] = {"base_m": base, "base_n": base, "base_k": base}
        reduces = any(s["op"] in ROWOPS for s in epilogue)
        if not reduces:  # L1 reuse groups, clipped to the block grid (check_tiling refuses more)
            sm = min(draw(st.integers(1, 3), label="step_m"), -(-m // base))
            sn = min(draw(st.integers(1, 3), label="step_n"), -(-n // base))
            # a group's accumulators must fit the seed's L0C (2 x 4-byte tiles per block of the
            # group): 3 x 3 groups of 64 x 64 blocks do not, and the kind rightly refuses them
            while sm * sn * base * base > L0C_GROUP_ELEMENTS:
                sm, sn = (sm - 1, sn) if sm >= sn else (sm, sn - 1)
            task["tiling"]["step_m"], task["tiling"]["step_n"] = sm, sn
            # split-K over up to 4 cores (single blocks only; 64x64 tiles with three fp32
            # reduction tiles and epilogue operands could outgrow the vector buffer)
            if (sm, sn) == (1, 1) and base <= 32:
                split = min(draw(st.integers(1, 4), label="split_k"), -(-k // base))
                if split > 1:
                    task["tiling"]["split_k"] = split
    return task


# --------------------------------------------------------------------------- elementwise

#: ops the random properties draw: division and rsqrt of random [-1, 1) data, and exponentials
#: stacked on exponentials, would test the conditioning of fp16 data, not the schedule (row
#: reductions and attention exercise those ops)
SAFE_OPS = tuple(op for op in ELEMENTWISE_OPS if op not in UNSAFE_OPS)


def elementwise(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """An elementwise op on ``src`` (or a fresh tensor, maybe batched) with operands of its
    forms."""
    if src is None:
        lead = draw(st.sampled_from([[], [], [2]]), label="lead")
        shape = [*lead, draw(st.integers(1, 150), label="rows"), draw(st.integers(1, 150), label="cols")]
        x = f"{prefix}x"
        tensors[x] = {"shape": shape}
    else:
        x, shape = src[0], list(src[1])
    op = draw(st.sampled_from(SAFE_OPS), label="op")
    vop = VECOPS[op]
    inputs = [x]
    for j, form in enumerate(vop.operands[1:]):
        name = f"{prefix}z{j}"
        tensors[name] = {"shape": {"col": shape[-1:], "row": [*shape[:-1], 1], "full": shape}[form]}
        inputs.append(name)
    out = f"{prefix}o"
    tensors[out] = {"shape": shape}
    task: dict[str, Any] = {"id": f"{prefix}ew", "type": "elementwise", "op": op, "inputs": inputs,
                            "out": out}
    if vop.scalar == "required":
        task["value"] = 0.75
    return task


# --------------------------------------------------------------------------- rowwise


def rowwise(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """A row reduction of any op, with or without gamma/beta, with batch dims, and sometimes an
    explicit narrow tiling so that rows are streamed over several column blocks (tails
    included)."""
    if src is None:
        lead = draw(st.sampled_from([[], [], [2]]), label="lead")
        shape = [*lead, draw(st.integers(1, 40), label="rows"), draw(st.integers(1, 200), label="cols")]
        x = f"{prefix}x"
        tensors[x] = {"shape": shape}
    else:
        x, shape = src[0], list(src[1])
    cols = shape[-1]
    op = draw(st.sampled_from(ROWWISE_OPS), label="op")
    rop = ROWOPS[op]
    task: dict[str, Any] = {"id": f"{prefix}rw", "type": "rowwise", "op": op, "input": x, "out": f"{prefix}r"}
    tensors[task["out"]] = {"shape": shape if rop.out == "full" else [*shape[:-1], 1]}
    for key in rop.params:
        if draw(st.booleans(), label=key):
            tensors[f"{prefix}{key}"] = {"shape": [cols]}
            task[key] = f"{prefix}{key}"
    if rop.eps and src is not None:
        # a chained input can hold rows of nearly equal values, and a norm divides fp16's
        # rounding by their deviation: a drawn attention -> matmul + sigmoid -> layernorm
        # (thorough profile) had rows of deviation 0.0065 around 0.5, where one fp16 step is
        # 0.00024, so one step in one element moves its normalized value by ~0.03 (0.028 was
        # reported, over the 0.02 tolerance); the chained norm still runs
        task["eps"] = WELL_CONDITIONED_EPS
    elif rop.eps and draw(st.booleans(), label="eps"):
        task["eps"] = draw(st.sampled_from([1e-5, 1e-3, 0.1]), label="eps value")
    if draw(st.booleans(), label="explicit tiling"):
        task["tiling"] = {"rows": draw(st.sampled_from([3, 8, 16]), label="tile rows"),
                          "cols": draw(st.sampled_from([32, 48, 512]), label="tile cols")}
    return task


# --------------------------------------------------------------------------- attention


def attention(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """Attention with random heads (sometimes packed side by side, ``"heads"``), sequence
    lengths with tails (1-150), head dims, causal on and off (square when causal), sometimes an
    additive mask (per batch element or shared) and an explicit block tiling. ``src`` is not
    used: attention reads fresh tensors."""
    lead = draw(st.sampled_from([[], [2], [2, 2]]), label="heads")
    packed = draw(st.sampled_from([1, 1, 2]), label="packed heads")
    causal = draw(st.booleans(), label="causal")
    sq = draw(st.integers(1, 100), label="Sq")
    sk = sq if causal else draw(st.integers(1, 100), label="Sk")
    d = draw(st.sampled_from([16, 24, 64]), label="d")
    dv = draw(st.sampled_from([16, 40, 64]), label="dv")
    names = {key: f"{prefix}{key}" for key in ("q", "k", "v", "o")}
    tensors[names["q"]] = {"shape": [*lead, sq, packed * d]}
    tensors[names["k"]] = {"shape": [*lead, sk, packed * d]}
    tensors[names["v"]] = {"shape": [*lead, sk, packed * dv]}
    tensors[names["o"]] = {"shape": [*lead, sq, packed * dv]}
    task: dict[str, Any] = {"id": f"{prefix}att", "type": "attention", "q": names["q"], "k": names["k"],
                            "v": names["v"], "out": names["o"], "causal": causal}
    if packed > 1:
        task["heads"] = packed
    if draw(st.booleans(), label="mask"):
        shared = draw(st.booleans(), label="shared mask")
        task["mask"] = f"{prefix}mask"
        tensors[task["mask"]] = {"shape": [1, sk] if shared else [*lead, 1, sk]}
    if draw(st.booleans(), label="explicit tiling"):
        task["tiling"] = {"block_q": draw(st.sampled_from([16, 32, 64]), label="block_q"),
                          "block_kv": draw(st.sampled_from([32, 64]), label="block_kv")}
    return task



# --------------------------------------------------------------------------- move


def move(
    draw, prefix: str, tensors: dict[str, Any], src: tuple[str, tuple[int, ...]] | None
) -> dict[str, Any]:
    """A data movement of ``src`` (or a fresh tensor, maybe 3-D) as NumPy would write it -- a
    transpose by any permutation, a slice with steps (reversed too), a concat with a fresh
    tensor along any axis, a tile, or a reshape to another row length -- given to the task as
    the blocks :func:`~staticsched.tasks.move.blocks_of` finds for its source indices."""
    if src is None:
        shape = [draw(st.integers(1, 6), label="lead")] if draw(st.booleans(), label="3-D") else []
        shape += [draw(st.integers(1, 40), label="rows"), draw(st.integers(1, 70), label="cols")]
        x = f"{prefix}x"
        tensors[x] = {"shape": shape}
    else:
        x, shape = src[0], list(src[1])
    inputs = [x]
    shapes2d = [(math.prod(shape[:-1]), shape[-1])]
    ids = gather_source(shapes2d)[0].reshape(shape)
    how = draw(st.sampled_from(["transpose", "slice", "concat", "tile", "reshape"]), label="how")
    axis = draw(st.integers(0, len(shape) - 1), label="axis")
    if how == "transpose":
        ids = ids.transpose(draw(st.permutations(range(len(shape))), label="perm"))
    elif how == "slice":
        step = draw(st.sampled_from([1, 2, 3, -1, -2]), label="step")
        start = draw(st.integers(0, shape[axis] - 1), label="start")
        cut = [slice(None)] * len(shape)
        cut[axis] = slice(start, None, step)
        ids = ids[tuple(cut)]
    elif how == "concat":
        other = list(shape)
        other[axis] = draw(st.integers(1, 20), label="other extent")
        y = f"{prefix}y"
        tensors[y] = {"shape": other}
        inputs.append(y)
        shapes2d.append((math.prod(other[:-1]), other[-1]))
        ids = np.concatenate([ids, gather_source(shapes2d)[1].reshape(other)], axis=axis)
    elif how == "tile":
        reps = [1] * len(shape)
        reps[axis] = draw(st.integers(2, 3), label="reps")
        ids = np.tile(ids, reps)
    else:
        n = ids.size
        cols = draw(st.sampled_from([d for d in range(1, min(n, 300) + 1) if n % d == 0]), label="new cols")
        ids = ids.reshape(n // cols, cols)
    out = f"{prefix}mv"
    tensors[out] = {"shape": list(ids.shape)}
    blocks = blocks_of(ids.reshape(-1, ids.shape[-1]), shapes2d)
    return {"id": f"{prefix}move", "type": "move", "inputs": inputs, "out": out,
            "blocks": [b.as_list() for b in blocks]}


@attrs.frozen
class KindStrategy:
    draw: Any
    #: whether its tasks can read an earlier task's output (``src``)
    follows: bool = True


#: every registered kind's strategy (``tests/tasks/test_tasks.py`` checks that none is missing)
STRATEGIES: dict[str, KindStrategy] = {
    "matmul": KindStrategy(matmul),
    "elementwise": KindStrategy(elementwise),
    "rowwise": KindStrategy(rowwise),
    "attention": KindStrategy(attention, follows=False),
    "move": KindStrategy(move),
}
