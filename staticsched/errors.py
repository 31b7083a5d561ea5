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


class EventBudgetError(InfeasibleError):
    """The sync planner found no event id for a flag without moving ops.

    Internal to planning: :func:`staticsched.emit.plan_sync` catches it and falls back to a
    plan that trades time for ids, so users only see it when they call the id assigner
    directly.
    """


class ProgramError(InputError):
    """A program file could not be parsed."""


class ModelError(InputError):
    """An ONNX model cannot be imported: an op, attribute, axis, dtype or shape outside the
    supported set, or a malformed model (one line per node, naming its op type and opset)."""
