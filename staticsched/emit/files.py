"""Writing all output files at once, atomically.

Everything is rendered in memory first, then written into a fresh temporary directory next to
``outdir`` (same file system), then moved into place: a new ``outdir`` is one directory
rename, an existing one gets each file by ``os.replace``. An exception or a kill before the
moves leaves no output file and no ``outdir``; an exception also removes the temporary
directory (a kill while writing it leaves a hidden ``.<outdir>.partial-*`` directory, never
a half-written output).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from staticsched.emit import bundles, gantt, program_json, program_text, timetable, trace
from staticsched.emit.sync import SyncPlan
from staticsched.errors import InputError
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule

#: the files :func:`write_outputs` always writes, in this order
OUTPUT_FILES = (
    "timetable.json",
    "timetable.csv",
    "timetable.txt",
    "program.txt",
    "program.json",
    "bundles.txt",
    "trace.json",
    "gantt.svg",
)


def render_outputs(schedule: Schedule, program: Program, plan: SyncPlan) -> dict[str, bytes]:
    """The bytes of every output file, by file name (in :data:`OUTPUT_FILES` order)."""
    # modules are looked up at call time, so a test can replace one renderer with a failing
    # one; each text is encoded at once so that only one copy of a large file is held
    renderers = (
        ("timetable.json", lambda: timetable.dumps_timetable_json(schedule, plan)),
        ("timetable.csv", lambda: timetable.dumps_timetable_csv(schedule)),
        ("timetable.txt", lambda: timetable.dumps_timetable_text(schedule, plan)),
        ("program.txt", lambda: program_text.dumps_program_text(program)),
        ("program.json", lambda: program_json.dumps_program_json(program)),
        ("bundles.txt", lambda: bundles.dumps_bundles(program)),
        ("trace.json", lambda: trace.dumps_trace(schedule)),
        ("gantt.svg", lambda: gantt.render_gantt(schedule)),
    )
    return {name: _encode(render()) for name, render in renderers}


def _encode(text: str | bytes) -> bytes:
    # the JSON forms escape non-ASCII; for the human files a lone surrogate in a user's name
    # must not abort the run
    return text if isinstance(text, bytes) else text.encode("utf-8", errors="backslashreplace")


def _check_extra(extra: Mapping[str, str | bytes]) -> None:
    bad = []
    for name in sorted(extra):
        if name in OUTPUT_FILES:
            bad.append(f"extra file '{name}' would replace a standard output file")
        elif (
            not name
            or name in (".", "..")
            or "/" in name
            or os.sep in name
            or (os.altsep and os.altsep in name)
        ):
            bad.append(f"extra file name '{name}' must be a plain file name")
    if bad:
        raise InputError(bad)


def write_outputs(
    outdir: str | Path,
    schedule: Schedule,
    program: Program,
    plan: SyncPlan,
    *,
    extra_files: Mapping[str, str | bytes] | None = None,
) -> list[Path]:
    """Write every output file into ``outdir`` atomically (see the module docstring).

    Parameters
    ----------
    outdir : path
        Created if missing (with its parents); existing files of the same names are replaced,
        other files are left alone.
    schedule, program, plan
        From :func:`staticsched.emit.finalize`.
    extra_files : mapping of file name to text or bytes, optional
        More files to write in the same atomic step (e.g. a verification report).

    Returns
    -------
    list of Path
        The files written: :data:`OUTPUT_FILES` in order, then the extra files sorted by name.

    Raises
    ------
    InputError
        If ``outdir`` exists and is not a directory, an extra file name is not a plain name, or
        the files cannot be written (the message carries the system's reason).
    """
    outdir = Path(outdir)
    extra = dict(extra_files or {})
    _check_extra(extra)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"{outdir}: exists and is not a directory")
    files = render_outputs(schedule, program, plan)
    files.update((name, _encode(extra[name])) for name in sorted(extra))
    try:
        _move_into_place(outdir, files)
    except OSError as exc:
        # a full disk or a read-only directory is the user's to fix: one line, no traceback
        raise InputError(f"{outdir}: cannot write the output files: {exc}") from None
    return [outdir / name for name in files]


def _move_into_place(outdir: Path, files: dict[str, bytes]) -> None:
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.partial-", dir=outdir.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
        try:
            # a missing (or empty) outdir appears complete, in one step
            os.rename(tmp, outdir)
        except OSError:
            outdir.mkdir(exist_ok=True)
            for name in files:
                os.replace(tmp / name, outdir / name)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
