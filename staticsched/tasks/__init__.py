"""Task kinds: the registry.

Each kind is one module of this package defining ``KIND`` (a
:class:`~staticsched.tasks.base.TaskKind`); the TaskGraph reader, the lowering, the NumPy
reference and the test strategies all dispatch through :data:`KINDS`. Adding a kind is its
module, one line below, and its section in ``docs/formats.md`` (``docs/design.md`` walks
through it).
"""

from __future__ import annotations

from importlib import import_module

from staticsched.tasks.base import TaskKind

#: the kinds, one line each: the module of this package that defines ``KIND``
_MODULES = (
    "matmul",
    "elementwise",
    "rowwise",
    "attention",
    "move",
)

KINDS: dict[str, TaskKind] = {}
for _name in _MODULES:
    _kind: TaskKind = import_module(f"{__name__}.{_name}").KIND
    KINDS[_kind.name] = _kind

#: op -> the kind whose tasks take it (the readers' hint when a task names another kind's op)
KIND_OF_OP: dict[str, str] = {}
for _kind in KINDS.values():
    for _op in _kind.ops:
        KIND_OF_OP.setdefault(_op, _kind.name)


def kind_of(task) -> TaskKind:
    """The kind of a task object (by its ``type``)."""
    return KINDS[task.type]
