"""The error hierarchy: every user-facing failure is a :class:`StaticschedError`."""

from __future__ import annotations


class StaticschedError(Exception):
    """Base of every error staticsched raises for bad input or an impossible request.

    ``problems`` holds one line per problem; ``str(err)`` joins them.
    """

    def __init__(self, problems: str | list[str] | tuple[str, ...]) -> None:
        if isinstance(problems, str):
            problems = [problems]
        # one line per problem, whatever characters the offending input held
        self.problems: tuple[str, ...] = tuple(
            str(p).replace("\r", "\\r").replace("\n", "\\n") for p in problems
        )
        super().__init__("\n".join(self.problems))


class InputError(StaticschedError):
    """A file or value could not be read: malformed JSON/TOML, wrong types, unknown keys."""


class HardwareError(InputError):
    """The hardware model is invalid."""


class GraphError(InputError):
    """A TaskGraph or OpGraph is invalid (``check()`` failures)."""


class TilingError(InputError):
    """An explicit tiling does not fit the hardware."""


class InfeasibleError(StaticschedError):
    """The input is well formed but no schedule exists (the message says which constraint)."""


class ProgramError(InputError):
    """A program file could not be parsed."""
