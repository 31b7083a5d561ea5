"""Phase and progress reporting for long runs (the CLI's stderr, or any text stream).

Every phase (lower, solve, plan sync, build program, write, verify) says when it starts and
how long it took, and its duration is kept for the summary's phase table. Long phases report
their progress: on a terminal as a bar updated in place (``tqdm``: done/total, rate, ETA); on
anything else as plain lines without control characters, at most one per tenth of the work,
so logs stay readable. A quiet reporter prints nothing but still keeps the timings.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO


class Counter:
    """Progress of one long phase: ``update(n)`` adds ``n`` done units of ``total``."""

    def __init__(self, report: Progress, what: str, total: int, unit: str) -> None:
        self._report = report
        self._what = what
        self.total = max(0, int(total))
        self.unit = unit
        self.done = 0
        self._t0 = time.monotonic()
        self._next_line = self.total / 10
        self._bar = None
        if report.enabled and report.tty and self.total:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=f"  {what}", unit=unit, file=report.stream,
                             leave=False, dynamic_ncols=True, mininterval=0.2)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._report.enabled and self.total and self.done >= self._next_line:
            while self._next_line <= self.done:
                self._next_line += self.total / 10
            rate = self.done / max(time.monotonic() - self._t0, 1e-9)
            self._report.line(f"  {self._what}: {self.done}/{self.total} {self.unit} "
                              f"({100 * self.done / self.total:.0f}%, {rate:.0f} {self.unit}/s)")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Progress:
    """Reports phases and progress to ``stream``; ``enabled=False`` keeps only the timings.

    Parameters
    ----------
    stream
        Where lines go (default ``sys.stderr``).
    enabled
        False for ``--quiet``: nothing is printed.
    tty
        Whether ``stream`` is a terminal (bars in place) or not (plain lines); by default
        ``stream.isatty()``.
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True,
                 tty: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        #: (phase, seconds) in the order the phases ran
        self.timings: list[tuple[str, float]] = []

    def line(self, text: str) -> None:
        """One plain line (solver improvements, notes)."""
        if self.enabled:
            print(text, file=self.stream, flush=True)

    @contextmanager
    def phase(self, name: str, earlier: float = 0.0) -> Iterator[None]:
        """Announce ``name``, time it, and announce how long it took (plus ``earlier``
        seconds spent on it before: starting work that ran beside another phase)."""
        self.line(f"[{name}] ...")
        t0 = time.monotonic()
        try:
            yield
        finally:
            dt = time.monotonic() - t0 + earlier
            self.timings.append((name, dt))
        self.line(f"[{name}] done in {dt:.2f} s")

    @contextmanager
    def counter(self, what: str, total: int, unit: str = "op") -> Iterator[Counter]:
        """A :class:`Counter` for a long phase; the bar is removed when the block ends."""
        c = Counter(self, what, total, unit)
        try:
            yield c
        finally:
            c.close()


#: a reporter that prints nothing (the API's default)
def silent() -> Progress:
    return Progress(enabled=False, tty=False)


def as_progress(progress: Progress | Callable[[str], None] | None) -> Progress:
    """A :class:`Progress` from what an API caller passed: a reporter, a line callback, or
    None (silent)."""
    if isinstance(progress, Progress):
        return progress
    if progress is None:
        return silent()
    p = Progress(_CallbackStream(progress), tty=False)  # type: ignore[arg-type]
    return p


class _CallbackStream:
    """A text stream that hands each printed line to a callback."""

    def __init__(self, fn: Callable[[str], None]) -> None:
        self._fn = fn
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self._fn(line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
