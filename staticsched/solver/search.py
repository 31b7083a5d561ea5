"""Running one CP-SAT search so that a wall-clock cap and Ctrl-C both stop it cleanly.

CP-SAT catches SIGINT itself by default and, once a solve returns, leaves the process-level
handler at the default action: the next Ctrl-C then kills the interpreter silently (a notebook
loses its kernel) while Python still believes ``default_int_handler`` is installed. So the
search runs with ``catch_sigint_signal`` off, in a worker thread (the solve releases the GIL),
while the calling thread waits: Python delivers Ctrl-C there as ``KeyboardInterrupt``, the
search is stopped and joined, and the interrupt propagates. The same wait enforces the
wall-clock cap, which CP-SAT can overrun on large models (OR-Tools issue #4882).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

#: seconds the wait grants after the wall-clock limit before it stops the search itself
WATCHDOG_GRACE = 0.5
#: how often the waiting thread wakes to deliver a pending Ctrl-C or check the clock
POLL = 0.05


def run_search(
    solver: cp_model.CpSolver,
    model: cp_model.CpModel,
    callback: cp_model.CpSolverSolutionCallback | None,
    wall_limit: float,
    on_start: Callable[[Callable[[], None]], None] | None = None,
) -> tuple[int, bool]:
    """Solve ``model``; return the status and whether the wall-clock watchdog stopped it.

    ``on_start`` receives the search's stop function as it starts (another lane of a
    portfolio may stop this one once it has proven the optimum).

    Raises
    ------
    KeyboardInterrupt
        When Ctrl-C arrives during the search (after the search has stopped).
    """
    solver.parameters.catch_sigint_signal = False
    done = threading.Event()
    result: dict[str, object] = {}

    def work() -> None:
        try:
            result["status"] = solver.solve(model, callback) if callback else solver.solve(model)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc
        finally:
            done.set()

    deadline = time.monotonic() + max(wall_limit, 1e-3) + WATCHDOG_GRACE
    fired = False
    worker = threading.Thread(target=work, name="cp-sat", daemon=True)
    worker.start()
    if on_start is not None:
        on_start(solver.stop_search)
    try:
        while not done.wait(POLL):
            if not fired and time.monotonic() > deadline:
                fired = True
                solver.stop_search()
    except KeyboardInterrupt:
        solver.stop_search()
        # wait on the event, not on join(): an interrupted join can return while the thread
        # still runs, and the interpreter then aborts on exit
        while not done.wait(POLL):
            pass
        raise
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["status"], fired  # type: ignore[return-value]
