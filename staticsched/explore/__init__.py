"""Design-space exploration: sweeps over hardware parameters and graphs, run on local
processes or a Ray cluster, with CSV results and pictures."""

from staticsched.explore.run import run_sweep
from staticsched.explore.spec import Point, SweepSpec, load_sweep

__all__ = ["Point", "SweepSpec", "load_sweep", "run_sweep"]
