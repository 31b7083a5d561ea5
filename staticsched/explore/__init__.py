"""Design-space exploration: sweeps over hardware parameters and graphs, run on local
processes or a Ray cluster, with CSV results and pictures; what one static program saves over
kernel-after-kernel dispatch (:mod:`.dispatch`)."""

from staticsched.explore.dispatch import Dispatch, compare_dispatch, dispatch_table
from staticsched.explore.run import run_sweep
from staticsched.explore.spec import Point, SweepSpec, load_sweep

__all__ = ["Dispatch", "Point", "SweepSpec", "compare_dispatch", "dispatch_table", "load_sweep", "run_sweep"]
