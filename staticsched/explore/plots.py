"""Pictures of sweeps and tuning runs (matplotlib, written as PNG).

Every picture has labelled axes with units, and draws the lower bound next to the makespan
(dashed, same colour), so the gap is visible, not only the makespan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from staticsched._atomic import atomic_write_bytes

#: at most this many lines per picture; beyond it the best makespan over the other
#: parameters is drawn instead of one line per combination
MAX_LINES = 8


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # no screen: render to files only
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    # no time stamps or software versions in the file: equal inputs give equal bytes
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def _save(fig: Any, path: Path) -> Path:
    return atomic_write_bytes(path, _png(fig))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _label(param: str) -> str:
    """An axis label with units: bytes for capacities, B/cycle for bandwidths, cycles for
    latencies, a count for ids and cores."""
    unit = ""
    if param.endswith(("capacity", "alignment")):
        unit = " (bytes)"
    elif param.endswith("bytes_per_cycle"):
        unit = " (B/cycle)"
    elif param.endswith("latency"):
        unit = " (cycles)"
    elif param.endswith(("event_ids", "cores")):
        unit = " (count)"
    elif param.endswith("clock_ghz"):
        unit = " (GHz)"
    return f"{param}{unit}"


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else float("nan")


def sweep_plots(spec: Any, results: dict[str, dict[str, Any]], outdir: Path) -> list[Path]:
    """``makespan_vs_<param>.png`` per swept parameter (one panel per graph) and, when two are
    swept, ``heatmap_<graph>.png`` per graph. Failed points are left out of the lines and
    marked in the heatmaps."""
    ok = {p.key: results[p.key]["row"] for p in spec.points
          if p.key in results and isinstance(results[p.key]["row"].get("makespan"), int)}
    if not ok or not spec.params:
        return []
    written = [_param_plot(spec, ok, param, outdir) for param in spec.params]
    if len(spec.params) == 2:
        written += _heatmaps(spec, ok, outdir)
    return written


def _series(spec: Any, ok: dict[str, dict[str, Any]], g: Any, param: str) -> dict[str, list]:
    """Lines of one panel: label -> [(x, makespan, bound)] sorted by x, one per combination of
    the other parameters (or the best over them when there are too many)."""
    others = [q for q in spec.params if q != param]
    pts = [p for p in spec.points if p.graph == g and p.key in ok]
    groups: dict[tuple, list] = {}
    for p in pts:
        ov = dict(p.overrides)
        groups.setdefault(tuple(ov[q] for q in others), []).append(p)
    if len(groups) > MAX_LINES:
        best: dict[Any, tuple[int, int]] = {}
        for p in pts:
            x, row = dict(p.overrides)[param], ok[p.key]
            if x not in best or row["makespan"] < best[x][0]:
                best[x] = (row["makespan"], row["lower_bound"])
        return {f"best over {', '.join(others)}": sorted(((x, m, b) for x, (m, b) in best.items()),
                                                         key=lambda t: _num(t[0]))}
    out = {}
    for combo, ps in sorted(groups.items(), key=lambda kv: [_num(v) for v in kv[0]]):
        label = ", ".join(f"{q} = {v}" for q, v in zip(others, combo, strict=True))
        out[label] = sorted(((dict(p.overrides)[param], ok[p.key]["makespan"], ok[p.key]["lower_bound"])
                             for p in ps), key=lambda t: _num(t[0]))
    return out


def _param_plot(spec: Any, ok: dict[str, dict[str, Any]], param: str, outdir: Path) -> Path:
    plt = _plt()
    graphs = [g for g in spec.graphs if any(p.graph == g and p.key in ok for p in spec.points)]
    fig, axes = plt.subplots(len(graphs), 1, figsize=(7.5, 3.4 * len(graphs)), squeeze=False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, g in zip(axes[:, 0], graphs, strict=True):
        for k, (label, pts) in enumerate(_series(spec, ok, g, param).items()):
            c = palette[k % len(palette)]
            x = [_num(v) for v, _, _ in pts]
            name = f"makespan, {label}" if label else "makespan"
            ax.plot(x, [m for _, m, _ in pts], "o-", color=c, label=name)
            ax.plot(x, [b for _, _, b in pts], "--", color=c, alpha=0.7, label="lower bound")
        ax.set_title(Path(g.name).name, fontsize=10)
        ax.set_xlabel(_label(param))
        ax.set_ylabel("cycles")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"makespan (solid) and lower bound (dashed) against {param}")
    fig.tight_layout()
    return _save(fig, outdir / f"makespan_vs_{_slug(param)}.png")


def _heatmaps(spec: Any, ok: dict[str, dict[str, Any]], outdir: Path) -> list[Path]:
    plt = _plt()
    px, py = spec.params
    out = []
    for g in spec.graphs:
        pts = [p for p in spec.points if p.graph == g]
        if not any(p.key in ok for p in pts):
            continue
        xs = sorted({dict(p.overrides)[px] for p in pts}, key=_num)
        ys = sorted({dict(p.overrides)[py] for p in pts}, key=_num)
        grid = [[float("nan")] * len(xs) for _ in ys]
        text = [["failed"] * len(xs) for _ in ys]
        for p in pts:
            ov = dict(p.overrides)
            i, j = ys.index(ov[py]), xs.index(ov[px])
            if p.key not in ok:
                continue
            ms, lb = ok[p.key]["makespan"], ok[p.key]["lower_bound"]
            grid[i][j] = ms
            text[i][j] = f"{ms:,}\n+{100 * (ms / lb - 1):.1f}% vs bound" if lb else f"{ms:,}"
        fig, ax = plt.subplots(figsize=(1.7 * len(xs) + 2.8, 0.9 * len(ys) + 2))
        im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(_label(px))
        ax.set_ylabel(_label(py))
        vals = [v for row in grid for v in row if v == v]
        mid = (min(vals) + max(vals)) / 2
        for i, row in enumerate(text):
            for j, t in enumerate(row):
                v = grid[i][j]
                # dark text on the light (high) end of viridis, light text on the dark end
                colour = "black" if v == v and v > mid else "white" if v == v else "grey"
                ax.text(j, i, t, ha="center", va="center", fontsize=7, color=colour)
        fig.colorbar(im, ax=ax, label="makespan (cycles)")
        ax.set_title(f"{Path(g.name).name}: makespan in cycles, and its gap to the lower bound",
                     fontsize=9)
        out.append(_save(fig, outdir / f"heatmap_{_slug(Path(g.name).stem)}.png"))
    return out


def tune_picture(rows: Sequence[Any], title: str) -> bytes:
    """PNG of a tuning run (rows: :class:`~staticsched.explore.tune.Row`). Top: the makespan
    of every scheduled candidate, best first, its lower bound drawn on its bar, the baseline
    (the tiling ``schedule`` uses) hatched. Bottom: the lower bound of every candidate, in
    order, against the best makespan: those above the line cannot beat it (pruned)."""
    plt = _plt()
    from matplotlib.patches import Patch

    done = sorted((r for r in rows if r.makespan is not None and r.same_as is None),
                  key=lambda r: (r.makespan, r.index))
    fig, (top, low) = plt.subplots(2, 1, figsize=(max(7.5, 0.32 * len(done) + 2.5), 8.5),
                                   gridspec_kw={"height_ratios": [3, 2]})
    x = list(range(len(done)))
    colour = {"list": "#4c72b0", "cpsat": "#55a868"}
    top.bar(x, [r.makespan for r in done], color=[colour.get(r.method, "grey") for r in done],
            hatch=["//" if r.baseline else "" for r in done], edgecolor="white")
    (tick,) = top.plot(x, [r.bound if r.bound is not None else r.work_bound for r in done], "_",
                       color="#dd8452", markersize=12, mew=2.5, label="lower bound")
    handles = [Patch(color=c, label=f"makespan ({'CP-SAT' if m == 'cpsat' else 'list scheduler'})")
               for m, c in colour.items()]
    handles += [Patch(facecolor="white", edgecolor="grey", hatch="//", label="baseline tiling"), tick]
    top.set_xticks(x, [r.label for r in done], rotation=70, fontsize=6, ha="right")
    top.set_xlabel("scheduled candidate (task: base sizes; sb single buffered), best first")
    top.set_ylabel("cycles")
    if done:
        lo = min(min(r.makespan for r in done), min(r.bound or r.work_bound for r in done))
        top.set_ylim(bottom=0.8 * lo)
    top.grid(True, axis="y", alpha=0.3)
    top.legend(handles=handles, fontsize=7, loc="upper left")
    top.set_title(title, fontsize=9)
    ranked = sorted(rows, key=lambda r: (r.bound if r.bound is not None else r.work_bound, r.index))
    status_colour = {"pruned": "#b0b0b0", "capped": "#dd8452", "failed": "#c44e52", "duplicate": "#8172b3"}
    for status in ("pruned", "capped", "duplicate", "failed", "scheduled"):
        pts = [(i, r.bound if r.bound is not None else r.work_bound) for i, r in enumerate(ranked)
               if (r.status == status or (status == "scheduled" and r.status == "best"))]
        if pts:
            low.scatter([p[0] for p in pts], [p[1] for p in pts], s=6,
                        color=status_colour.get(status, "#4c72b0"), label=f"{status} ({len(pts)})")
    if done:
        low.axhline(done[0].makespan, color="#55a868", lw=1.2, label=f"best makespan {done[0].makespan}")
    low.set_yscale("log")
    low.set_xlabel("candidate tilings, in order of their lower bound")
    low.set_ylabel("lower bound (cycles, log scale)\nthe solver's where lowered, else the cheap one",
                   fontsize=8)
    low.grid(True, alpha=0.3)
    low.legend(fontsize=7, loc="upper left", markerscale=3)
    fig.tight_layout()
    return _png(fig)
