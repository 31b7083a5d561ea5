"""``gantt.svg``: one lane per (core, pipe), every pipe of the hardware shown, ops as bars.

Small schedules get one rectangle per op with a tooltip (``<title>``). Large ones are
aggregated so the file stays small: each lane is cut into time bins shaded by how busy the
pipe is in the bin, and beyond :data:`MAX_CORES` cores only the first ones are drawn. The
picture says in its header what was aggregated or left out.
"""

from __future__ import annotations

import math
import re
from xml.sax.saxutils import escape

import numpy as np

from staticsched.model.hardware import RATE_DENOM
from staticsched.model.links import link_usage
from staticsched.model.placement import OpTime
from staticsched.model.schedule import Schedule

#: above this many ops in the drawn cores, lanes are drawn as busy-fraction bins
MAX_RECTS = 4000
#: at most this many cores are drawn
MAX_CORES = 16
#: time bins per lane when aggregating
BINS = 300

_LABEL_W, _PLOT_W, _RIGHT = 120, 1100, 20
_LANE_H, _LANE_GAP = 14, 3
_KIND_COLOURS = {
    "load": "#4e79a7",
    "move": "#59a14f",
    "mmad": "#e15759",
    "fixpipe": "#f28e2b",
    "vec": "#b07aa1",
    "store": "#76b7b2",
}
_UNIT_COLOURS = ("#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
# characters XML 1.0 forbids even when escaped
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(s: str) -> str:
    return escape(_NOT_XML.sub("?", s))


def _tick_step(span: int) -> int:
    raw = max(1, span / 8)
    base = 10 ** math.floor(math.log10(raw))
    return int(next(m * base for m in (1, 2, 5, 10) if m * base >= raw))


def render_gantt(schedule: Schedule) -> str:
    """The SVG text of the Gantt chart of ``schedule`` (see the module docstring)."""
    hw, graph = schedule.hw, schedule.graph
    units = list(hw.unit_names) + sorted({t.unit for t in schedule.ops} - set(hw.unit_names))
    all_cores = sorted({t.core for t in schedule.ops}) or [0]
    cores = all_cores[:MAX_CORES]
    drawn = [t for t in schedule.ops if t.core in set(cores)]
    aggregate = len(drawn) > MAX_RECTS
    span = max(schedule.makespan, max((t.end for t in schedule.ops), default=0), 1)
    scale = _PLOT_W / span

    notes = []
    if len(all_cores) > len(cores):
        notes.append(f"showing cores {cores[0]}..{cores[-1]} of {len(all_cores)} cores (the rest left out)")
    if aggregate:
        notes.append(
            f"aggregated: {len(drawn)} ops drawn as {BINS} time bins per lane "
            f"({span / BINS:.1f} cycles each), darker = busier"
        )
    title = (
        f"{hw.name}: makespan {schedule.makespan} cycles ({hw.cycles_to_us(schedule.makespan):.3f} us), "
        f"{schedule.status}, {len(schedule.ops)} ops"
    )
    top = 30 + 14 * len(notes) + 20
    # a split chip's core has the lanes of its type only (an AIV has no Cube)
    lanes = [(c, u) for c in cores for u in units if hw.core_has_unit(c, u)]
    uses = link_usage(schedule)
    height = top + (len(lanes) + len(uses)) * (_LANE_H + _LANE_GAP) + 10
    width = _LABEL_W + _PLOT_W + _RIGHT
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="4" y="16" font-size="13">{_text(title)}</text>',
    ]
    out += [f'<text x="4" y="{32 + 14 * k}" fill="#a33">{_text(n)}</text>' for k, n in enumerate(notes)]
    step = _tick_step(span)
    for t in range(0, span + 1, step):
        x = _LABEL_W + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 10}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" fill="#555">{t}</text>')
    by_lane: dict[tuple[int, str], list[OpTime]] = {lane: [] for lane in lanes}
    for t in drawn:
        by_lane[(t.core, t.unit)].append(t)
    for k, (core, unit) in enumerate(lanes):
        y = top + k * (_LANE_H + _LANE_GAP)
        ct = hw.core_type(core)
        label = f"c{core}.{unit}" if ct is None else f"c{core} {ct.name}.{unit}"
        out.append(f'<text x="4" y="{y + _LANE_H - 3}">{_text(label)}</text>')
        out.append(
            f'<rect x="{_LABEL_W}" y="{y}" width="{_PLOT_W}" height="{_LANE_H}" fill="#f4f4f4"><title>'
            f"{_text(label)}</title></rect>"
        )
        ops = sorted(by_lane[(core, unit)], key=lambda t: t.start)
        colour = _UNIT_COLOURS[units.index(unit) % len(_UNIT_COLOURS)]
        if aggregate:
            out += _bins(ops, y, span, scale, colour, label)
            continue
        for t in ops:
            kind = graph.op(t.id).kind
            fill = _KIND_COLOURS.get(kind, colour)
            x, w = _LABEL_W + t.start * scale, max((t.end - t.start) * scale, 0.5)
            out.append(
                f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{_LANE_H}" fill="{fill}" '
                f'stroke="white" stroke-width="0.3"><title>'
                f"{_text(t.id)} ({kind or 'op'}) [{t.start}, {t.end})</title></rect>"
            )
    for k, use in enumerate(uses):
        y = top + (len(lanes) + k) * (_LANE_H + _LANE_GAP)
        label = f"link {use.name}"
        out.append(f'<text x="4" y="{y + _LANE_H - 3}">{_text(label)}</text>')
        out.append(
            f'<rect x="{_LABEL_W}" y="{y}" width="{_PLOT_W}" height="{_LANE_H}" fill="#eef"><title>'
            f"{_text(label)}: {use.bytes_per_cycle:g} B/cycle, {100 * use.utilisation:.1f}% used over "
            f"the makespan</title></rect>"
        )
        out += _link_bins(use, y, span, scale, label)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _link_bins(use, y: int, span: int, scale: float, label: str) -> list[str]:
    """A link's occupancy: per time bin the share of its bandwidth held, as the height of a
    bar (full lane = the whole bandwidth)."""
    if not use.holds:
        return []
    edges = np.linspace(0, span, BINS + 1)
    width = edges[1] - edges[0]
    held = np.zeros(BINS)
    cap = use.bytes_per_cycle * RATE_DENOM
    for b, e, u in use.holds:
        lo = int(np.searchsorted(edges, b, side="right") - 1)
        hi = int(np.searchsorted(edges, e, side="left"))
        for k in range(max(lo, 0), min(hi, BINS)):
            overlap = min(e, edges[k + 1]) - max(b, edges[k])
            if overlap > 0:
                held[k] += overlap * u
    share = np.clip(held / (width * cap), 0, 1)
    out = []
    for k in range(BINS):
        if share[k] <= 0:
            continue
        h = share[k] * _LANE_H
        out.append(
            f'<rect x="{_LABEL_W + edges[k] * scale:.2f}" y="{y + _LANE_H - h:.2f}" '
            f'width="{width * scale:.2f}" height="{h:.2f}" fill="#4455aa"><title>{_text(label)} '
            f"cycles [{edges[k]:.0f}, {edges[k + 1]:.0f}): {100 * share[k]:.0f}% of the bandwidth"
            f"</title></rect>"
        )
    return out


def _bins(ops: list[OpTime], y: int, span: int, scale: float, colour: str, label: str) -> list[str]:
    """Busy-fraction rectangles of one lane: 10 shades, equal neighbours merged."""
    if not ops:
        return []
    starts = np.array([t.start for t in ops], dtype=np.float64)
    durs = np.array([t.end - t.start for t in ops], dtype=np.float64)
    done = np.concatenate(([0.0], np.cumsum(durs)))
    edges = np.linspace(0, span, BINS + 1)
    # busy cycles before time e: ops that ended, plus the running part of the one containing e
    k = np.searchsorted(starts, edges, side="right") - 1
    j = np.maximum(k, 0)
    busy = np.where(k >= 0, done[j] + np.minimum(edges - starts[j], durs[j]), 0.0)
    frac = np.diff(busy) / np.diff(edges)
    level = np.clip(np.ceil(frac * 10 - 1e-9), 0, 10).astype(int)
    out = []
    b = 0
    while b < BINS:
        e = b
        while e + 1 < BINS and level[e + 1] == level[b]:
            e += 1
        if level[b] > 0:
            x0, x1 = edges[b], edges[e + 1]
            out.append(
                f'<rect x="{_LABEL_W + x0 * scale:.2f}" y="{y}" width="{(x1 - x0) * scale:.2f}" '
                f'height="{_LANE_H}" fill="{colour}" fill-opacity="{level[b] / 10:.1f}"><title>'
                f"{_text(label)} cycles [{x0:.0f}, {x1:.0f}): "
                f"{100 * float(np.mean(frac[b : e + 1])):.0f}% busy</title></rect>"
            )
        b = e + 1
    return out
