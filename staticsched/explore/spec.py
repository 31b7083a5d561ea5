"""Sweep specifications: a cartesian product of hardware overrides and graphs, in TOML.

.. code-block:: toml

    [sweep]
    hw = "seed-davinci"                      # base hardware: preset name or TOML path
    graphs = ["a.json", {path = "b.json", tune = true}]
    method = "cpsat"                         # options of every point (defaults shown)
    mode = "flags"
    time_limit = 10.0
    seed = 0
    verify = false                           # verify each program (3 jittered replays)

    [overrides]                              # hardware key path -> the values to sweep
    "spaces.L1.capacity" = [131072, 262144, 524288]
    "sync.event_ids" = [1, 2, 4, 8]

Paths are relative to the spec file. Every problem of a spec is found before any point runs:
unknown keys, key paths that name nothing in the base hardware, values that make it invalid
(each override hardware is built up front), missing graph files, an empty product.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from pathlib import Path
from typing import Any

import attrs

from staticsched._fields import (
    Problems,
    check_keys,
    get_bool,
    get_list,
    get_mapping,
    get_number,
    get_str,
    read_text_file,
)
from staticsched.errors import InputError, StaticschedError
from staticsched.explore.overrides import override_hardware
from staticsched.model.hardware_toml import hardware_document
from staticsched.options import METHODS, MODES

_SWEEP_KEYS = ("hw", "graphs", "method", "mode", "time_limit", "seed", "verify", "name")


@attrs.frozen
class GraphRef:
    """A graph of the sweep: its path (as written, and resolved) and whether to tune it."""

    name: str
    path: str
    tune: bool = False


@attrs.frozen
class Point:
    """One point of a sweep: a graph, the override values, and the options."""

    index: int
    graph: GraphRef
    overrides: tuple[tuple[str, Any], ...] = attrs.field(converter=tuple)
    hw: str
    method: str
    mode: str
    time_limit: float
    seed: int
    verify: bool

    @property
    def key(self) -> str:
        """A stable name of the point's inputs: its result file is ``points/<key>.json``."""
        text = json.dumps([self.graph.name, self.graph.tune, list(map(list, self.overrides)),
                           self.hw, self.method, self.mode, self.time_limit, self.seed, self.verify],
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@attrs.frozen
class SweepSpec:
    """A parsed sweep: its base hardware, graphs, swept parameters and every point."""

    source: str
    hw: str
    params: tuple[str, ...] = attrs.field(converter=tuple)
    graphs: tuple[GraphRef, ...] = attrs.field(converter=tuple)
    points: tuple[Point, ...] = attrs.field(converter=tuple)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec.

    Raises
    ------
    InputError
        One line per problem, all of them, before anything runs.
    """
    path = Path(path)
    where = str(path)
    text = read_text_file(path, InputError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from None
    pr = Problems()
    check_keys(data, ("sweep", "overrides"), where, pr)
    sw = get_mapping(data, "sweep", where, pr, required=True)
    w = f"{where}: sweep"
    check_keys(sw, _SWEEP_KEYS, w, pr)
    hw_name = get_str(sw, "hw", w, pr)
    base = path.parent
    hw_ref = hw_name
    if hw_name and (base / hw_name).is_file():
        hw_ref = str((base / hw_name).resolve())
    method = get_str(sw, "method", w, pr, default="cpsat", choices=METHODS)
    mode = get_str(sw, "mode", w, pr, default="flags", choices=MODES)
    time_limit = get_number(sw, "time_limit", w, pr, default=10.0, positive=True)
    seed = sw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        pr.add(f"{w}: 'seed' must be an integer >= 0, got {seed!r}")
        seed = 0
    verify = get_bool(sw, "verify", w, pr, default=False)

    graphs = _read_graphs(sw, base, w, pr)
    overrides = get_mapping(data, "overrides", where, pr)
    params = sorted(overrides)
    values: list[list[Any]] = []
    for key in params:
        vals = overrides[key]
        if not isinstance(vals, list):
            pr.add(f"{where}: overrides: '{key}' must be a list of values, got {vals!r}")
            vals = []
        elif not vals:
            pr.add(f"{where}: overrides: '{key}' has no values (the product would be empty)")
        elif any(isinstance(v, dict | list) for v in vals):
            pr.add(f"{where}: overrides: '{key}' values must be numbers, strings or booleans")
            vals = []
        values.append(vals)
    if "graphs" in sw and not graphs and not pr:
        pr.add(f"{w}: 'graphs' is empty (the product would be empty)")
    pr.raise_if_any(InputError)

    try:
        doc, hw_where = hardware_document(hw_ref)
    except StaticschedError as exc:
        raise InputError([f"{where}: sweep.hw: {p}" for p in exc.problems]) from None
    # every override hardware is built now, so a bad key path or value stops the sweep before
    # any point runs
    combos = list(itertools.product(*values))
    for combo in combos:
        try:
            override_hardware(doc, hw_where, dict(zip(params, combo, strict=True)))
        except StaticschedError as exc:
            for p in exc.problems:
                line = f"{where}: overrides: {p}"
                if line not in pr.lines:
                    pr.add(line)
    pr.raise_if_any(InputError)
    points = []
    for g in graphs:
        for combo in combos:
            points.append(Point(len(points), g, tuple(zip(params, combo, strict=True)), hw_ref,
                                method, mode, time_limit, seed, verify))
    return SweepSpec(where, hw_ref, params, graphs, points)


def _read_graphs(sw: dict[str, Any], base: Path, w: str, pr: Problems) -> list[GraphRef]:
    out = []
    for i, raw in enumerate(get_list(sw, "graphs", w, pr)):
        gw = f"{w}: graphs[{i}]"
        tune = False
        if isinstance(raw, dict):
            check_keys(raw, ("path", "tune"), gw, pr)
            name = get_str(raw, "path", gw, pr)
            tune = get_bool(raw, "tune", gw, pr, default=False)
        elif isinstance(raw, str):
            name = raw
        else:
            pr.add(f"{gw}: must be a path or a table {{path = ..., tune = true}}, got {raw!r}")
            continue
        if not name:
            continue
        full = base / name
        if not full.is_file():
            pr.add(f"{gw}: no such graph file '{name}' (relative to {base})")
            continue
        out.append(GraphRef(name, str(full.resolve()), tune))
    return out
