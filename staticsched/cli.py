"""Command line: ``staticsched schedule|tune|verify|lower|sweep|hw|examples``.

Exit codes: 0 success, 1 a verification failed, 2 bad input (one line per problem on
stderr, no traceback, no output file), 3 an internal error (a bug: rerun with
``STATICSCHED_DEBUG=1`` for the traceback), 130 interrupted (Ctrl-C; no output file).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from staticsched.errors import StaticschedError
from staticsched.options import DEFAULT_GAP, LINK_POLICIES, METHODS, MODES

EXIT_OK, EXIT_VERIFY_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: jittered replays when verifying, for ``schedule`` and ``verify`` alike
DEFAULT_JITTER = 3

_TIME_LIMIT_HELP = (
    "seconds granted to the search (default 60): it bounds the CP-SAT search (whole models and "
    "LNS windows), not lowering, list scheduling, sync planning, writing or verification. "
    "Unless proven optimal earlier, the search runs for most of it, bounded by deterministic "
    "work calibrated per model family so that reruns give identical files; on a machine far "
    "slower or busier than the calibration a wall-clock safety net stops it at 3 x S + 30 s"
)
_METHOD_HELP = (
    "cpsat (default): the list schedule improved by CP-SAT (whole model, or windows on large "
    "cores); list: the list scheduler alone (fast, a heuristic)"
)
_MODE_HELP = (
    "flags (default): per-pipe streams synchronised by SET/WAIT flags, correct for any "
    "durations; timed: no flags, every instruction at its exact issue cycle (Groq style), "
    "correct only when every duration is exact"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage + message, exits 2
        self.print_usage(sys.stderr)
        print(f"staticsched: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _version() -> str:
    from staticsched import __version__

    return f"staticsched {__version__}"


def _solver_options(p: argparse.ArgumentParser, *, time_limit: float, time_help: str = "") -> None:
    """The options every scheduling command shares (schedule, tune)."""
    p.add_argument("--time-limit", type=float, default=time_limit, metavar="S",
                   help=time_help or _TIME_LIMIT_HELP)
    p.add_argument("--seed", type=int, default=0, help="search and jitter seed (0)")
    p.add_argument("--workers", type=int, default=1,
                   help="CP-SAT worker threads per problem (deterministic interleaved search) "
                   "and processes for distinct per-core problems (1)")
    p.add_argument("--wall-clock", action="store_true",
                   help="search until --time-limit on the wall clock with the fastest parallel "
                   "search; the result is not reproducible and says so")
    p.add_argument("--method", choices=METHODS, default="cpsat", help=_METHOD_HELP)
    p.add_argument("--mode", choices=MODES, default="flags", help=_MODE_HELP)
    p.add_argument("--link-policy", choices=LINK_POLICIES, default="auto",
                   help="how cores share a link they could overload: 'auto' solves them as one "
                   "problem unless an equal split provably costs nothing, 'split' always "
                   "splits it equally (auto)")
    p.add_argument("--op-budget", type=int, default=None, help="refuse larger lowerings")
    p.add_argument("--gap", type=float, default=DEFAULT_GAP, metavar="G",
                   help="stop the search once the makespan is proven within relative gap G of "
                   "the lower bound, (makespan - bound) / makespan <= G; deterministic; 0 "
                   f"searches until the time limit or a proof ({DEFAULT_GAP})")


def _output_options(p: argparse.ArgumentParser) -> None:
    """Which files to write, verification and quiet: schedule and tune."""
    p.add_argument("--outputs", metavar="LIST", default=None,
                   help="comma-separated files to write, or 'all' (timetable.json, "
                   "timetable.csv, timetable.txt, program.txt, program.json, bundles.txt, "
                   "trace.json, gantt.svg); add .gz to a name for gzip (default: all, but "
                   "above 50,000 micro-ops no text forms: .csv, .txt)")
    comp = p.add_mutually_exclusive_group()
    comp.add_argument("--compress", dest="compress", action="store_true", default=None,
                      help="gzip every JSON file (default: only for programs over 50,000 ops)")
    comp.add_argument("--no-compress", dest="compress", action="store_false",
                      help="never gzip by default")
    p.add_argument("--no-verify", action="store_true", help="skip verifying the program")
    p.add_argument("--jitter", type=int, default=DEFAULT_JITTER,
                   help=f"jittered replays when verifying ({DEFAULT_JITTER}; flags mode only: "
                   "a timed program is correct only at exact durations)")
    p.add_argument("-q", "--quiet", action="store_true", help="no phase or progress lines")


def _fusion_option(p: argparse.ArgumentParser) -> None:
    from staticsched.frontend.fusion import FUSION_MODES
    from staticsched.frontend.layouts import LAYOUT_MODES
    from staticsched.frontend.mapping import MAPPING_MODES
    from staticsched.model.dtypes import COMPUTE_DTYPES

    p.add_argument("--dtype", choices=tuple(COMPUTE_DTYPES), default="float16",
                   help="an ONNX model's compute dtype: every tensor of the TaskGraph is declared with it "
                   "and its weights are rounded to it (float16, default; bfloat16; float32: the Cube at a "
                   "quarter of its fp16 rate, Vector work at half)")
    p.add_argument("--mapping", choices=MAPPING_MODES, default="rules",
                   help="an ONNX model's matmuls: rules (the arithmetic-intensity rule moves a matmul "
                   "below the Vector balance point to the Vector engine, default), search (schedule "
                   "both engines for each, keep the faster)")
    p.add_argument("--fusion", choices=FUSION_MODES, default="rules",
                   help="an ONNX model's fusion: none (a task per node), rules (the seed's rules with "
                   "this hardware's costs, default), search (schedule each matmul's candidate epilogue "
                   "boundaries with the list method, keep the fastest)")
    p.add_argument("--layouts", choices=LAYOUT_MODES, default="rules",
                   help="an ONNX model's GM tensor layouts: rules (each tensor ND or the Cube's NZ by the "
                   "cycles its accesses cost with this hardware's ND2NZ model, default), search (the rules "
                   "checked with the list method), given (the import's own: weights NZ); layouts.txt has "
                   "every decision")
    p.add_argument("--weights-nz", action=argparse.BooleanOptionalAction, default=True,
                   help="an ONNX model's constant matmul weights stored in the Cube's fractal format "
                   "(NZ), as frameworks convert them at load time, so their loads convert nothing "
                   "(default); --no-weights-nz keeps them ND, converted by every load at the "
                   "hardware's nd2nz_derate")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="staticsched",
        description="Cycle-exact static scheduling of AI-accelerator cores: lower a task graph "
        "to tile micro-ops, solve a timetable with CP-SAT, emit per-pipe programs with sync "
        "flags, and verify them by replay.",
        epilog="Exit codes: 0 ok, 1 verification failed, 2 bad input, 3 internal error, "
        "130 interrupted.",
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser, metavar="COMMAND")

    sch = sub.add_parser("schedule", help="schedule a graph, write the output files, verify them")
    sch.add_argument("graph", help="TaskGraph or OpGraph JSON file, or an ONNX model (.onnx)")
    sch.add_argument("--hw", required=True, help="hardware preset name or TOML path")
    sch.add_argument("-o", "--outdir", required=True, help="directory for the output files")
    _solver_options(sch, time_limit=60.0)
    _output_options(sch)
    _fusion_option(sch)
    sch.add_argument("--explain", action="store_true",
                     help="print the critical path op by op, each wait with its cause, after the "
                     "summary's gap section (the bound's binding term, the path's waits by cause, "
                     "each pipe's idle time per core type)")
    sch.add_argument("--dispatch", action="store_true",
                     help="also compare, with the list method, (a) the graph as one static program, (b) "
                     "its tasks as kernels launched back to back, (c) its unfused nodes as kernels "
                     "(hardware field launch_overhead_us between launches)")

    imp = sub.add_parser("import", help="import an ONNX model as a TaskGraph (JSON + .npz of weights)")
    imp.add_argument("model", help="ONNX model file (.onnx)")
    imp.add_argument("--hw", required=True, help="hardware preset name or TOML path (its costs decide "
                     "the fusion)")
    imp.add_argument("-o", "--output", required=True, help="TaskGraph JSON to write (the weights go to "
                     "the .npz of the same name, the decisions to <name>.fusion.txt)")
    _fusion_option(imp)

    ver = sub.add_parser("verify", help="verify an emitted program file")
    ver.add_argument("program", help="program.txt or program.json (or .gz)")
    ver.add_argument("--hw", required=True, help="hardware preset name or TOML path")
    ver.add_argument("--jitter", type=int, default=DEFAULT_JITTER,
                     help=f"jittered replays ({DEFAULT_JITTER}, as for schedule)")
    ver.add_argument("--seed", type=int, default=0, help="jitter / input data seed (0)")
    ver.add_argument("--numeric", action="store_true", help="replay the numbers against NumPy")
    ver.add_argument("--tolerance", type=float, default=None, help="max element error allowed")

    lower = sub.add_parser("lower", help="lower a TaskGraph to an OpGraph")
    lower.add_argument("graph", help="TaskGraph (or OpGraph) JSON file")
    lower.add_argument("--hw", required=True, help="hardware preset name or TOML path")
    lower.add_argument("-o", "--output", required=True, help="OpGraph JSON to write")
    lower.add_argument("--op-budget", type=int, default=None, help="refuse larger lowerings")

    hw = sub.add_parser("hw", help="list or show hardware models")
    hw_sub = hw.add_subparsers(dest="hw_cmd", required=True, parser_class=_Parser)
    hw_sub.add_parser("list", help="list the shipped presets")
    show = hw_sub.add_parser("show", help="tables of pipes, spaces, links, sync and costs")
    show.add_argument("name", help="preset name or TOML path")

    sw = sub.add_parser("sweep", help="schedule a cartesian product of hardware overrides x graphs")
    sw.add_argument("spec", help="sweep spec TOML (see docs/formats.md)")
    sw.add_argument("-o", "--outdir", required=True,
                    help="directory for results.csv, timings.csv, the plots and points/ (a rerun "
                    "skips the points already there)")
    sw.add_argument("--jobs", type=int, default=1, help="local worker processes (1)")
    sw.add_argument("--ray", metavar="auto|ADDRESS", default=None,
                    help="run the points as Ray tasks: 'auto' joins the running cluster (or "
                    "starts a local one), or give the cluster address (ray://host:10001); needs "
                    "staticsched[ray]")
    sw.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    tn = sub.add_parser("tune", help="search the tasks' tilings for the shortest schedule; write "
                        "the best one's files, tune.csv and tune.png")
    tn.add_argument("graph", help="TaskGraph JSON file")
    tn.add_argument("--hw", required=True, help="hardware preset name or TOML path")
    tn.add_argument("-o", "--outdir", required=True,
                    help="directory for the best schedule's files, tune.csv, tune.png, tuned.json")
    _solver_options(tn, time_limit=10.0, time_help=(
        "seconds of CP-SAT search for each of the --polish best candidates (default 10); the "
        "other candidates get the list scheduler"))
    tn.add_argument("--max-candidates", type=int, default=32, metavar="N",
                    help="list schedule at most N candidates, in the order of their lower bound "
                    "(32); the search stops earlier when the next bound reaches the best makespan")
    tn.add_argument("--polish", type=int, default=3, metavar="N",
                    help="with --method cpsat: improve the N best list schedules with CP-SAT (3)")
    tn.add_argument("--steps", action="store_true",
                    help="also search the matmul's L1 reuse steps step_m/step_n in 1, 2, 4 (up to 9x "
                    "the tilings; slower: the cheap bound does not yet credit what reuse saves)")
    tn.add_argument("--no-split-k", dest="split_k", action="store_false",
                    help="do not search split_k (by default tilings whose blocks leave Cube cores idle "
                    "are also tried with K split over several cores)")
    tn.add_argument("--jobs", type=int, default=1, help="local worker processes (1)")
    tn.add_argument("--ray", metavar="auto|ADDRESS", default=None,
                    help="schedule candidates as Ray tasks ('auto' or a cluster address; needs "
                    "staticsched[ray])")
    _output_options(tn)

    ex = sub.add_parser("examples", help="copy the shipped example graphs into a directory")
    ex.add_argument("dir", help="directory to create or fill (existing files are kept)")
    return p


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


_COMMANDS = {
    "hw": _cmd_hw,
    "lower": _cmd_lower,
    "schedule": _cmd_schedule,
    "verify": _cmd_verify,
    "import": _cmd_import,
    "examples": _cmd_examples,
    "sweep": _cmd_sweep,
    "tune": _cmd_tune,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if args.cmd is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        return _COMMANDS[args.cmd](args)
    except StaticschedError as exc:
        for line in exc.problems:
            print(f"staticsched: error: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("staticsched: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RecursionError:
        print("staticsched: error: input nested too deeply", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("staticsched: error: input too large for memory", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug, not a user mistake: say so in one line
        if os.environ.get("STATICSCHED_DEBUG"):
            traceback.print_exc()
        print(f"staticsched: internal error: {type(exc).__name__}: {exc} "
              "(set STATICSCHED_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


#: niceness added to the worker that renders a large program's files beside the verifier
RENDER_NICE = 10

#: what the console script leaves for the OS to reclaim (None: free it as usual, as when a
#: test calls main): a chip's compiled program is ~10^7 objects, whose freeing one by one
#: on the way out cost 0.6 s after everything was written and printed
_LEAVE_TO_EXIT: list | None = None


def entry() -> None:
    global _LEAVE_TO_EXIT
    _LEAVE_TO_EXIT = []
    code = main()
    if _LEAVE_TO_EXIT:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the reader has gone
                stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
