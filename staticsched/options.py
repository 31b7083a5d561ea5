"""The choices every entry point shares, defined once: solver methods, program modes, time
modes, link policies and the default limit on a lowering's size, and the one check of them."""

from __future__ import annotations

from typing import Any

#: ``cpsat``: the list schedule improved by CP-SAT; ``list``: the list scheduler alone
METHODS = ("cpsat", "list")
#: ``flags``: streams synchronised by SET/WAIT flags; ``timed``: exact issue cycles, no flags
MODES = ("flags", "timed")
#: how the solver shares a binding link between cores: ``auto`` couples them (one problem with
#: the whole bandwidth) unless an equal split provably costs nothing; ``split`` always gives
#: each core an equal static share (a baseline)
LINK_POLICIES = ("auto", "split")
#: TaskGraphs whose lowering would create more ops than this are refused before lowering
DEFAULT_OP_BUDGET = 2_000_000
#: the relative gap at which a search stops: ``(makespan - lower bound) / makespan <= gap``
DEFAULT_GAP = 0.001
#: ``deterministic``: every search is bounded by calibrated deterministic work (reproducible);
#: ``wall``: by the wall clock (``--wall-clock``)
TIME_MODES = ("deterministic", "wall")

_UNSET: Any = object()


def option_problems(
    *,
    method: Any = _UNSET,
    mode: Any = _UNSET,
    time_limit: Any = _UNSET,
    seed: Any = _UNSET,
    workers: Any = _UNSET,
    time_mode: Any = _UNSET,
    gap: Any = _UNSET,
) -> list[str]:
    """One line per bad option among those given (the API's and the solver's one check)."""
    bad = []
    if time_mode is not _UNSET and time_mode not in TIME_MODES:
        bad.append(f"time_mode must be one of {', '.join(TIME_MODES)}, got {time_mode!r}")
    if method is not _UNSET and method not in METHODS:
        bad.append(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if mode is not _UNSET and mode not in MODES:
        bad.append(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if time_limit is not _UNSET and (
        isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not time_limit > 0
    ):
        bad.append(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if seed is not _UNSET and (isinstance(seed, bool) or not isinstance(seed, int)):
        bad.append(f"seed must be an integer, got {seed!r}")
    if workers is not _UNSET and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        bad.append(f"workers must be an integer >= 1, got {workers!r}")
    if gap is not _UNSET and (
        isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 <= gap < 1
    ):
        bad.append(f"gap must be a number with 0 <= gap < 1, got {gap!r}")
    return bad
