"""Jitter: replays with seeded random durations (0.5x-3x of nominal) must stay clean.

In flags mode happens-before does not depend on timing, so races cannot appear
here; what timing can break is a flag reused too early (a *double set*), and
with numeric replay the data must come out bit-identical. A timed-mode program
has no flags: its order *is* its timing, so a jittered replay is checked for
races again with the jittered cycles (and normally fails: timed mode is only
correct when every duration is exact).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from staticsched.verify import numeric
from staticsched.verify.dataflow import dataflow_findings
from staticsched.verify.flags import double_set_findings
from staticsched.verify.hb import race_findings, timed_pass
from staticsched.verify.index import OP, ProgramIndex
from staticsched.verify.replay import Replay, simulate
from staticsched.verify.report import Finding

LOW, HIGH = 0.5, 3.0


def jitter_durations(ix: ProgramIndex, rng: np.random.Generator) -> list[int]:
    """One factor in ``[LOW, HIGH)`` per instruction (drawn for all, so the stream of random
    numbers does not depend on which instructions are micro-ops); sync stays 0 cycles."""
    factors = rng.uniform(LOW, HIGH, size=ix.n)
    base = np.asarray(ix.dur, dtype=np.float64)
    scaled = np.maximum(1, np.rint(base * factors)).astype(np.int64).tolist()
    return [scaled[g] if ix.role[g] == OP else 0 for g in range(ix.n)]


def jitter_findings(
    ix: ProgramIndex,
    nominal: Replay,
    count: int,
    seed: int,
    *,
    known_races: frozenset,
    known_reads: frozenset = frozenset(),
    data: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]] | None = None,
) -> list[Finding]:
    """Run ``count`` jittered replays and report what the nominal replay did not show.

    Parameters
    ----------
    known_races, known_reads
        Racing pairs and GM reads before writes already reported from the nominal replay.
    data
        ``(inputs, nominal_gm)`` to also replay the numbers and compare every written tensor
        bit for bit with the nominal run.
    """
    rng = np.random.default_rng(seed)
    out: list[Finding] = []
    seen_double = {g for g, _, _ in nominal.double_sets}
    seen_stuck = {st.released for st in nominal.stuck}
    seen_races = set(known_races)
    seen_reads = set(known_reads)
    seen_tensors: set[str] = set()
    for r in range(count):
        rep = simulate(ix, jitter_durations(ix, rng))
        note = f" (jitter replay {r + 1} of {count}, seed {seed})"
        fresh = [d for d in rep.double_sets if d[0] not in seen_double]
        seen_double.update(d[0] for d in fresh)
        out.extend(double_set_findings(ix, fresh, check="jitter", note=note))
        for st in rep.stuck:
            if st.released in seen_stuck:
                continue
            seen_stuck.add(st.released)
            out.append(
                Finding(
                    "jitter",
                    "hb_cycle" if st.cyclic else "stuck",
                    st.chain + note,
                    ops=tuple(ix.op_label(g) for g in st.involved),
                    cycle=st.time,
                )
            )
        if ix.timed:
            det, df = timed_pass(ix, rep)
            fresh_races = frozenset(det.races) - seen_races
            skip = frozenset(det.races) - fresh_races
            seen_races |= fresh_races
            for f in race_findings(ix, det, rep, check="jitter", skip=skip):
                out.append(Finding(f.check, f.kind, f.message + note, f.ops, f.core, f.pipes, f.cycle))
            skip_reads = frozenset(df.unsatisfied) & seen_reads
            seen_reads |= set(df.unsatisfied)
            out.extend(dataflow_findings(ix, df, rep, check="jitter", skip=skip_reads, note=note))
        if data is not None:
            inputs, nominal_gm = data
            gm, _ = numeric.run(ix, rep, inputs)
            for name in numeric.written_tensors(ix):
                if name in seen_tensors or name not in gm or name not in nominal_gm:
                    continue
                f = numeric.diff(ix, name, nominal_gm[name], gm[name], f"from the nominal run{note}")
                if f is not None:
                    seen_tensors.add(name)
                    out.append(f)
    return out
