"""Where the time goes between the lower bound and the makespan (``staticsched schedule
--explain``, and the summary's last section).

Three views of one program's nominal replay (what runs, not the solver's plan):

- **the bound's binding term**: which resource on which core (or the critical path, or a
  link) gives the lower bound, and the value of each kind of bound beside it;
- **the critical path**: walking back from the op that ends last, each op's start is the end
  of whatever released it: the op before it on its pipe, or the SET of the WAIT that held it
  (whose own pipe is then followed). The chain of ops and the waits between them, each wait
  attributed to a cause (:data:`CAUSES`), add up to the makespan exactly;
- **idle time**: per core type and pipe, the cycles of the makespan the pipe does nothing.

The replay is the emitter's (:func:`staticsched.emit.nominal.replay`); this module reads its
cycles and ends, the plan's streams and flags, and the graph's costs, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from staticsched.emit.nominal import wait_holds
from staticsched.emit.sync import Flag, SyncPlan
from staticsched.model.links import op_transfers
from staticsched.model.schedule import Schedule

#: what a wait on the critical path is attributed to
CAUSES = {
    "dependency": "a RAW or explicit dependency of the op on its producer (flag latency included)",
    "buffer slot": "the op reuses a buffer (a WAR/WAW on an item or an address) and waits for its last user",
    "event id": "a credit flag: an event id could be reused only after an earlier WAIT",
    "cross-core": "a dependency across cores: the cross-core flag's latency",
    "GM-word poll": "a GM-word flag's polling load (paid after the word is visible)",
    "task boundary": "a barrier across a task boundary: every core of the type waits for all",
    "link share": "a transfer ran longer than at its path's full rate: a shared link slowed it",
}


@attrs.frozen
class Step:
    """One op of the critical path and the wait that ended just before it started."""

    op: str
    core: int
    unit: str
    start: int
    end: int
    #: the cycles between the releasing event and this op's start, and their cause ("" for
    #: none: back to back behind the op before it on its pipe)
    wait: int = 0
    cause: str = ""
    #: the cycles the op ran past its duration at its path's full rate (a shared link)
    slowed: int = 0
    #: how the chain reached this op from the one after it: "pipe" (the next op ran behind it
    #: on its pipe) or the flag that carried the dependency ("flag", "cross", "barrier", ...)
    via: str = ""


@attrs.frozen
class Explanation:
    """Why a schedule's makespan is what it is (see the module docstring)."""

    makespan: int
    lower_bound: int
    bound_source: str
    #: ``(name, value)`` of the other bounds worth naming (critical path, links)
    bounds: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)
    #: the critical path, first op first
    path: tuple[Step, ...] = attrs.field(converter=tuple)
    #: per core type (or "core" on a chip of one type): per pipe, (min, mean, max) idle cycles
    idle: tuple[tuple[str, int, tuple[tuple[str, int, float, int], ...]], ...] = attrs.field(
        converter=tuple)
    #: the task of each op on the path, by op id
    tasks: Mapping[str, str] = attrs.field(factory=dict)

    def waits(self) -> dict[str, int]:
        """Cycles of the critical path by cause (waits and slowed transfers), largest first."""
        out: dict[str, int] = {}
        for s in self.path:
            if s.wait:
                out[s.cause] = out.get(s.cause, 0) + s.wait
            if s.slowed:
                out["link share"] = out.get("link share", 0) + s.slowed
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def busy(self) -> dict[str, int]:
        """Cycles of the critical path spent running ops at their full-rate durations, per pipe."""
        out: dict[str, int] = {}
        for s in self.path:
            out[s.unit] = out.get(s.unit, 0) + s.end - s.start - s.slowed
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def task_spans(self) -> list[tuple[str, int, int, int]]:
        """The tasks the critical path passes through, in order: (task, first start, last
        end, ops)."""
        out: list[list] = []
        for s in self.path:
            task = self.tasks.get(s.op, "")
            if out and out[-1][0] == task:
                out[-1][2] = s.end
                out[-1][3] += 1
            else:
                out.append([task, s.start, s.end, 1])
        return [tuple(x) for x in out]  # type: ignore[misc]

    def lines(self, full: bool = False) -> list[str]:
        """The summary's ``gap`` section; ``full`` adds the critical path op by op."""
        ms, lb = self.makespan, self.lower_bound
        gap = f"{100 * (ms / lb - 1):.2f}%" if lb else "-"
        others = ", ".join(f"{name} {v:,}" for name, v in self.bounds)
        out = [f"gap          : makespan {ms:,} over bound {lb:,} ({gap}); the bound is {self.bound_source}"
               + (f" (beside it: {others})" if others else "")]
        busy, waits = self.busy(), self.waits()
        total_busy, total_wait = sum(busy.values()), sum(waits.values())
        first = self.path[0].start if self.path else 0
        out.append(f"  critical path: {len(self.path):,} ops from cycle {first:,} to {ms:,}: "
                   f"busy {total_busy:,} (" + ", ".join(f"{u} {c:,}" for u, c in busy.items())
                   + f"), waiting {total_wait:,}"
                   + (" (" + ", ".join(f"{c} {n:,}" for c, n in waits.items()) + ")" if waits else ""))
        spans = self.task_spans()
        if spans:
            out.append("  through tasks: " + "; ".join(
                f"{task or '-'} {s:,}-{e:,}" + (f" ({n} ops)" if n > 1 else "") for task, s, e, n in spans))
        for ctype, cores, pipes in self.idle:
            out.append(f"  idle {ctype} x{cores}: " + ", ".join(
                f"{u} {mean:,.0f}" + (f" ({lo:,}-{hi:,})" if lo != hi else "") for u, lo, mean, hi in pipes)
                + " cycles (mean over the cores, min-max)")
        if full:
            out.append(f"  {'start':>9} {'end':>9} {'core':>5} {'pipe':<8} {'wait':>7} {'cause':<14} op")
            for s in self.path:
                slowed = f" (+{s.slowed} link share)" if s.slowed else ""
                out.append(f"  {s.start:>9} {s.end:>9} {s.core:>5} {s.unit:<8} {s.wait:>7} "
                           f"{s.cause or '-':<14} {s.op}{slowed}")
        return out


def _cause(f: Flag, hold: int) -> str:
    """What a binding WAIT of flag ``f`` is attributed to."""
    if f.reason == "barrier":
        return "task boundary"
    if f.reason == "credit":
        return "event id"
    if f.reason in ("war", "waw"):
        return "buffer slot"
    if f.kind == "cross":
        return "GM-word poll" if hold else "cross-core"
    return "dependency"


def _task_of(op_id: str, task_ids: Sequence[str]) -> str:
    """The longest task id that ``op_id`` starts with, followed by a dot (ops are named
    ``<task>.<block>...``); "" when none does."""
    best = ""
    for t in task_ids:
        if len(t) > len(best) and op_id.startswith(t + "."):
            best = t
    return best


def explain(schedule: Schedule, plan: SyncPlan, cycles: Sequence[Sequence[int]],
            ends: Mapping[str, int], task_ids: Sequence[str] = ()) -> Explanation:
    """The explanation of the program of ``plan`` whose replay gave ``cycles`` (per stream
    slot) and ``ends`` (per op): see the module docstring.

    Parameters
    ----------
    schedule
        The schedule (its graph, hardware, lower bound and the bound's source).
    plan
        The sync plan the program was built from.
    cycles, ends
        The replay's cycle of every slot of every stream, and every op's end.
    task_ids
        The source TaskGraph's task ids, to name the tasks on the critical path.
    """
    hw, graph = schedule.hw, schedule.graph
    sync = hw.sync
    where: dict[str, tuple[int, int]] = {}
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what == "op":
                where[ref] = (s, k)
    set_slot: dict[int, tuple[int, int]] = {}
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what == "set":
                set_slot[ref] = (s, k)
    # each op's duration at its path's full rate: a longer run is link sharing
    xfers = op_transfers(graph, hw)
    full = {op.id: (x.cycles(0) if x is not None else op.duration)
            for op, x in zip(graph.ops, xfers, strict=True)}
    latency = [sync.route_latency(f.route) if f.route else
               sync.latency((f.set_core, f.set_unit), (f.wait_core, f.wait_unit)) for f in plan.flags]
    hold = wait_holds(sync, plan)

    def done(s: int, k: int) -> int:
        """When slot ``k`` of stream ``s`` lets the stream go on: an op's end, a flag's cycle."""
        what, ref = plan.streams[s].slots[k]
        return ends[ref] if what == "op" else cycles[s][k]

    path: list[Step] = []
    if ends:
        last = min(ends, key=lambda o: (-ends[o], where[o]))
        s, k = where[last]
        pending = ("", "")  # how the chain reached the op it is at: (via, cause of the wait)
        wait = 0
        while True:
            what, ref = plan.streams[s].slots[k]
            if what == "op":
                start, end = cycles[s][k], ends[ref]
                st = plan.streams[s]
                path.append(Step(ref, st.core, st.unit, start, end, wait, pending[1],
                                 max(0, end - start - full[ref]), pending[0]))
                wait, pending = 0, ("pipe", "")
            elif what == "wait":
                f = plan.flags[ref]
                t = cycles[s][k]
                reach = done(s, k - 1) if k else 0
                vis = cycles[set_slot[ref][0]][set_slot[ref][1]] + latency[ref]
                if vis > reach:
                    # the flag held the stream: the chain goes on at its SET
                    wait += t - cycles[set_slot[ref][0]][set_slot[ref][1]]
                    pending = (f.reason or f.kind, _cause(f, hold[ref]))
                    s, k = set_slot[ref]
                    continue
                if hold[ref]:  # a polling load paid after an early word
                    wait += hold[ref]
                    pending = (pending[0], "GM-word poll")
            if k == 0:
                break
            k -= 1
        path.reverse()
        # each step's wait belongs to the op it delayed: shift them one step along the path
        shifted = []
        carry = (0, "", "")
        for step in path:
            shifted.append(attrs.evolve(step, wait=carry[0], cause=carry[1], via=carry[2]))
            carry = (step.wait, step.cause, step.via)
        path = shifted
    tasks = {s.op: _task_of(s.op, task_ids) for s in path}
    stats = dict(schedule.stats)
    source = stats.get("lower_bound_source", "") or "-"
    # the links' bounds, as the solver's statistics list them ("L2 25893; HBM 1200")
    bounds = [(f"link {name}", int(v)) for name, _, v in
              (part.rpartition(" ") for part in str(stats.get("link_bounds", "")).split("; ") if part)]
    return Explanation(schedule.makespan, schedule.lower_bound, _bound_text(hw, source), bounds, path,
                       _idle(schedule, plan, cycles, ends), tasks)


def _bound_text(hw, source: str) -> str:
    """``pipe 24:MTE2`` with the core's type: ``pipe 24:MTE2 (an AIC: the one-machine bound of
    its ops between their heads and tails)``."""
    if source.startswith("pipe "):
        core = int(source.split()[1].split(":")[0])
        ct = hw.core_type(core)
        ctype = f"an {ct.name}: " if ct is not None and hw.split else ""
        return f"{source} ({ctype}its ops one at a time between their heads and tails)"
    if source.startswith("link "):
        return f"{source} (its bytes at its bandwidth between their heads and tails)"
    if source == "critical_path":
        return "the critical path of the dependencies"
    return source


def _idle(schedule: Schedule, plan: SyncPlan, cycles: Sequence[Sequence[int]],
          ends: Mapping[str, int]) -> list[tuple[str, int, tuple[tuple[str, int, float, int], ...]]]:
    """Per core type, per pipe: (pipe, min, mean, max) idle cycles over the makespan."""
    hw, ms = schedule.hw, schedule.makespan
    busy: dict[tuple[int, str], int] = {}
    for s, st in enumerate(plan.streams):
        for k, (what, ref) in enumerate(st.slots):
            if what == "op":
                busy[(st.core, st.unit)] = busy.get((st.core, st.unit), 0) + ends[ref] - cycles[s][k]
    used = sorted({c for c, _ in busy})
    out = []
    groups = ([(ct.name, [c for c in hw.cores_of_type(ct.name) if c in set(used)], ct.units)
               for ct in hw.core_types] if hw.split else [("core", used, hw.unit_names)])
    for name, cores, units in groups:
        if not cores:
            continue
        pipes = []
        for u in units:
            idle = [ms - busy.get((c, u), 0) for c in cores]
            pipes.append((u, min(idle), sum(idle) / len(idle), max(idle)))
        out.append((name, len(cores), tuple(pipes)))
    return out
