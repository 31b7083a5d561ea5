"""Atomic file writes: a failed or killed run never leaves a half-written file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from staticsched.errors import InputError


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def file_mode() -> int:
    """The mode a new file gets under the process umask (``0o666 & ~umask``): every file
    staticsched writes follows this one rule."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode a new directory gets under the process umask (``0o777 & ~umask``)."""
    return 0o777 & ~_umask()


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename.

    Raises
    ------
    InputError
        When the file cannot be written (a parent is a file, no permission, disk full), with
        one line naming the path and the system's reason.
    """
    path = Path(path)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{path}: cannot write: '{parent}' is a file, not a directory")
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, file_mode())  # mkstemp creates 0600; follow the umask like any file
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8 with ``\\n`` line ends."""
    return atomic_write_bytes(path, text.encode("utf-8"))
