"""Command line: ``staticsched schedule|tune|verify|lower|sweep|hw|examples``.

:mod:`.args` holds the grammar (the parser, its help, the exit codes), :mod:`.commands` what
each command does; :func:`main` parses, runs one and turns every failure into its exit code.

Exit codes: 0 success, 1 a verification failed, 2 bad input (one line per problem on
stderr, no traceback, no output file), 3 an internal error (a bug: rerun with
``STATICSCHED_DEBUG=1`` for the traceback), 130 interrupted (Ctrl-C; no output file).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence

from staticsched.cli.args import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, build_parser
from staticsched.cli.commands import COMMANDS, leave_to_exit
from staticsched.errors import StaticschedError

__all__ = ["entry", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.cmd is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        return COMMANDS[args.cmd](args)
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


def entry() -> None:
    """The console script: :func:`main` on ``sys.argv``, then exit with its code."""
    left = leave_to_exit()
    code = main()
    if left:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the reader has gone
                stream.flush()
        os._exit(code)
    sys.exit(code)
