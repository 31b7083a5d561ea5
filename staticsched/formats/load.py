"""Reading a program file in either form (what the verifier calls)."""

from __future__ import annotations

import json
from pathlib import Path

from staticsched._fields import read_text_file
from staticsched._gc import paused
from staticsched.errors import ProgramError
from staticsched.formats.program_json import program_from_dict
from staticsched.formats.program_text import parse_program_text
from staticsched.model.program import Program


def loads_program(text: str, where: str = "<program>") -> Program:
    """Parse program text in either form: JSON when it starts with ``{``, else the text form.

    Raises
    ------
    ProgramError
        Naming ``where`` and the line (text form) or key (JSON form) of the problem.
    """
    # a chip's program decodes into ~10^7 acyclic objects: the cycle collector would walk them
    # again and again as the heap grows (half the load time of the 4096^3 GEMM's program)
    with paused():
        return _loads_program(text, where)


def _loads_program(text: str, where: str) -> Program:
    if text.lstrip().startswith("{"):

        def no_constant(name: str) -> None:
            raise ValueError(f"{name} is not allowed")

        try:
            data = json.loads(text, parse_constant=no_constant)
        except (json.JSONDecodeError, ValueError, RecursionError) as exc:
            raise ProgramError(f"{where}: not valid JSON: {exc}") from None
        return program_from_dict(data, where)
    try:
        return parse_program_text(text)
    except ProgramError as exc:
        raise ProgramError([f"{where}: {p}" for p in exc.problems]) from None


def load_program(path: str | Path) -> Program:
    """Load ``program.txt`` or ``program.json`` (the form is sniffed from the content).

    Raises
    ------
    ProgramError
        When the file is missing, unreadable, or not a valid program.
    """
    return loads_program(read_text_file(path, ProgramError), str(path))
