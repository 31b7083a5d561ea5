"""Tiling spaces: the legal tilings of a task, for ``staticsched tune`` and the summary.

A task kind is tunable when :data:`SPACES` has an entry for it: how to enumerate its tilings
(the tuner pairs each with a cheap lower bound of a tiling, :mod:`staticsched.tasks.matmul.workbound`).
Legal means the kind's own ``plan`` accepts the tiling (the authority every lowering obeys);
the enumeration only decides which tilings to ask it about.

``matmul``: ``base_m``, ``base_n``, ``base_k`` in multiples of the Cube's fractal up to the
problem's dims (rounded up to the fractal), double buffered or not and, when the matmul
tiling has them, the L1 reuse steps ``step_m``/``step_n`` in :data:`STEP_VALUES`. The
capacity requirements grow with every base size and with double buffering, so for each
``(base_m, base_n)`` the legal ``base_k`` are found by bisection and a loop stops at the
first size that does not fit (as the kind's own derivation does).

The other kinds (``elementwise``, ``rowwise``, ``attention``) keep their derived tiling: their
spaces are small but lowering each candidate of a large graph to bound it is not cheap, and
they have no cheap bound yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from staticsched.errors import TilingError
from staticsched.model.hardware import Hardware, round_up
from staticsched.tasks import KINDS

#: values tried for each L1 reuse step (``step_m``, ``step_n``) when the tiling has them
STEP_VALUES = (1, 2, 4)
#: workspace slots per AIC tried besides the default 2 on a split chip
STAGE_VALUES = (1, 3)
#: the summary's count stops after this many legality checks and says "at least"
COUNT_CHECKS = 4000


class _Budget(Exception):
    """The legality-check budget of a count ran out."""


@attrs.frozen
class KindSpace:
    """How to search one kind's tilings: ``tilings(task, hw, ok)`` yields candidates in a fixed
    order, asking ``ok(tiling)`` whether the kind accepts one (only to find where loops stop
    unless ``check_each``)."""

    tilings: Callable[..., Iterator[Any]]


def legal(task: Any, tiling: Any, hw: Hardware) -> bool:
    """Whether the task's kind accepts ``tiling`` on ``hw`` (its ``plan`` raises no
    :class:`TilingError`)."""
    try:
        KINDS[task.type].plan(attrs.evolve(task, tiling=tiling), hw)
    except TilingError:
        return False
    return True


def used_tiling(task: Any, hw: Hardware) -> Any:
    """The tiling lowering uses for ``task``: its own, else the kind's derived one."""
    plan: Any = KINDS[task.type].plan(task, hw)  # every tunable kind's plan has a tiling
    return plan.tiling


def tiling_fields(tiling: Any) -> dict[str, Any]:
    """The tiling's fields by name, as in TaskGraph JSON (a split chip's default of 2
    workspace stages left out, as the TaskGraph leaves it out)."""
    f = attrs.asdict(tiling, recurse=False)
    if f.get("workspace_stages") == 2:
        del f["workspace_stages"]
    if f.get("split_k") == 1:
        del f["split_k"]
    if f.get("resident_a") is False:
        del f["resident_a"]
    return f


def tiling_label(tiling: Any) -> str:
    """Short text for tables and plots: ``128/208/64`` (base sizes), ``sb`` when single
    buffered, ``s2x1`` for L1 reuse steps, ``w3`` for 3 workspace stages (split chips), ``k16``
    for K split over 16 cores, ``rA`` for a resident A panel."""
    f = tiling_fields(tiling)
    sizes = [v for k, v in f.items() if not isinstance(v, bool) and k.startswith("base_")]
    text = "/".join(map(str, sizes))
    if f.get("double_buffer") is False:
        text += " sb"
    if f.get("step_m", 1) != 1 or f.get("step_n", 1) != 1:
        text += f" s{f.get('step_m', 1)}x{f.get('step_n', 1)}"
    if "workspace_stages" in f:
        text += f" w{f['workspace_stages']}"
    if "split_k" in f:
        text += f" k{f['split_k']}"
    if f.get("resident_a"):
        text += " rA"
    return text


def _steps(count: int) -> list[int]:
    """Step values worth trying along a dim of ``count`` blocks: 1, and each larger value
    whose half is still below the count (a step of 4 over 2 blocks is a step of 2)."""
    return [s for s in STEP_VALUES if s == 1 or s // 2 < count]


def _stairs(outer: range, inner: range, deep: range, ok: Callable[[int, int, int], bool]
            ) -> Iterator[tuple[int, int, int]]:
    """``(a, b, top)`` for every ``a`` of ``outer`` and ``b`` of ``inner`` with
    ``ok(a, b, deep[0])``, in order, ``top`` the index in ``deep`` of the last ``c`` with ``ok(a, b, c)``.
    ``ok`` must be monotone (false stays false as any argument grows), so ``top`` only falls
    along ``b`` and along ``a``: found by walking down, about one check per pair."""
    start = len(deep) - 1
    for a in outer:
        top, first = start, True
        for b in inner:
            while top >= 0 and not ok(a, b, deep[top]):
                top -= 1
            if top < 0:
                break
            if first:
                start, first = top, False  # the next ``a`` starts no higher
            yield a, b, top
        if first:  # not even the smallest ``b`` fits: no larger ``a`` will
            return


def split_values(task: Any, hw: Hardware, tiling: Any) -> list[int]:
    """``split_k`` values worth trying for ``tiling``: only when its blocks leave Cube cores
    idle, the powers of two and the count that fills the cores (at most the K steps and
    :data:`~staticsched.tasks.matmul.read.MAX_SPLIT_K`)."""
    from staticsched.tasks.matmul.read import MAX_SPLIT_K

    if task.reduces:
        return []
    blocks = task.batches * -(-task.m // tiling.base_m) * -(-task.n // tiling.base_n)
    cores = len(hw.engine_cores("cube"))
    fill = min(cores // blocks, -(-task.k // tiling.base_k), MAX_SPLIT_K)
    if fill < 2:
        return []
    return sorted({*(1 << e for e in range(1, fill.bit_length()) if 1 << e <= fill), fill})


def matmul_tilings(task: Any, hw: Hardware, ok: Callable[[Any], bool], *,
                   check_each: bool = True, steps: bool = False, split_k: bool = True) -> Iterator[Any]:
    """Legal matmul tilings, double buffered first, then by ``base_m``, ``base_n``,
    ``base_k`` and, with ``steps``, L1 reuse steps; each one checked by ``ok`` when
    ``check_each``. With ``split_k``, a tiling whose blocks leave Cube cores idle is followed
    by its split-K variants (:func:`split_values`)."""
    from staticsched.tasks.matmul import Tiling

    if hw.cube is None:
        return
    fm, fn, fk = hw.cube.fractal
    ms = range(fm, round_up(task.m, fm) + 1, fm)
    ns = range(fn, round_up(task.n, fn) + 1, fn)
    ks = range(fk, round_up(task.k, fk) + 1, fk)
    has_steps = steps and {"step_m", "step_n"} <= set(attrs.fields_dict(Tiling))
    for db in (True, False):
        fits = lambda bm, bn, bk, db=db: ok(Tiling(bm, bn, bk, double_buffer=db))  # noqa: E731
        for bm, bn, top in _stairs(ms, ns, ks, fits):
            pairs = [(1, 1)]
            if has_steps:
                pairs = [(sm, sn) for sm in _steps(-(-task.m // bm)) for sn in _steps(-(-task.n // bn))]
            for bk in ks[: top + 1]:
                for sm, sn in pairs:
                    # (sm, sn) is (1, 1), the defaults, without steps
                    t = Tiling(bm, bn, bk, double_buffer=db, step_m=sm, step_n=sn)
                    # base sizes below the walk's bound fit (monotone requirements); steps add
                    # requirements of their own: always asked
                    if ((sm, sn) == (1, 1) and not check_each) or ok(t):
                        yield t
                        # a split chip's workspace ring: its slots per AIC, the default first
                        for stages in (STAGE_VALUES if hw.split else ()):
                            yield attrs.evolve(t, workspace_stages=stages)
                        if split_k and (sm, sn) == (1, 1):
                            for s in split_values(task, hw, t):
                                st = attrs.evolve(t, split_k=s)
                                if ok(st):
                                    yield st


#: the tunable kinds
SPACES: dict[str, KindSpace] = {
    "matmul": KindSpace(matmul_tilings),
}


def tunable(task: Any) -> bool:
    """Whether ``task``'s tilings are searched: a tunable kind, on its Cube lowering (the
    matmul's Vector lowering derives its tiling and takes no explicit one)."""
    return task.type in SPACES and getattr(task, "engine", "") != "vector"


def candidates(task: Any, hw: Hardware, *, steps: bool = False, split_k: bool = True) -> list[Any]:
    """Every legal tiling of ``task`` on ``hw``, in the space's fixed order (empty for a kind
    that is not tunable); L1 reuse steps only with ``steps`` (they multiply the space by up
    to 9 and the cheap bound does not yet see what reuse saves, so the search would lower
    thousands of step candidates before scheduling any)."""
    space = SPACES.get(task.type)
    if space is None or not tunable(task):
        return []
    return list(space.tilings(task, hw, lambda t: legal(task, t, hw), steps=steps, split_k=split_k))


def count_candidates(task: Any, hw: Hardware, checks: int = COUNT_CHECKS, *,
                     steps: bool = False) -> tuple[int, bool]:
    """How many legal tilings ``task`` has on ``hw``: ``(count, exact)``. At most ``checks``
    legality checks are made (base sizes below a bisection's bound are counted unchecked);
    when they run out the count so far is returned with ``exact`` False. A kind that is not
    tunable gives ``(0, True)``."""
    space = SPACES.get(task.type)
    if space is None or not tunable(task):
        return 0, True
    left = [checks]

    def ok(t: Any) -> bool:
        if left[0] <= 0:
            raise _Budget
        left[0] -= 1
        return legal(task, t, hw)

    n = 0
    try:
        for _ in space.tilings(task, hw, ok, check_each=False, steps=steps):
            n += 1
    except _Budget:
        return n, False
    return n, True
