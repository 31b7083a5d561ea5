"""What the verifier found: :class:`Finding` (one problem) and :class:`Report` (all of them)."""

from __future__ import annotations

from typing import Any

import attrs

#: the checks, in the order findings are reported
CHECKS = (
    "input",
    "flag",
    "deadlock",
    "race",
    "dataflow",
    "layout",
    "memory",
    "conformance",
    "cost",
    "link",
    "jitter",
    "numeric",
)

#: findings of one (check, kind) shown by :meth:`Report.text` before "... and N more"
TEXT_LIMIT = 20


@attrs.frozen
class Finding:
    """One problem.

    Attributes
    ----------
    check : str
        One of :data:`CHECKS`.
    kind : str
        What went wrong within the check, e.g. ``RAW``, ``unpaired_set``, ``hb_cycle``,
        ``out_of_bounds``, ``cycle_mismatch``, ``mismatch``.
    message : str
        One readable line naming ops, pipes, cycles and addresses.
    ops : tuple of str
        The micro-op ids involved; sync instructions appear as ``core<c>.<PIPE>#<index>``.
    core : int
        The core concerned (-1 when the finding is not about one core).
    pipes : tuple of str
        The pipes concerned.
    cycle : int
        The (replay) cycle concerned, -1 when none.
    """

    check: str
    kind: str
    message: str
    ops: tuple[str, ...] = attrs.field(converter=tuple, default=())
    core: int = -1
    pipes: tuple[str, ...] = attrs.field(converter=tuple, default=())
    cycle: int = -1

    def line(self) -> str:
        return f"[{self.check}] {self.kind}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "kind": self.kind,
            "message": self.message,
            "ops": list(self.ops),
            "core": self.core,
            "pipes": list(self.pipes),
            "cycle": self.cycle,
        }


def _sorted_pairs(value: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(dict(value).items()))


@attrs.frozen
class Report:
    """The verifier's verdict.

    Attributes
    ----------
    findings : tuple of Finding
        Every problem, grouped by check in :data:`CHECKS` order, deterministic within a check.
    stats : tuple of (key, value)
        Counts (``streams``, ``instructions``, ``micro_ops``, ``flags``, ``items`` ...), the
        replay makespan and per-check outcomes such as ``numeric``; deterministic.
    timings : tuple of (key, seconds)
        Wall time per check. Not part of :meth:`text` unless asked for, so that the same
        input always renders the same report.
    """

    findings: tuple[Finding, ...] = attrs.field(converter=tuple)
    stats: tuple[tuple[str, Any], ...] = attrs.field(converter=_sorted_pairs, default=())
    timings: tuple[tuple[str, float], ...] = attrs.field(converter=_sorted_pairs, default=())

    @property
    def ok(self) -> bool:
        """True when no check found anything."""
        return not self.findings

    @property
    def stat(self) -> dict[str, Any]:
        return dict(self.stats)

    def by_check(self, check: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.check == check)

    def kinds(self) -> set[tuple[str, str]]:
        """The distinct ``(check, kind)`` pairs found."""
        return {(f.check, f.kind) for f in self.findings}

    def text(self, *, limit: int = TEXT_LIMIT, timings: bool = False) -> str:
        """A readable report: a verdict line, the stats, then the findings grouped by check.

        Parameters
        ----------
        limit
            Findings shown per (check, kind) before the rest are summarised as a count.
        timings
            Also list the per-check wall times (these differ from run to run).
        """
        verdict = (
            "OK" if self.ok else f"FAILED ({len(self.findings)} finding{'s' * (len(self.findings) != 1)})"
        )
        lines = [f"verify: {verdict}"]
        stat_text = ", ".join(f"{k}={v}" for k, v in self.stats)
        if stat_text:
            lines.append(f"  {stat_text}")
        if timings and self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings))
        groups: dict[tuple[str, str], list[Finding]] = {}
        for f in self.findings:
            groups.setdefault((f.check, f.kind), []).append(f)
        for (check, kind), group in groups.items():
            lines.extend(f.line() for f in group[:limit])
            if len(group) > limit:
                lines.append(f"[{check}] {kind}: ... and {len(group) - limit} more")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without timings, so it is deterministic)."""
        return {
            "ok": self.ok,
            "stats": dict(self.stats),
            "findings": [f.to_dict() for f in self.findings],
        }
