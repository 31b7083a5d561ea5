"""Emission: sync planning, program building, program text/JSON forms and output files.

Typical use::

    schedule, program, plan = finalize(solve(graph, hw))
    write_outputs("out", schedule, program, plan)
"""

from staticsched.emit.build import build_program, finalize
from staticsched.emit.bundles import bundle_lines, dumps_bundles
from staticsched.emit.files import (
    OUTPUT_FILES,
    TEXT_FORMS,
    OutputChoice,
    PendingOutputs,
    choose_outputs,
    render_outputs,
    start_outputs,
    write_outputs,
)
from staticsched.emit.gantt import render_gantt
from staticsched.emit.nominal import replay_cycles
from staticsched.emit.summary import phase_table, summary_lines, tiling_lines
from staticsched.emit.sync import Flag, PlanStream, SyncPlan, SyncStats, plan_sync, plan_timed
from staticsched.emit.timetable import (
    dumps_timetable_csv,
    dumps_timetable_json,
    dumps_timetable_text,
    timetable_to_dict,
)
from staticsched.emit.trace import dumps_trace, trace_lines
from staticsched.formats.load import load_program, loads_program
from staticsched.formats.program_json import dumps_program_json, program_from_dict, program_to_dict
from staticsched.formats.program_text import dumps_program_text, parse_program_text

__all__ = [
    "OUTPUT_FILES",
    "TEXT_FORMS",
    "Flag",
    "OutputChoice",
    "PendingOutputs",
    "PlanStream",
    "SyncPlan",
    "SyncStats",
    "build_program",
    "bundle_lines",
    "choose_outputs",
    "dumps_bundles",
    "dumps_program_json",
    "dumps_program_text",
    "dumps_timetable_csv",
    "dumps_timetable_json",
    "dumps_timetable_text",
    "dumps_trace",
    "finalize",
    "load_program",
    "loads_program",
    "parse_program_text",
    "phase_table",
    "plan_sync",
    "plan_timed",
    "program_from_dict",
    "program_to_dict",
    "render_gantt",
    "render_outputs",
    "replay_cycles",
    "start_outputs",
    "summary_lines",
    "tiling_lines",
    "timetable_to_dict",
    "trace_lines",
    "write_outputs",
]
