"""What a plan becomes as a flags program on a chip whose links the hardware shares.

A flags program has no link-order flags: its transfers on a shared link get max-min fair
shares (:mod:`staticsched.model.fluid`), not the rates the solver planned. Where links couple
cores, the solver therefore compares its candidate plans (the coupled search, the static
splits) by this replay, not by their planned makespans.
"""

from __future__ import annotations

from staticsched.model.deps import address_edges
from staticsched.model.fluid import FluidTransfer, replay_timetable
from staticsched.model.hardware import RATE_DENOM
from staticsched.model.links import Transfer
from staticsched.model.schedule import Schedule


def replayed_makespan(schedule: Schedule, transfers: dict[int, Transfer]) -> int:
    """The makespan of ``schedule``'s flags program with the links shared by the hardware:
    each pipe in the timetable's order, every dependency and address-reuse edge kept, each
    transfer in ``transfers`` (by op index) at its fair share."""
    graph, hw = schedule.graph, schedule.hw
    idx = graph.op_index
    ops = schedule.ops
    orders: dict[tuple[int, str], list[int]] = {}
    for i in sorted(range(len(ops)), key=lambda i: (ops[i].start, i)):
        orders.setdefault((ops[i].core, ops[i].unit), []).append(i)
    bounded = {s.name for s in hw.spaces if s.bounded}
    placed = [p for p in schedule.items if p.space in bounded]
    edges = []
    for e in (*graph.edges, *address_edges(graph, placed)):
        a, b = idx[e.src], idx[e.dst]
        if a != b:
            lat = hw.sync.latency((ops[a].core, ops[a].unit), (ops[b].core, ops[b].unit))
            edges.append((a, b, lat))
    index = {lk.name: k for k, lk in enumerate(hw.links)}
    fluid = {i: FluidTransfer(x.bytes * RATE_DENOM, x.overhead, x.path_units,
                              tuple(index[n] for n in x.links))
             for i, x in transfers.items()}
    dur = [t.end - t.start for t in ops]
    _, end = replay_timetable(dur, list(orders.values()), edges, fluid, [lk.units for lk in hw.links])
    return max(end, default=0)
