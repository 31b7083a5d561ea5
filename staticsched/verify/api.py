"""``verify(program, hw)``: run every check on a program and collect the findings in a Report.

The verifier reads only the program (or its file) and the hardware model. It
never imports the solver or the sync planner: a verifier that trusts the
producer proves nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from staticsched._gc import paused
from staticsched._workers import PARALLEL_MIN_INSTRUCTIONS, default_processes
from staticsched.errors import InputError
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.program import Program
from staticsched.verify import numeric as numreplay
from staticsched.verify.compare import DEFAULT_TOLERANCE, compare, default_tolerance, written_tensors
from staticsched.verify.conformance import conformance_findings
from staticsched.verify.cost import cost_findings
from staticsched.verify.dataflow import dataflow_findings, seen_write_findings, tensor_space_findings
from staticsched.verify.flags import double_set_findings, static_flag_findings
from staticsched.verify.fluid import shared_transfers
from staticsched.verify.hb import flags_pass, race_findings, timed_pass
from staticsched.verify.index import OP, SET, WAIT, ProgramIndex
from staticsched.verify.jitter import collect as jitter_collect
from staticsched.verify.jitter import start as jitter_start
from staticsched.verify.layout import layout_findings
from staticsched.verify.links import link_findings
from staticsched.verify.memory import (
    live_range_findings,
    placement_findings,
    uninitialized_read_findings,
)
from staticsched.verify.reference import Reference
from staticsched.verify.replay import Replay, simulate
from staticsched.verify.report import CHECKS, Finding, Report

T = TypeVar("T")


class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def run(self, name: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0


def _load_program(path: str | Path) -> Program:
    # the reader module only: the rest of staticsched.emit (the sync planner) stays unimported
    from staticsched.formats.load import load_program

    return load_program(path)


def verify(
    program: Program | str | Path,
    hw: Hardware | str | Path,
    *,
    jitter: int = 0,
    seed: int = 0,
    numeric: bool = False,
    tolerance: float | None = None,
    reference: Reference | None = None,
) -> Report:
    """Check a program for races, flag misuse, deadlocks, memory errors, timetable conformance,
    timing robustness and (optionally) numbers.

    Parameters
    ----------
    program
        A :class:`Program`, or the path of a program file (text or JSON, read with
        ``staticsched.formats.load_program``).
    hw
        The hardware model, a preset name or a TOML path.
    jitter
        Number of replays with seeded random durations (0.5x-3x) to run. They check what
        timing can change (deadlock, double sets, counter capacity, conformance; in a timed
        program races and the writes reads see); the numbers are replayed once, on the nominal
        timing, as a race-free program computes the same values under every timing
        (docs/verification.md, "Numbers under jitter").
    seed
        Seeds the jitter durations and the numeric inputs.
    numeric
        Replay the data with NumPy and compare every written GM tensor against the reference
        of the program's source TaskGraph.
    tolerance
        Max element error allowed by the numeric comparison (default: by each compared
        tensor's dtype, :data:`staticsched.verify.compare.DEFAULT_TOLERANCES`; 2e-2 for fp16).
    reference
        The numeric replay's inputs and NumPy reference, already under way
        (:class:`staticsched.verify.reference.Reference`: the CLI starts it beside sync
        planning). Used only when its source and seed are the program's and ``seed``; closed
        here either way.

    Returns
    -------
    Report
        ``ok`` when no check found anything; otherwise every finding, grouped by check.

    Raises
    ------
    ProgramError
        When a program file cannot be parsed.
    InputError
        For bad arguments (negative ``jitter``, non-positive ``tolerance``) or a bad hardware
        model. Problems *inside* a well-formed program are findings, not exceptions.
    """
    _check_args(jitter, seed, tolerance)
    tol = None if tolerance is None else float(tolerance)
    hw = load_hardware(hw)
    if isinstance(program, str | Path):
        program = _load_program(program)
    if not isinstance(program, Program):
        raise InputError(f"verify: expected a Program or a path, got {type(program).__name__}")
    # the checks allocate ~10^7 acyclic objects on a chip; the cycle collector would walk all
    # of them over and over (a third of the run time), and forked jitter workers would copy
    # every page it touches
    with paused():
        return _verify(program, hw, jitter, seed, numeric, tol, reference)


def _verify(program: Program, hw: Hardware, jitter: int, seed: int, numeric: bool,
            tol: float | None, given: Reference | None) -> Report:

    clock = _Timer()
    found: dict[str, list[Finding]] = {c: [] for c in CHECKS}
    # the NumPy reference needs nothing but the program's source: a big program's is computed
    # in a child process beside the index and the replay (staticsched.verify.reference), unless
    # the caller started it earlier
    reference: Reference | None = None
    if numeric and program.source:
        if given is not None and given.source == program.source and given.seed == seed:
            reference, given = given, None
        else:
            size = sum(len(st.instrs) for st in program.streams)
            reference = Reference(program.source, seed, beside=size >= PARALLEL_MIN_INSTRUCTIONS)
    if given is not None:
        given.close()
    try:
        return _checks(program, hw, jitter, seed, numeric, tol, clock, found, reference)
    finally:
        if reference is not None:
            reference.close()


def _checks(program: Program, hw: Hardware, jitter: int, seed: int, numeric: bool, tol: float | None,
            clock: _Timer, found: dict[str, list[Finding]], reference: Reference | None) -> Report:
    ix = clock.run("index", ProgramIndex, program, hw)
    found["input"].extend(ix.problems)
    # the jittered replays of a timed program need nothing but the index: start them now, in
    # worker processes for a big program, and collect them at the end; a flags program's start
    # after the happens-before pass (a statically paired program keeping the reuse rule replays
    # along the nominal issue order, fast)
    early = bool(jitter) and ix.timed
    pending = clock.run("jitter", jitter_start, ix, jitter, seed) if early else None
    started: tuple[numreplay.Pending, dict[str, np.ndarray]] | None = None
    try:
        # a flags program's transfers share the links as the hardware does (verify.fluid)
        shared = clock.run("replay", shared_transfers, ix)
        rep = clock.run("replay", simulate, ix, shared=shared)
        double_sets = double_set_findings(ix, rep.double_sets)
        found["deadlock"].extend(_deadlock_findings(ix, rep))
        # the numbers are replayed once, on the nominal replay: a program without races computes
        # the same values under every timing (docs/verification.md, "Numbers under jitter"); a
        # big program's half in a worker from now on, beside the checks below
        numbers: dict[str, Any] = {}
        if numeric:
            started = clock.run("numeric", _numeric_start, ix, rep, reference, found, numbers)

        reuse: list[Finding] = []
        if ix.timed:
            det, df, sw = clock.run("races", timed_pass, ix, rep)
        else:
            det, reuse, df, sw = clock.run("races", flags_pass, ix, rep)
            if jitter:
                kw = {"nominal": rep, "reuse_rule_kept": not reuse}
                pending = clock.run("jitter", jitter_start, ix, jitter, seed, **kw)
        found["race"].extend(race_findings(ix, det, rep))
        found["dataflow"].extend(dataflow_findings(ix, df, rep))
        for f in seen_write_findings(ix, sw, rep):
            found[f.check].append(f)
        memory = [
            *clock.run("memory", live_range_findings, ix, rep),
            *clock.run("memory", uninitialized_read_findings, ix, rep),
        ]
        found["conformance"].extend(clock.run("conformance", conformance_findings, ix, rep))
        # the checks that read nothing but the index, in this process: a second of work on a
        # chip, where a forked worker spent more on copying the pages its reads touch
        checks = _index_checks(ix)
        found["link"].extend(clock.run("links", link_findings, ix, rep))
        for name, seconds in checks["timings"]:
            clock.timings[name] = clock.timings.get(name, 0.0) + seconds
        found["flag"].extend([*checks["flag"], *double_sets, *reuse])
        found["dataflow"].extend(checks["dataflow"])
        found["layout"].extend(checks["layout"])
        found["cost"].extend(checks["cost"])
        found["memory"].extend([*checks["memory"], *memory])

        stats: dict[str, Any] = _counts(ix, rep)
        if ix.multi_written:
            stats["intended_writes"] = (
                "checked" if ix.records_sees
                else "not checked: the program does not record which write a read must see "
                     "(written before that field existed)")
        stats.update(numbers)
        if started is not None:
            clock.run("numeric", _numeric_finish, ix, rep, started, tol, found, stats)
        elif not numeric:
            stats["numeric"] = "not requested"
        if pending is not None:
            known = (frozenset(det.races), frozenset(df.unsatisfied))
            found["jitter"].extend(clock.run("jitter", jitter_collect, pending, ix, rep, *known))
    finally:
        if pending is not None:
            pending.close()
        if started is not None:
            started[0].close()
    stats["jitter_replays"] = jitter
    findings = [f for c in CHECKS for f in found[c]]
    return Report(findings, stats, clock.timings)


def _index_checks(ix: ProgramIndex) -> dict[str, Any]:
    """The checks that need nothing but the index: static flags, tensor spaces, cost and
    extents, placements (findings per check, and the seconds each took)."""
    clock = _Timer()
    flags = clock.run("flags", static_flag_findings, ix)
    spaces = clock.run("dataflow", tensor_space_findings, ix)
    cost, extents = clock.run("cost", cost_findings, ix)
    placement = clock.run("memory", placement_findings, ix)
    layout = clock.run("layout", layout_findings, ix)
    return {
        "flag": flags,
        "dataflow": spaces,
        "layout": layout,
        "cost": cost,
        "memory": [*extents, *placement],
        "timings": sorted(clock.timings.items()),
    }


def _check_args(jitter: Any, seed: Any, tolerance: Any) -> None:
    problems = []
    if isinstance(jitter, bool) or not isinstance(jitter, int) or jitter < 0:
        problems.append(f"verify: jitter must be an integer >= 0, got {jitter!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(f"verify: seed must be an integer >= 0, got {seed!r}")
    if tolerance is not None and (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not math.isfinite(tolerance)
        or tolerance <= 0
    ):
        problems.append(f"verify: tolerance must be a finite number > 0, got {tolerance!r}")
    if problems:
        raise InputError(problems)


def _deadlock_findings(ix: ProgramIndex, rep: Replay) -> list[Finding]:
    out = []
    for st in rep.stuck:
        g = st.involved[0] if st.involved else st.released
        out.append(
            Finding(
                "deadlock",
                "hb_cycle" if st.cyclic else "stuck",
                st.chain,
                ops=tuple(ix.op_label(x) for x in st.involved),
                core=ix.core_of(g),
                pipes=tuple(dict.fromkeys(ix.unit_of(x) for x in st.involved)),
                cycle=st.time,
            )
        )
    hidden = rep.stuck_count - len(rep.stuck)
    if hidden > 0:
        out.append(
            Finding(
                "deadlock",
                "stuck",
                f"{hidden} further stuck states after forcing waits open are not listed",
            )
        )
    return out


def _counts(ix: ProgramIndex, rep: Replay) -> dict[str, Any]:
    roles = ix.role
    return {
        "mode": ix.program.mode,
        "cores": len({st.core for st in ix.streams}),
        "streams": len(ix.streams),
        "instructions": ix.n,
        "micro_ops": sum(1 for r in roles if r == OP),
        "sets": sum(1 for r in roles if r == SET),
        "waits": sum(1 for r in roles if r == WAIT),
        "items": len(ix.items),
        "replay_makespan": rep.makespan,
        "program_makespan": ix.program.makespan,
    }


def _numeric_start(
    ix: ProgramIndex,
    rep: Replay,
    reference: Reference | None,
    found: dict[str, list[Finding]],
    stats: dict[str, Any],
) -> tuple[numreplay.Pending, dict[str, np.ndarray]] | None:
    """Start the numeric replay of the nominal run (:func:`staticsched.verify.numeric.start`),
    with the reference it is to be compared to; None, with the reason in ``found`` and
    ``stats``, when it cannot run. ``reference`` computes the inputs and the reference (None
    without a source)."""
    if reference is None:
        stats["numeric"] = "not applicable (program has no source TaskGraph)"
        found["input"].append(
            Finding(
                "input",
                "numeric_not_applicable",
                "numeric replay was requested but the program carries no source TaskGraph "
                "(programs scheduled from an OpGraph have none)",
            )
        )
        return None
    if ix.problems:
        stats["numeric"] = "not run (input findings)"
        return None
    blockers = numreplay.replayable(ix)
    if blockers:
        stats["numeric"] = "not run (untyped items)"
        found["numeric"].extend(blockers)
        return None
    # a big program's replay runs in a worker beside the checks below (numreplay.start); how,
    # decided first, while the reference's child may still be at work
    processes = default_processes(ix.n, 1)
    ordered = numreplay.order(ix, rep, processes)
    prepared = reference.get()
    if isinstance(prepared, Finding):
        stats["numeric"] = "not run (bad source)"
        found["input"].append(prepared)
        return None
    inputs, ref = prepared
    return numreplay.start(ix, rep, inputs, processes, ordered), ref


def _numeric_finish(
    ix: ProgramIndex,
    rep: Replay,
    started: tuple[numreplay.Pending, dict[str, np.ndarray]],
    tolerance: float | None,
    found: dict[str, list[Finding]],
    stats: dict[str, Any],
) -> None:
    """Finish the numeric replay and compare it against the reference: its findings into
    ``found``, its verdict into ``stats``. Without a ``tolerance`` each tensor is compared with
    its dtype's (:func:`~staticsched.verify.compare.default_tolerance`); ``numeric_tolerance``
    is the loosest one applied."""
    pending, ref = started
    gm, errors = pending.finish()
    found["numeric"].extend(errors)
    worst = 0.0
    used: list[float] = []
    for name in written_tensors(ix):
        if name not in ref:
            found["numeric"].append(
                Finding(
                    "numeric",
                    "no_reference",
                    f"tensor '{name}' is written but the reference has no such tensor",
                )
            )
            continue
        tol = default_tolerance(ix.tensors[name].dtype) if tolerance is None else tolerance
        used.append(tol)
        err, f = compare(ix, rep, name, gm[name], np.asarray(ref[name]), tol)
        worst = max(worst, err)
        if f is not None:
            found["numeric"].append(f)
    for name in sorted(set(ref) - set(written_tensors(ix))):
        found["numeric"].append(
            Finding("numeric", "missing_output", f"reference tensor '{name}' is never written by the program")
        )
    stats["numeric"] = "ok" if not found["numeric"] else "mismatch"
    stats["numeric_max_error"] = float(f"{worst:.6g}") if math.isfinite(worst) else "inf"
    stats["numeric_tolerance"] = max(used, default=DEFAULT_TOLERANCE if tolerance is None
                                     else tolerance)
