"""What many tests share, defined once: the repository's paths, the hardware presets (each
loaded once), the thorough profile's switch and example counts, and the sequential replay of
an OpGraph. The fixtures built on them are in ``conftest.py``."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.opkinds import KINDS

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT / "benchmarks"
PACKAGE = ROOT / "staticsched"
GOLDEN = TESTS / "golden"

#: ``HYPOTHESIS_PROFILE=thorough``: the end-to-end properties draw 50x their examples
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def examples(n: int) -> int:
    """``n`` examples by default, 50x that under the ``thorough`` profile."""
    return n * 50 if THOROUGH else n


@functools.cache
def preset(name: str) -> Hardware:
    """A shipped hardware preset, loaded once per test run (the values are frozen)."""
    return load_hardware(name)


SEED = preset("seed-davinci")


def replay(g: OpGraph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ops' NumPy semantics in list order (a valid sequential execution): the GM tensors
    after it, from ``inputs``."""
    gm = {t.name: np.zeros(t.shape, dtype=t.dtype) for t in g.tensors}
    for name, value in inputs.items():
        gm[name][...] = value
    bufs = {it.name: np.full(it.shape, np.nan, dtype=it.dtype) for it in g.items}
    with np.errstate(all="ignore"):
        for op in g.ops:
            KINDS[op.kind].semantics(op.attr, [bufs[n] for n in op.reads], [bufs[n] for n in op.writes], gm)
    return gm
