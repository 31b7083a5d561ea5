"""Running a sweep: one schedule per point, on local processes or a Ray cluster, resumable.

Each point's result is written atomically to ``points/<key>.json`` as soon as it is known,
so a rerun skips finished points and a killed run loses at most the points that were
running. ``results.csv`` is assembled from those files in point order; it holds only what the
inputs determine (no wall-clock times), so the local and the Ray backend write the same bytes.
Wall-clock seconds per point go to ``timings.csv``. A point that fails records its error in its
row and the sweep goes on.
"""

from __future__ import annotations

import csv
import io
import json
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from staticsched._atomic import atomic_write_text
from staticsched.errors import StaticschedError
from staticsched.explore.backends import executor
from staticsched.explore.spec import Point, SweepSpec
from staticsched.progress import Progress, silent

#: columns of results.csv after the swept parameters (per-unit and per-link columns follow)
_HEAD = ("point", "graph", "tuned")
_TAIL = ("status", "makespan", "makespan_us", "lower_bound", "gap", "stop_reason", "tiling")


def evaluate(point: Point) -> dict[str, Any]:
    """Schedule one point; return ``{"key", "row", "seconds"}`` (never raises for bad input:
    the error goes in the row)."""
    from staticsched.explore.overrides import override_hardware
    from staticsched.model.hardware_toml import hardware_document
    from staticsched.pipeline import compile_graph

    t0 = time.perf_counter()
    row: dict[str, Any]
    try:
        doc, where = hardware_document(point.hw)
        hw = override_hardware(doc, where, dict(point.overrides))
        if point.graph.tune:
            from staticsched.explore.tune import tune

            res = tune(point.graph.path, hw, method=point.method, mode=point.mode,
                       time_limit=point.time_limit, seed=point.seed).best
        else:
            res = compile_graph(point.graph.path, hw, method=point.method, mode=point.mode,
                                time_limit=point.time_limit, seed=point.seed)
        report = None
        if point.verify:
            from staticsched.verify import verify

            report = verify(res.program, hw, jitter=3 if point.mode == "flags" else 0,
                            seed=point.seed)
        row = result_row(res, hw, report)
    except StaticschedError as exc:
        row = {"status": "error", "error": " | ".join(exc.problems)}
    except Exception as exc:  # a bug in one point must not stop the sweep; say what it was
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        row = {"status": "error",
               "error": f"internal error {type(exc).__name__}: {exc} ({Path(tb.filename).name}:{tb.lineno})"}
    return {"key": point.key, "row": row, "seconds": round(time.perf_counter() - t0, 3)}


def result_row(res: Any, hw: Any, report: Any = None) -> dict[str, Any]:
    """The deterministic figures of one compiled point."""
    from staticsched.emit.summary import tilings
    from staticsched.model.traffic import gm_traffic

    s = res.schedule
    busy: dict[tuple[int, str], int] = {}
    for t in s.ops:
        busy[(t.core, t.unit)] = busy.get((t.core, t.unit), 0) + t.end - t.start
    cores = sorted({t.core for t in s.ops}) or [0]
    row: dict[str, Any] = {
        "status": s.status,
        "makespan": s.makespan,
        "makespan_us": f"{hw.cycles_to_us(s.makespan):.3f}",
        "lower_bound": s.lower_bound,
        "gap": f"{s.gap:.6f}",
        "stop_reason": s.stop_reason,
        "tiling": "; ".join(t.text() for t in tilings(s)),
    }
    for u in hw.unit_names:
        vals = [busy.get((c, u), 0) / s.makespan if s.makespan else 0.0 for c in cores]
        row[f"util_{u}"] = f"{sum(vals) / len(vals):.4f}"
    traffic = gm_traffic(res.graph, hw)
    row["gm_read_bytes"] = traffic.read
    row["gm_write_bytes"] = traffic.written
    for name, nbytes in traffic.links:
        row[f"bytes_{name}"] = nbytes
    if report is not None:
        row["verified"] = "clean" if report.ok else f"{len(report.findings)} findings"
    return row


def columns(spec: SweepSpec, rows: Iterable[dict[str, Any]]) -> list[str]:
    """The CSV header, in a fixed order whatever order the rows' keys come in: point, graph,
    tuned, the swept parameters, the figures, utilisation per pipe and bytes per link (in the
    base hardware's order), then verification and error."""
    from staticsched.model.hardware_toml import hardware_document, hardware_from_dict

    doc, where = hardware_document(spec.hw)
    hw = hardware_from_dict(doc, where)
    cols = [*_HEAD, *spec.params, *_TAIL, *(f"util_{u}" for u in hw.unit_names),
            "gm_read_bytes", "gm_write_bytes", *(f"bytes_{lk.name}" for lk in hw.links)]
    extra = sorted({k for row in rows for k in row} - set(cols) - {"verified", "error"})
    return [*cols, *extra, "verified", "error"]


def csv_text(spec: SweepSpec, results: dict[str, dict[str, Any]]) -> str:
    """``results.csv``: one row per finished point, in point order."""
    rows = []
    for p in spec.points:
        res = results.get(p.key)
        if res is None:
            continue
        row = {"point": p.index, "graph": p.graph.name, "tuned": int(p.graph.tune),
               **dict(p.overrides), **res["row"]}
        rows.append(row)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns(spec, rows), lineterminator="\n", restval="")
    w.writeheader()
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


class Store:
    """The per-point result files of a sweep directory."""

    def __init__(self, outdir: Path) -> None:
        self.dir = outdir / "points"

    def load(self, spec: SweepSpec) -> dict[str, dict[str, Any]]:
        """Results already on disk for points of ``spec`` (a half-written file cannot exist:
        writes are atomic; an unreadable one is treated as missing and recomputed)."""
        out = {}
        for p in spec.points:
            f = self.dir / f"{p.key}.json"
            if f.is_file():
                try:
                    data = json.loads(f.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if isinstance(data, dict) and data.get("key") == p.key and "row" in data:
                    out[p.key] = data
        return out

    def save(self, result: dict[str, Any]) -> None:
        atomic_write_text(self.dir / f"{result['key']}.json",
                          json.dumps(result, sort_keys=True, indent=1) + "\n")


def run_sweep(
    spec: SweepSpec,
    outdir: str | Path,
    *,
    jobs: int = 1,
    ray_address: str | None = None,
    progress: Progress | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every point of ``spec`` not already finished in ``outdir``; write ``results.csv``,
    ``timings.csv`` and the plots. Returns the results by point key."""
    outdir = Path(outdir)
    rep = progress or silent()
    store = Store(outdir)
    results = store.load(spec)
    todo = [p for p in spec.points if p.key not in results]
    if results:
        rep.line(f"  {len(results)} of {len(spec.points)} points already done in {outdir}")
    with rep.counter("points", len(spec.points), unit="pt") as count:
        count.update(len(results))

        def done(result: dict[str, Any]) -> None:
            store.save(result)
            results[result["key"]] = result
            count.update(1)

        with executor(jobs, ray_address) as run:
            run(evaluate, todo, done)
    write_results(spec, outdir, results)
    return results


def write_results(spec: SweepSpec, outdir: Path, results: dict[str, dict[str, Any]]) -> list[Path]:
    """``results.csv``, ``timings.csv`` and the plots of the finished points."""
    from staticsched.explore.plots import sweep_plots

    out = [atomic_write_text(outdir / "results.csv", csv_text(spec, results))]
    lines = ["point,graph,seconds"]
    for p in spec.points:
        if p.key in results:
            lines.append(f"{p.index},{p.graph.name},{results[p.key]['seconds']}")
    out.append(atomic_write_text(outdir / "timings.csv", "\n".join(lines) + "\n"))
    out += sweep_plots(spec, results, outdir)
    return out
