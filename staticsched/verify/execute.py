"""Executing a program on given inputs: its nominal replay's data flow, nothing checked.

What an ONNX backend's ``run`` needs once :func:`staticsched.verify.verify` has proven the
program: a race-free program computes the same values under every timing
(docs/verification.md, "Numbers under jitter"), so the nominal replay's values are the
program's values.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from staticsched.errors import InputError, ProgramError
from staticsched.model.hardware import Hardware
from staticsched.model.program import Program
from staticsched.verify import numeric as numreplay
from staticsched.verify.fluid import shared_transfers
from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import simulate


def execute(program: Program, hw: Hardware, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every GM tensor after running ``program`` on ``hw`` from the GM ``inputs``.

    Parameters
    ----------
    program, hw
        The program (as loaded from its file, or as built) and its hardware.
    inputs
        A value for every tensor the program reads before writing, of its declared shape.

    Raises
    ------
    ProgramError
        The program cannot be indexed or replayed (it deadlocks); run :func:`verify` for why.
    InputError
        An input is missing or has the wrong shape, or an instruction's data flow failed.
    """
    ix = ProgramIndex(program, hw)
    if ix.problems:
        raise ProgramError([f.message for f in ix.problems])
    rep = simulate(ix, shared=shared_transfers(ix))
    if rep.stuck:
        raise ProgramError("the program does not run to its end (deadlock): verify it for the details")
    written = {g.tensor for g in ix.gm_accesses if g.write}
    missing = [t.name for t in program.tensors if t.name not in written and t.name not in inputs]
    if missing:
        raise InputError([f"execute: no value for input tensor '{name}'" for name in sorted(missing)])
    gm, findings = numreplay.run(ix, rep, inputs)
    if findings:
        raise InputError([f.message for f in findings])
    return gm
