"""The command line's grammar: every command, its options and their help, and the exit codes.

The commands' implementations are :mod:`staticsched.cli.commands`; :func:`staticsched.cli.main`
parses with :func:`build_parser` and runs one. The exit codes live here beside the parser's
epilog, which states them, and its error path, which exits with :data:`EXIT_BAD_INPUT`.
"""

from __future__ import annotations

import argparse
import sys

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


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command and its options.

    Returns
    -------
    argparse.ArgumentParser
        Its ``error`` prints the usage and one ``staticsched: error:`` line and exits with
        :data:`EXIT_BAD_INPUT`; ``cmd`` names the command given (None without one).
    """
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
