"""Schedule: the timetable a solver produces (per op timing, per item placement, sync events)."""

from __future__ import annotations

from typing import Any, cast

import attrs

from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.placement import STATUSES, OpTime, Placement, SyncEvent
from staticsched.model.schedule_check import verify_schedule

__all__ = ["STATUSES", "OpTime", "Placement", "Schedule", "SyncEvent"]

@attrs.frozen
class Schedule:
    """A timetable for ``graph`` on ``hw``.

    Attributes
    ----------
    ops : tuple of OpTime
        In the graph's op order.
    items : tuple of Placement
        In the graph's item order.
    events : tuple of SyncEvent
        The flags the sync plan keeps, with ids.
    makespan, lower_bound : int
        Cycles; ``gap = makespan / lower_bound - 1``. Once a program is built, ``makespan`` is
        its replayed makespan (what runs).
    planned_makespan : int
        The last op end of ``ops`` (the plan), which a program's replay may differ from (link
        sharing, credits); 0 before a program is built (then ``makespan`` is the plan's).
    status : str
        ``optimal``: the makespan is proven minimal for the graph on the hardware (it equals
        the lower bound, or CP-SAT proved it on a model that is exactly the user's problem);
        ``feasible``: the schedule went through CP-SAT (a solution or LNS windows) without
        such a proof (a proof for the solver's stricter model says so in ``stop_reason``);
        ``heuristic``: the list schedule, not improved by CP-SAT.
    stop_reason : str
        What ended the search: ``"optimal"``, ``"deterministic_limit"``, ``"lns_converged"``,
        ``"gap_limit"`` (proven within the relative gap of the lower bound), ``"list"`` (the
        list scheduler alone), ``"lns_budget_short_of_one_pass"`` (the list schedule kept: the
        budget could not pay for one pass of LNS windows), ``"optimal in the solver's stricter
        model"``, or
        a ``"wall_clock_limit ..."`` / ``"optimal (wall-clock mode ...)"`` reason that says the
        result is not reproducible (the ``STOP_*`` names of :mod:`staticsched.solver.budget`).
    stats : tuple of (key, value)
        Solver statistics (JSON scalars).
    """

    graph: OpGraph = attrs.field(repr=False)
    hw: Hardware = attrs.field(repr=False)
    ops: tuple[OpTime, ...] = attrs.field(converter=tuple)
    items: tuple[Placement, ...] = attrs.field(converter=tuple)
    events: tuple[SyncEvent, ...] = attrs.field(converter=tuple)
    makespan: int
    lower_bound: int
    status: str
    method: str = "cpsat"
    stop_reason: str = ""
    stats: tuple[tuple[str, Any], ...] = attrs.field(
        converter=lambda d: tuple(sorted(dict(d).items())), default=()
    )
    planned_makespan: int = 0

    @property
    def plan_makespan(self) -> int:
        """The plan's makespan (the last end in ``ops``)."""
        return self.planned_makespan or self.makespan

    @property
    def gap(self) -> float:
        return self.makespan / self.lower_bound - 1.0 if self.lower_bound > 0 else 0.0

    def op_time(self, op_id: str) -> OpTime:
        return self.ops[self.graph.op_index[op_id]]

    def verify(self) -> tuple[str, ...]:
        """Check this timetable against its graph and hardware, independently of the solver.

        Returns
        -------
        tuple of str
            One line per violation naming the ops/items and the numbers; empty when valid.
            See :mod:`staticsched.model.schedule_check` for the list of checks.
        """
        # attrs' converter fields do not match the check's protocol for the type checker
        return verify_schedule(cast(Any, self))
