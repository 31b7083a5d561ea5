"""The program's file formats, text and JSON, and reading either: what the emitter writes and
the verifier reads. Below both, so the verifier never imports the emitter (or its planner)."""

from staticsched.formats.load import load_program, loads_program
from staticsched.formats.program_json import dumps_program_json, program_from_dict, program_to_dict
from staticsched.formats.program_text import dumps_program_text, parse_program_text

__all__ = [
    "dumps_program_json",
    "dumps_program_text",
    "load_program",
    "loads_program",
    "parse_program_text",
    "program_from_dict",
    "program_to_dict",
]
