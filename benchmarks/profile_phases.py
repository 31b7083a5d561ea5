"""Where the time of a ``staticsched schedule`` run goes, phase by phase (a benchmark, not a
test): each phase of the CLI (lower, solve, plan sync, build program, verify, write) runs
under its own ``cProfile`` profiler, and the script prints, per phase, its wall seconds and
the functions with the most own time (the profiler's overhead inflates the phases' wall
seconds by 1.3-2x; the shares within a phase are what to read).

Run from the repository root::

    python benchmarks/profile_phases.py examples/matmul_gelu.json --hw seed-davinci
    python benchmarks/profile_phases.py examples/attention.json --hw seed-davinci --top 8 -- --time-limit 10

Arguments after ``--`` go to ``staticsched schedule`` as they are. Work done in forked worker
processes (the verifier's side checks and jittered replays on a big program, the solver's
lanes with ``--workers``) is not in the main process's profile: the table says how much of a
phase's wall time the profile saw (``seen``). ``docs/performance.md`` holds the summary of a
run with the command that measured it.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from staticsched import cli  # noqa: E402
from staticsched.progress import Progress  # noqa: E402


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name  # a builtin
    p = Path(path)
    try:
        p = p.relative_to(ROOT)
    except ValueError:
        p = Path(*p.parts[-2:])
    return f"{p}:{line} {name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--hw", default="seed-davinci")
    ap.add_argument("--top", type=int, default=6, help="functions listed per phase (6)")
    ap.add_argument("rest", nargs="*", help="more `staticsched schedule` options (after --)")
    args = ap.parse_args(argv)

    profiles: list[tuple[str, float, pstats.Stats]] = []
    real_phase = Progress.phase

    @contextlib.contextmanager
    def profiled(self: Progress, name: str, earlier: float = 0.0) -> Iterator[None]:
        prof = cProfile.Profile()
        t0 = time.monotonic()
        with real_phase(self, name, earlier):
            prof.enable()
            try:
                yield
            finally:
                prof.disable()
        # work started earlier, beside another phase, is that phase's profile: only the wall
        # time spent here is this phase's
        profiles.append((name, time.monotonic() - t0, pstats.Stats(prof, stream=io.StringIO())))

    Progress.phase = profiled  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        code = cli.main(["schedule", args.graph, "--hw", args.hw, "-o", str(Path(tmp) / "out"),
                         "--quiet", *args.rest])
    print()
    print(f"## `{' '.join(['staticsched schedule', args.graph, '--hw', args.hw, *args.rest])}`")
    print()
    print("| phase | wall s (profiled) | seen | top functions by own time (s) |")
    print("|---|---|---|---|")
    for name, wall, stats in profiles:
        raw = stats.stats  # type: ignore[attr-defined]
        own = sorted(((v[2], k) for k, v in raw.items()), reverse=True)[: args.top]
        seen = sum(v[2] for v in raw.values())
        tops = "; ".join(f"`{_where(k)}` {t:.1f}" for t, k in own)
        print(f"| {name} | {wall:.1f} | {seen / wall:.0%} | {tops} |")
    return code


if __name__ == "__main__":
    sys.exit(main())
