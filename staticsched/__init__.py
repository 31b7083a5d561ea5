"""staticsched: cycle-exact static scheduling of AI-accelerator cores.

Public API: :func:`schedule`, :func:`compile_graph`, :func:`tune`, :func:`verify`, :func:`load_hardware`,
the graph loaders and the error hierarchy.
"""

from staticsched.api import Compiled, compile_graph, schedule, tune
from staticsched.errors import (
    GraphError,
    HardwareError,
    InfeasibleError,
    InputError,
    ProgramError,
    StaticschedError,
    TilingError,
)
from staticsched.frontend.taskgraph import TaskGraph, load_graph, load_taskgraph
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import list_presets, load_hardware
from staticsched.model.opgraph import OpGraph, load_opgraph
from staticsched.model.schedule import Schedule
from staticsched.verify import Report, verify

__all__ = [
    "Compiled",
    "GraphError",
    "Hardware",
    "HardwareError",
    "InfeasibleError",
    "InputError",
    "OpGraph",
    "ProgramError",
    "Report",
    "Schedule",
    "StaticschedError",
    "TaskGraph",
    "TilingError",
    "compile_graph",
    "list_presets",
    "load_graph",
    "load_hardware",
    "load_opgraph",
    "load_taskgraph",
    "schedule",
    "tune",
    "verify",
]
__version__ = "0.1.0"
