"""What each command of the command line does, once :mod:`staticsched.cli.args` has parsed it.

:data:`COMMANDS` maps a command's name to its implementation, which takes the parsed
arguments and returns the exit code (raising :class:`~staticsched.errors.StaticschedError` for
bad input, which :func:`staticsched.cli.main` turns into error lines).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from staticsched.cli.args import EXIT_OK, EXIT_VERIFY_FAILED
from staticsched.errors import StaticschedError

#: niceness added to the worker that renders a large program's files beside the verifier
RENDER_NICE = 10

#: what the console script leaves for the OS to reclaim (None: free it as usual, as when a
#: test calls main): a chip's compiled program is ~10^7 objects, whose freeing one by one
#: on the way out cost 0.6 s after everything was written and printed
_LEAVE_TO_EXIT: list | None = None


def leave_to_exit() -> list:
    """From now on, keep every compiled result for the OS to reclaim at exit.

    Returns
    -------
    list
        The results kept (the console script ends with ``os._exit`` when it is not empty).
    """
    global _LEAVE_TO_EXIT
    _LEAVE_TO_EXIT = []
    return _LEAVE_TO_EXIT



def _cmd_hw(args: argparse.Namespace) -> int:
    from staticsched.hwtable import hardware_table
    from staticsched.model.hardware_toml import list_presets, load_hardware

    if args.hw_cmd == "list":
        for name in list_presets():
            hw = load_hardware(name)
            print(f"{name:<22} {hw.cores:>3} cores  {hw.description}")
        return EXIT_OK
    print("\n".join(hardware_table(load_hardware(args.name))))
    return EXIT_OK


def _budget(args: argparse.Namespace) -> int | None:
    from staticsched.options import DEFAULT_OP_BUDGET

    if args.op_budget is None:
        return DEFAULT_OP_BUDGET
    if args.op_budget < 1:
        raise StaticschedError(f"--op-budget must be >= 1, got {args.op_budget}")
    return args.op_budget


def _cmd_lower(args: argparse.Namespace) -> int:
    from staticsched._atomic import atomic_write_text
    from staticsched.api import as_opgraph
    from staticsched.model.hardware_toml import load_hardware
    from staticsched.model.opgraph import dumps_opgraph

    hw = load_hardware(args.hw)
    og = as_opgraph(args.graph, hw, op_budget=_budget(args))
    atomic_write_text(args.output, dumps_opgraph(og))
    cores = len(og.cores)
    print(f"wrote {args.output}: {len(og.ops)} ops, {len(og.items)} items on {cores} core(s)")
    return EXIT_OK


def _outputs(args: argparse.Namespace, ops: int):
    from staticsched.emit import choose_outputs

    names = None
    if args.outputs is not None:
        names = [n.strip() for n in args.outputs.split(",") if n.strip()]
        if not names:
            raise StaticschedError("--outputs names no file")
    return choose_outputs(names, compress=args.compress, ops=ops)


def _cmd_schedule(args: argparse.Namespace) -> int:
    from staticsched.api import compile_graph
    from staticsched.model.hardware_toml import load_hardware

    rep = _start(args)
    hw = load_hardware(args.hw)
    graph, extra, more = args.graph, {}, []
    if str(args.graph).lower().endswith(".onnx"):
        from staticsched.onnx.tool import import_for_schedule

        with rep.phase("import"):
            imported = import_for_schedule(args.graph, hw, fusion=args.fusion, budget=_budget(args),
                                           mapping=args.mapping, weights_nz=args.weights_nz,
                                           dtype=args.dtype, layouts=args.layouts)
        graph, extra, more = imported.graph, imported.files(), imported.lines()
    early: list = []
    files: list = []
    try:
        res = compile_graph(
            graph, hw, time_limit=args.time_limit, seed=args.seed, workers=args.workers,
            method=args.method, mode=args.mode, op_budget=_budget(args), progress=rep,
            wall_clock=args.wall_clock, link_policy=args.link_policy, gap=args.gap,
            on_solved=None if args.no_verify else functools.partial(_early_reference, args, early),
            on_final=functools.partial(_early_files, args, extra, files),
        )
        if args.dispatch:
            more = [*more, *_dispatch_lines(graph, hw, args, rep)]

        def write(choice, processes, nice=0):
            if files:
                # the files that need no program have been rendering since it was timed
                pending = files.pop()
                pending.add_program(res.program, processes=processes, nice=nice)
                return pending
            return res.start_write(args.outdir, outputs=choice, extra_files=extra, processes=processes,
                                   nice=nice)

        return _finish(args, hw, res, rep, write, more, reference=early[0] if early else None)
    finally:
        for ref in early:
            ref.close()
        for pending in files:
            pending.close()


def _early_reference(args: argparse.Namespace, into: list, graph) -> None:
    """Start the verifier's NumPy reference of a large graph's source now, in a child process
    beside sync planning and program building (which use one CPU), instead of beside the
    verifier's own first checks (:class:`staticsched.verify.reference.Reference`)."""
    from staticsched.emit.files import LARGE_PROGRAM_OPS
    from staticsched.verify.reference import Reference

    if graph.source and len(graph.ops) > LARGE_PROGRAM_OPS:
        into.append(Reference(graph.source, args.seed, beside=True))


def _early_files(args: argparse.Namespace, extra: dict, into: list, final, plan) -> None:
    """Start rendering a large program's files that need no program (the timetable, the trace,
    the Gantt chart) as soon as its schedule and sync plan are final, in one worker beside
    program building and then the verifier, at a lower priority
    (:func:`staticsched.emit.start_outputs` without the program)."""
    from staticsched.emit.files import LARGE_PROGRAM_OPS, start_outputs

    if len(final.ops) > LARGE_PROGRAM_OPS:
        choice = _outputs(args, len(final.ops))
        into.append(start_outputs(args.outdir, final, None, plan, outputs=choice, extra_files=extra,
                                  processes=1, nice=RENDER_NICE))


def _dispatch_lines(graph, hw, args: argparse.Namespace, rep) -> list[str]:
    from staticsched.explore.dispatch import compare_dispatch, dispatch_table
    from staticsched.frontend.taskgraph import TaskGraph, load_graph

    tg = load_graph(graph) if not isinstance(graph, TaskGraph) else graph
    if not isinstance(tg, TaskGraph):
        raise StaticschedError("--dispatch needs a TaskGraph or an ONNX model (an OpGraph has no tasks)")
    with rep.phase("dispatch"):
        d = compare_dispatch(tg, hw, method="list", name=Path(str(args.graph)).name, seed=args.seed,
                             op_budget=_budget(args))
    return ["dispatch     : list-method makespans, µs", *(f"  {line}" for line in dispatch_table([d]))]


def _cmd_import(args: argparse.Namespace) -> int:
    from staticsched.model.hardware_toml import load_hardware
    from staticsched.onnx.tool import import_for_schedule, write_graph

    hw = load_hardware(args.hw)
    imported = import_for_schedule(args.model, hw, fusion=args.fusion, budget=None, mapping=args.mapping,
                                   weights_nz=args.weights_nz, dtype=args.dtype, layouts=args.layouts)
    paths = write_graph(imported, args.output)
    for line in imported.lines():
        print(line)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    return EXIT_OK


def _start(args: argparse.Namespace):
    """Check the output options before any work; the progress reporter."""
    from staticsched.progress import Progress

    if args.jitter < 0:
        raise StaticschedError(f"--jitter must be >= 0, got {args.jitter}")
    if args.outputs is not None:
        _outputs(args, 0)  # a bad --outputs is bad input: say so before any work
    return Progress(sys.stderr, enabled=not args.quiet)


def _finish(args: argparse.Namespace, hw, res, rep, write, more: Sequence[str] = (),
            reference=None) -> int:
    """Verify the program (unless --no-verify), write the files (``write(choice, processes,
    nice)`` starts them: :meth:`staticsched.Compiled.start_write`), print the summary (then
    ``more`` lines); the exit code. ``reference``: the verifier's NumPy reference, already
    started."""
    from staticsched.emit import phase_table, summary_lines
    from staticsched.model.links import link_usage
    from staticsched.model.traffic import gm_traffic

    choice = _outputs(args, len(res.schedule.ops))
    if _LEAVE_TO_EXIT is not None:
        _LEAVE_TO_EXIT.append(res)
    report = None
    pending = None
    started = 0.0
    try:
        if not args.no_verify:
            from staticsched.verify import verify

            # the files do not depend on the verdict: a large program's render in one worker
            # beside the verifier, at a lower priority (the verifier's processes keep the CPUs,
            # the files take what they leave), and move into place after it
            t0 = time.monotonic()
            pending = write(choice, 1, RENDER_NICE)
            started = time.monotonic() - t0
            with rep.phase("verify"):
                # a timed program has no flags: it is correct only for exact durations, so
                # jittered replays would (rightly) report races; they mean something in flags mode
                jitter = args.jitter if args.mode == "flags" else 0
                report = verify(res.program, hw, jitter=jitter, seed=args.seed,
                                numeric=bool(res.program.source), reference=reference)
        with rep.phase("write", earlier=started):
            if pending is None:
                pending = write(choice, None)
            paths = pending.finish()
            # the GM traffic and link usage the summary prints (the files' workers computed
            # their own): here, so that the phases account for them
            gm_traffic(res.schedule.graph, res.schedule.hw)
            link_usage(res.schedule)
    finally:
        if pending is not None:
            pending.close()
    for line in [*summary_lines(res.schedule, res.plan), *more]:
        print(line)
    if report is None:
        print("verification : skipped (--no-verify)")
    else:
        verdict = "clean" if report.ok else f"FAILED ({len(report.findings)} findings)"
        print(f"verification : {verdict}" + (f", {args.jitter} jittered replays"
                                             if args.mode == "flags" and args.jitter else ""))
        if not report.ok:
            print(report.text())
    print(f"wrote {len(paths)} files to {args.outdir}: {', '.join(p.name for p in paths)}")
    if choice.note:
        print(f"note         : {choice.note}")
    for line in phase_table(rep.timings):
        print(line)
    # the gap section last: where the time goes between the bound and the makespan
    for line in res.explain().lines(full=getattr(args, "explain", False)):
        print(line)
    return EXIT_OK if report is None or report.ok else EXIT_VERIFY_FAILED


def _cmd_tune(args: argparse.Namespace) -> int:
    from staticsched.api import tune
    from staticsched.model.hardware_toml import load_hardware

    bad = [f"{flag} must be >= {least}, got {value}" for flag, value, least in (
        ("--max-candidates", args.max_candidates, 1), ("--polish", args.polish, 0), ("--jobs", args.jobs, 1))
        if value < least]
    if bad:
        raise StaticschedError(bad)
    rep = _start(args)
    hw = load_hardware(args.hw)
    with rep.phase("tune"):
        tuned = tune(
            args.graph, hw, time_limit=args.time_limit, seed=args.seed, workers=args.workers,
            method=args.method, mode=args.mode, op_budget=_budget(args), wall_clock=args.wall_clock,
            link_policy=args.link_policy, gap=args.gap, max_candidates=args.max_candidates,
            polish=args.polish, jobs=args.jobs, ray=args.ray, progress=rep, steps=args.steps,
            split_k=args.split_k,
        )
    return _finish(args, hw, tuned.best, rep,
                   lambda choice, processes, nice=0: tuned.start_write(args.outdir, outputs=choice,
                                                                       processes=processes, nice=nice),
                   tuned.summary_lines())


def _cmd_verify(args: argparse.Namespace) -> int:
    from staticsched.model.hardware_toml import load_hardware
    from staticsched.verify import verify

    if args.jitter < 0:
        raise StaticschedError(f"--jitter must be >= 0, got {args.jitter}")
    hw = load_hardware(args.hw)
    t0 = time.perf_counter()
    report = verify(args.program, hw, jitter=args.jitter, seed=args.seed, numeric=args.numeric,
                    tolerance=args.tolerance)
    print(report.text())
    print(f"verified in {time.perf_counter() - t0:.2f} s")
    return EXIT_OK if report.ok else EXIT_VERIFY_FAILED


def _cmd_sweep(args: argparse.Namespace) -> int:
    from staticsched.explore import load_sweep, run_sweep
    from staticsched.progress import Progress

    if args.jobs < 1:
        raise StaticschedError(f"--jobs must be >= 1, got {args.jobs}")
    spec = load_sweep(args.spec)
    rep = Progress(sys.stderr, enabled=not args.quiet)
    rep.line(f"[sweep] {len(spec.points)} points: {len(spec.graphs)} graph(s) x "
             f"{len(spec.points) // max(1, len(spec.graphs))} hardware variant(s) over "
             f"{', '.join(spec.params) or 'no parameter'}")
    t0 = time.perf_counter()
    results = run_sweep(spec, args.outdir, jobs=args.jobs, ray_address=args.ray, progress=rep)
    failed = sum(1 for r in results.values() if r["row"].get("status") == "error")
    print(f"{args.outdir}: {len(results)} points ({failed} failed) in "
          f"{time.perf_counter() - t0:.1f} s: results.csv, timings.csv, plots")
    return EXIT_OK


def _cmd_examples(args: argparse.Namespace) -> int:
    from staticsched.shipped import copy_examples

    written = copy_examples(args.dir)
    print(f"{args.dir}: {len(written)} example files ({', '.join(p.name for p in written)})")
    return EXIT_OK



COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "hw": _cmd_hw,
    "lower": _cmd_lower,
    "schedule": _cmd_schedule,
    "verify": _cmd_verify,
    "import": _cmd_import,
    "examples": _cmd_examples,
    "sweep": _cmd_sweep,
    "tune": _cmd_tune,
}
