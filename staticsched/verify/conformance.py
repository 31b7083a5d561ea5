"""Conformance: the nominal replay must reproduce every instruction's ``cycle`` and the makespan.

This is the only place the verifier reads ``Instr.cycle`` as a claim to check
(timed mode also obeys it as an issue time). A set's cycle is when it fires, a
wait's when it releases its pipe, a micro-op's when it starts.
"""

from __future__ import annotations

from staticsched.verify.index import ProgramIndex
from staticsched.verify.replay import Replay
from staticsched.verify.report import Finding


def conformance_findings(ix: ProgramIndex, rep: Replay) -> list[Finding]:
    """One ``cycle_mismatch`` per stream (its first differing instruction, with the count) and a
    ``makespan_mismatch``."""
    out = []
    parts = ix.parts
    for gids in ix.stream_gids:
        # an AIC's mode-2 WAIT is done when its last AIV part passes
        bad = [g for g in gids if rep.start[g] != ix.instr[g].cycle and g not in parts]
        if not bad:
            continue
        g = bad[0]
        more = f"; {len(bad) - 1} later instructions of this pipe differ too" if len(bad) > 1 else ""
        out.append(
            ix.finding_at(
                "conformance",
                "cycle_mismatch",
                f"{ix.describe(g)}: the program says cycle {ix.instr[g].cycle}, the nominal replay "
                f"issues it at {rep.start[g]}{more}",
                g,
                rep.start[g],
            )
        )
    if rep.makespan != ix.program.makespan:
        out.append(
            Finding(
                "conformance",
                "makespan_mismatch",
                f"the program says makespan {ix.program.makespan}, the nominal replay ends at {rep.makespan}",
                cycle=rep.makespan,
            )
        )
    return out
