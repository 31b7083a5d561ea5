"""What a tuning run gives: the best schedule, the tuned graph, ``tune.csv``, ``tune.png`` and
summary lines.

``tune.csv`` has one row per legal candidate, in enumeration order. Every column but the last,
``seconds`` (wall time spent scheduling it), is determined by the inputs: two runs give the
same bytes up to that column.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from staticsched.frontend.taskgraph import TaskGraph, taskgraph_to_dict
from staticsched.tasks.space import tiling_fields, tiling_label

#: columns of tune.csv around the tiling fields (the union over the tuned tasks' kinds)
HEAD = ("candidate", "task")
TAIL = ("baseline", "work_bound", "bound", "bound_source", "list_makespan", "makespan", "method",
        "solver_status", "status", "same_as", "error", "seconds")
#: the files a tuning run adds to the best schedule's outputs
TUNE_FILES = ("tune.csv", "tune.png", "tuned.json")


def _text(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    return v


@attrs.frozen
class Tuned:
    """The result of :func:`staticsched.tune`.

    Attributes
    ----------
    best : Compiled
        The best candidate's schedule, program and sync plan (``best.write(outdir)`` writes
        what ``staticsched schedule`` would).
    graph : TaskGraph
        The input graph with the best tiling of every tuned task written in.
    rows : tuple of Row
        Every candidate (:class:`staticsched.explore.tune.Row`), in enumeration order.
    legal : tuple of (task id, int)
        How many legal tilings each tuned task has.
    source : str
        What the graph was (its path), for titles.
    """

    best: Any = attrs.field(repr=False)
    graph: TaskGraph = attrs.field(repr=False)
    rows: tuple[Any, ...] = attrs.field(converter=tuple, repr=False)
    legal: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)
    source: str = ""

    @property
    def best_row(self) -> Any:
        return next((r for r in self.rows if r.status == "best"), None)

    @property
    def baseline_row(self) -> Any:
        return next((r for r in self.rows if r.baseline), None)

    def csv_text(self) -> str:
        """``tune.csv``: one row per candidate (see the module docstring)."""
        fields: list[str] = []
        for r in self.rows:
            fields += [f for f in tiling_fields(r.tiling) if f not in fields]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([*HEAD, *fields, *TAIL])
        for r in self.rows:
            f = tiling_fields(r.tiling)
            w.writerow([r.index, r.task, *(_text(f.get(k)) for k in fields),
                        *(_text(getattr(r, k)) for k in TAIL[:-1]), f"{r.seconds:.3f}"])
        return buf.getvalue()

    def picture(self) -> bytes:
        """``tune.png``: makespan and bound per scheduled candidate, and every candidate's bound
        against the best makespan."""
        from staticsched.explore.plots import tune_picture

        hw = self.best.schedule.hw
        name = Path(self.source).name if self.source else "graph"
        legal = ", ".join(f"{t} {n} legal tilings" for t, n in self.legal)
        title = f"{name} on {hw.name}: {legal}"
        best, base = self.best_row, self.baseline_row
        if best is not None and base is not None and base.makespan is not None:
            title += (f"\nbest {best.label} {best.makespan} cycles; baseline {base.label} "
                      f"{base.makespan} cycles")
        return tune_picture(self.rows, title)

    def files(self) -> dict[str, str | bytes]:
        """``tune.csv``, ``tune.png`` and ``tuned.json`` (the graph with the best tilings)."""
        if not self.rows:
            return {"tuned.json": self._graph_json()}
        return {"tune.csv": self.csv_text(), "tune.png": self.picture(), "tuned.json": self._graph_json()}

    def _graph_json(self) -> str:
        return json.dumps(taskgraph_to_dict(self.graph), indent=1, sort_keys=True) + "\n"

    def write(self, outdir: str | Path, *, outputs: Sequence[str] | Any = None,
              compress: bool | None = None) -> list[Path]:
        """Write the best schedule's output files and the tuning files, atomically, in one step.

        Parameters are those of :meth:`staticsched.Compiled.write`.
        """
        return self.start_write(outdir, outputs=outputs, compress=compress).finish()

    def start_write(self, outdir: str | Path, *, outputs: Sequence[str] | Any = None,
                    compress: bool | None = None, processes: int | None = None, nice: int = 0) -> Any:
        """:meth:`write`, started (:meth:`staticsched.Compiled.start_write`)."""
        return self.best.start_write(outdir, outputs=outputs, compress=compress,
                                     extra_files=self.files(), processes=processes, nice=nice)

    def summary_lines(self) -> list[str]:
        """What was searched and what won, for the terminal."""
        if not self.rows:
            return ["tune         : no task of a tunable kind (matmul); the graph as it is"]
        count: dict[str, int] = {}
        for r in self.rows:
            count[r.status] = count.get(r.status, 0) + 1
        own = [r for r in self.rows if r.same_as is None]
        lowered = sum(1 for r in self.rows if r.bound is not None)
        listed = sum(1 for r in own if r.list_makespan is not None)
        polished = sum(1 for r in own if r.method == "cpsat")
        legal = ", ".join(f"{t}: {n}" for t, n in self.legal)
        lines = [
            f"tune         : legal tilings {legal}; {lowered} lowered for their bound, {listed} list "
            f"scheduled, {polished} improved by CP-SAT; {count.get('pruned', 0)} pruned by their bound, "
            f"{count.get('capped', 0)} not reached (--max-candidates), {count.get('duplicate', 0)} "
            f"duplicates, {count.get('failed', 0)} failed",
        ]
        best, base = self.best_row, self.baseline_row
        if best is not None:
            lines.append(f"best tiling  : {_row_text(best)}")
        if base is not None and base is not best and base.makespan is not None:
            lines.append(f"baseline     : {_row_text(base)}")
        return lines


def _row_text(r: Any) -> str:
    how = "CP-SAT" if r.method == "cpsat" else "list scheduler"
    bound = r.bound if r.bound is not None else r.work_bound
    return (f"{r.task}: {tiling_label(r.tiling)}: {r.makespan} cycles ({how}, {r.solver_status}; "
            f"bound {bound})")
