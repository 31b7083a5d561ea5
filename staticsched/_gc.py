"""The cyclic garbage collector paused while a phase builds its objects.

A chip's run holds ~10^7 small objects (ops, edges, instructions, timetable rows), nearly all
acyclic and freed by reference counting. The cycle collector would walk all of them again
each time the heap grows by a quarter: on the 4096^3 GEMM that is 40-50% of lowering's and
checking's time. Pausing it for a phase and restoring it after costs only the few cycles
the phase leaves, which the collector frees once it runs again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
