"""Writing all output files at once, atomically.

Every file is streamed (rendered in chunks, gzip-compressed chunk by chunk when asked, so no
whole file is held in memory) into a fresh temporary directory next to ``outdir`` (same file
system), then the files are moved into place: a new ``outdir`` is one directory rename, an
existing one gets each file by ``os.replace``. An exception or a kill before the moves leaves
no output file and no ``outdir``; an exception also removes the temporary directory (a kill
while writing it leaves a hidden ``.<outdir>.partial-*`` directory, never a half-written
output).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from staticsched._atomic import dir_mode, file_mode
from staticsched._gc import paused
from staticsched._workers import Mapped, cpus
from staticsched.emit import (  # the modules, not the package: no import circle
    bundles,
    gantt,
    timetable,
    trace,
)
from staticsched.emit.sync import SyncPlan
from staticsched.errors import InputError
from staticsched.formats import program_json, program_text
from staticsched.model.links import link_usage
from staticsched.model.program import Program
from staticsched.model.schedule import Schedule
from staticsched.model.traffic import gm_traffic

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


#: programs with more micro-ops than this get gzip-compressed JSON outputs and no text forms
#: unless the user chooses: the 4096^3 GEMM (167k ops) writes ~270 MB of JSON (~20 MB
#: compressed) and 60 MB of text forms
LARGE_PROGRAM_OPS = 50_000
#: the human-readable forms, written by default only for programs up to LARGE_PROGRAM_OPS
TEXT_FORMS = ("timetable.csv", "timetable.txt", "program.txt", "bundles.txt")


@attrs.frozen
class OutputChoice:
    """The files to write (names as written, ``.gz`` when compressed) and a note for the user
    when a default for large programs decided them."""

    names: tuple[str, ...] = attrs.field(converter=tuple)
    note: str = ""


def choose_outputs(
    outputs: Sequence[str] | None = None, *, compress: bool | None = None, ops: int = 0
) -> OutputChoice:
    """Resolve which files to write.

    Parameters
    ----------
    outputs
        File names from :data:`OUTPUT_FILES`, each optionally with ``.gz`` for gzip, or
        ``["all"]`` for every file; None for the default: every file, except that a program
        of more than :data:`LARGE_PROGRAM_OPS` ops gets no :data:`TEXT_FORMS`.
    compress
        True: gzip every JSON file; False: none unless named with ``.gz``; None (default):
        gzip the JSON files when the program has more than :data:`LARGE_PROGRAM_OPS` ops.
    ops
        The program's micro-op count (for the default).

    Raises
    ------
    InputError
        For an unknown or repeated file name, one line each.
    """
    bad = []
    chosen: list[str] = []
    large = ops > LARGE_PROGRAM_OPS
    if outputs is not None and list(outputs) == ["all"]:
        names: Sequence[str] = OUTPUT_FILES
    elif outputs is None:
        names = [n for n in OUTPUT_FILES if not (large and n in TEXT_FORMS)]
    else:
        names = outputs
    for name in names:
        base = name[:-3] if name.endswith(".gz") else name
        if base not in OUTPUT_FILES:
            bad.append(f"unknown output file '{name}' (files: {', '.join(OUTPUT_FILES)}, each "
                       "optionally with .gz)")
        elif any(c == base or c == base + ".gz" for c in chosen):
            bad.append(f"output file '{base}' named twice")
        else:
            chosen.append(name)
    if bad:
        raise InputError(bad)
    notes = []
    if outputs is None and large:
        notes.append(f"text forms ({', '.join(TEXT_FORMS)}) not written")
    if compress is None and outputs is None and large:
        compress = True
        notes.append("JSON files written gzip-compressed (.gz; every staticsched reader and "
                     "Perfetto open them)")
    note = ""
    if notes:
        note = (f"large program ({ops} micro-ops > {LARGE_PROGRAM_OPS}): {'; '.join(notes)}; "
                "choose with --outputs (--outputs all: every file) / --no-compress")
    if compress:
        chosen = [n + ".gz" if n.endswith(".json") else n for n in chosen]
    order = {n: k for k, n in enumerate(OUTPUT_FILES)}
    chosen.sort(key=lambda n: order[n[:-3] if n.endswith(".gz") else n])
    return OutputChoice(chosen, note)


def render_outputs(
    schedule: Schedule, program: Program, plan: SyncPlan, names: Sequence[str] = OUTPUT_FILES
) -> dict[str, bytes]:
    """The bytes of the files ``names`` (by name, in :data:`OUTPUT_FILES` order); a ``.gz``
    name is the gzip of that file (with no time stamp, so equal runs give equal bytes). The
    same bytes :func:`write_outputs` streams into the files."""
    return {name: b"".join(chunks()) for name, chunks in _streams(schedule, program, plan, names).items()}


def _streams(
    schedule: Schedule, program: Program | None, plan: SyncPlan, names: Sequence[str]
) -> dict[str, Callable[[], Iterator[bytes]]]:
    """Per file, a function giving its bytes in chunks (nothing is rendered before it is
    called; without a program, no file of :data:`PROGRAM_FILES` may be among ``names``)."""

    def built() -> Program:
        if program is None:
            raise ValueError("the program's files need the program")
        return program

    # modules are looked up at call time, so a test can replace one renderer with a failing one
    renderers: dict[str, Callable[[], Iterable[str]]] = {
        "timetable.json": lambda: timetable.iter_timetable_json(schedule, plan),
        "timetable.csv": lambda: timetable.iter_timetable_csv(schedule),
        "timetable.txt": lambda: timetable.iter_timetable_text(schedule, plan),
        "program.txt": lambda: program_text.iter_program_text(built()),
        "program.json": lambda: program_json.iter_program_json(built()),
        "bundles.txt": lambda: bundles.iter_bundles(built()),
        "trace.json": lambda: trace.iter_trace(schedule),
        "gantt.svg": lambda: (gantt.render_gantt(schedule),),
    }

    def stream(name: str) -> Callable[[], Iterator[bytes]]:
        if name.endswith(".gz"):
            return lambda: _gzip(_batched(map(_encode, renderers[name[:-3]]())))
        return lambda: _batched(map(_encode, renderers[name]()))

    return {name: stream(name) for name in names}


#: bytes gathered before one write or compress call: a renderer yields a line at a time
#: (~10^6 of them for a chip's program), and a zlib call or write per line cost seconds
BATCH_BYTES = 1 << 20


def _batched(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` joined into pieces of about :data:`BATCH_BYTES` (the same bytes in order;
    deflate's output does not depend on how its input is cut)."""
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size >= BATCH_BYTES:
            yield b"".join(parts)
            parts, size = [], 0
    if parts:
        yield b"".join(parts)


#: deflate level of the ``.gz`` files: level 1 deflates a chip's ~250 MB of JSON about 4x
#: faster than the default 6 (0.5 s against 2 s of the 4096^3 GEMM's writing) into files about
#: a quarter larger (17 MB against 14 MB)
GZIP_LEVEL = 1


def _gzip(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The gzip stream of ``chunks``: :data:`GZIP_LEVEL`, no file name and mtime 0 (so equal
    runs give equal bytes), the same bytes as ``gzip.compress(data, GZIP_LEVEL, mtime=0)`` of
    their join."""
    comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    for chunk in chunks:
        out = comp.compress(chunk)
        if out:
            yield out
    yield comp.flush()


def _encode(text: str | bytes) -> bytes:
    # the JSON forms escape non-ASCII; for the human files a lone surrogate in a user's name
    # must not abort the run
    return text if isinstance(text, bytes) else text.encode("utf-8", errors="backslashreplace")


def _check_extra(extra: Mapping[str, str | bytes]) -> None:
    bad = []
    for name in sorted(extra):
        if name in OUTPUT_FILES or name.removesuffix(".gz") in OUTPUT_FILES:
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
    outputs: Sequence[str] | OutputChoice | None = None,
    compress: bool | None = None,
    extra_files: Mapping[str, str | bytes] | None = None,
) -> list[Path]:
    """Write the output files into ``outdir`` atomically (see the module docstring).

    Parameters
    ----------
    outdir : path
        Created if missing (with its parents); existing files of the same names are replaced,
        other files are left alone.
    schedule, program, plan
        From :func:`staticsched.emit.finalize`.
    outputs, compress
        Which files, and whether JSON is gzip-compressed: see :func:`choose_outputs` (an
        :class:`OutputChoice` is used as it is).
    extra_files : mapping of file name to text or bytes, optional
        More files to write in the same atomic step (e.g. a verification report).

    Returns
    -------
    list of Path
        The files written in :data:`OUTPUT_FILES` order, then the extra files sorted by name.

    Raises
    ------
    InputError
        If ``outdir`` exists and is not a directory, a file name is unknown or not a plain
        name, or the files cannot be written (the message carries the system's reason).
    """
    return start_outputs(outdir, schedule, program, plan, outputs=outputs, compress=compress,
                         extra_files=extra_files).finish()


def start_outputs(
    outdir: str | Path,
    schedule: Schedule,
    program: Program | None,
    plan: SyncPlan,
    *,
    outputs: Sequence[str] | OutputChoice | None = None,
    compress: bool | None = None,
    extra_files: Mapping[str, str | bytes] | None = None,
    processes: int | None = None,
    nice: int = 0,
) -> PendingOutputs:
    """:func:`write_outputs`, started: a large program's files are rendered into the temporary
    directory by forked workers from now on, so that the caller can go on with other work (the
    CLI builds and verifies the program meanwhile); :meth:`PendingOutputs.finish` moves them
    into place.

    Parameters are those of :func:`write_outputs`, and

    program
        None when it is not built yet: the files that need it (:data:`PROGRAM_FILES`) start
        with :meth:`PendingOutputs.add_program`, the others now.
    processes
        Worker processes for a program of more than :data:`LARGE_PROGRAM_OPS` ops (default
        one per CPU but one). ``finish`` renders here the files no worker has started, and
        all of a smaller program's.
    nice
        Added to the workers' niceness: the CLI renders at 10 beside program building and the
        verifier, whose processes then keep the CPUs, and the files take what they leave.
    """
    outdir = Path(outdir)
    extra = dict(extra_files or {})
    _check_extra(extra)
    choice = outputs if isinstance(outputs, OutputChoice) else choose_outputs(
        outputs, compress=compress, ops=len(schedule.ops))
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"{outdir}: exists and is not a directory")
    names = [*choice.names, *sorted(extra)]
    later = [n for n in choice.names if program is None and _base(n) in PROGRAM_FILES]
    workers = _workers(schedule, processes)
    if workers and program is not None:
        # kept with the graph before the fork: the files' workers and then the summary
        # printed in this process all ask for them. Paused: the first collection after a
        # paused phase walks the whole heap (2-4 s on a 331K-op GEMM), for no garbage here
        with paused():
            gm_traffic(schedule.graph, schedule.hw)
            link_usage(schedule)
    files = _streams(schedule, program, plan, [n for n in choice.names if n not in later])
    for name in sorted(extra):
        files[name] = functools.partial(iter, (_encode(extra[name]),))
    try:
        with paused():
            pending = PendingOutputs(outdir, names)
            pending.later = (later, schedule, plan) if later else None
            pending.start(files, workers, nice)
            return pending
    except OSError as exc:
        raise _unwritable(outdir, exc) from None


#: the files that need the program (the others need the schedule and the sync plan only)
PROGRAM_FILES = ("program.txt", "program.json", "bundles.txt")


def _base(name: str) -> str:
    return name[:-3] if name.endswith(".gz") else name


def _workers(schedule: Schedule, processes: int | None) -> int:
    """Worker processes for a schedule's files: ``processes`` (default one per CPU but the one
    this process runs on: ``finish`` renders here the files no worker has started) for a large
    program, none (rendered by ``finish``) otherwise."""
    if len(schedule.ops) <= LARGE_PROGRAM_OPS:
        return 0
    return cpus() - 1 if processes is None else processes


#: the niceness a worker process has added to its own (os.nice adds on every call)
_NICED = 0


def _lower_priority(nice: int) -> None:
    """Raise this worker process's niceness by ``nice``, once."""
    global _NICED
    if nice > _NICED:
        with contextlib.suppress(OSError, AttributeError):  # not permitted, or no os.nice
            os.nice(nice - _NICED)
        _NICED = nice


def _unwritable(outdir: Path, exc: OSError) -> InputError:
    # a full disk or a read-only directory is the user's to fix: one line, no traceback
    return InputError(f"{outdir}: cannot write the output files: {exc}")


class PendingOutputs:
    """Output files being rendered into a temporary directory next to ``outdir``
    (:func:`start_outputs`); :meth:`finish` moves them into place, :meth:`close` drops them."""

    def __init__(self, outdir: Path, names: list[str]) -> None:
        self.outdir, self.names = outdir, names
        self.renderings: list[Mapped] = []
        #: the files still waiting for the program, with the schedule and plan they show
        self.later: tuple[list[str], Schedule, SyncPlan] | None = None
        outdir.parent.mkdir(parents=True, exist_ok=True)
        self.tmp: Path | None = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.partial-",
                                                      dir=outdir.parent))

    def start(self, files: dict[str, Callable[[], Iterator[bytes]]], processes: int, nice: int = 0) -> None:
        """Render ``files`` into the temporary directory: in ``processes`` forked workers from
        now on, their niceness raised by ``nice``, and here in :meth:`finish` the files no
        worker has started (all of them without workers)."""
        tmp = self.tmp
        if tmp is None:
            raise RuntimeError("PendingOutputs.start after finish or close")
        here = os.getpid()
        processes = min(max(0, processes), len(files))

        def write(name: str) -> None:
            if nice and os.getpid() != here:  # a worker's, never this process's
                _lower_priority(nice)
            _write_file(tmp / name, files[name]())
            (tmp / name).chmod(file_mode())

        try:
            # the workers take the files in this order, one at a time
            self.renderings.append(Mapped(write, list(files), processes))
        except BaseException:
            self.close()
            raise

    def add_program(self, program: Program, *, processes: int | None = None, nice: int = 0) -> None:
        """Start the files that waited for the program (:func:`start_outputs` without one);
        ``processes`` and ``nice`` as there."""
        if self.later is None:
            return
        names, schedule, plan = self.later
        self.later = None
        with paused():
            self.start(_streams(schedule, program, plan, names), _workers(schedule, processes), nice)

    def finish(self) -> list[Path]:
        """Wait for (or, without workers, do) the rendering and move the files into place; a
        worker's exception is raised here, before any move. The paths written, in order.

        Raises
        ------
        InputError
            When the files cannot be written (the message carries the system's reason).
        """
        outdir, tmp = self.outdir, self.tmp
        if tmp is None:
            raise RuntimeError("PendingOutputs.finish called twice or after close")
        if self.later is not None:
            self.close()
            raise RuntimeError("PendingOutputs.finish before add_program: the program's files are missing")
        try:
            with paused():
                for rendering in self.renderings:
                    rendering.get()
                self.renderings = []
                tmp.chmod(dir_mode())
                try:
                    # a missing (or empty) outdir appears complete, in one step
                    os.rename(tmp, outdir)
                except OSError:
                    outdir.mkdir(exist_ok=True)
                    for name in self.names:
                        os.replace(tmp / name, outdir / name)
        except OSError as exc:
            raise _unwritable(outdir, exc) from None
        finally:
            self.close()
        return [outdir / name for name in self.names]

    def close(self) -> None:
        """Stop the workers and remove the temporary directory (idempotent; after
        :meth:`finish`, only what is left of it)."""
        for rendering in self.renderings:
            rendering.close()
        self.renderings = []
        if self.tmp is not None:
            if self.tmp.exists():
                shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _write_file(path: Path, chunks: Iterable[bytes]) -> None:
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
