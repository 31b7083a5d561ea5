"""The choices every entry point shares, defined once: solver methods, program modes and the
default limit on a lowering's size."""

from __future__ import annotations

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
