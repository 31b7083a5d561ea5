"""Classic job-shop instances (``benchmarks/jobshop/``) as OpGraphs.

A job shop maps onto the execution model directly
(``benchmarks/synthetic.py``: :func:`job_shop`): one core, one unit (pipe) per machine, each
job a chain of explicit dependencies, no items. The data files are in the OR-Library format
(first line ``jobs machines``, then per job ``machine duration`` pairs in processing order);
``instances.csv`` holds each instance's optimum or bounds and source (see
``benchmarks/jobshop/README.md``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import attrs

from benchmarks.synthetic import job_shop
from staticsched.model.hardware import Hardware
from staticsched.model.opgraph import OpGraph

DATA = Path(__file__).resolve().parent / "jobshop"


@attrs.frozen
class JobshopInfo:
    """An instance's size, its known bounds (``best`` = optimum or best known upper bound) and
    the source key of ``README.md``."""

    name: str
    jobs: int
    machines: int
    optimum: int | None
    lower: int
    best: int
    source: str


def _read_index() -> dict[str, JobshopInfo]:
    out = {}
    with open(DATA / "instances.csv", newline="") as f:
        for row in csv.DictReader(f):
            opt = int(row["optimum"]) if row["optimum"] else None
            out[row["name"]] = JobshopInfo(
                row["name"], int(row["jobs"]), int(row["machines"]), opt,
                int(row["lower_bound"]), int(row["upper_bound"]), row["source"],
            )
    return out


INSTANCES: dict[str, JobshopInfo] = _read_index()
#: larger Taillard instances (400-2,000 ops) used to calibrate the time budget and to place
#: the portfolio's thresholds; the benchmark's job-shop family is the others
EXTRA = ("ta21", "ta41", "ta51", "ta61", "ta71")
FAMILY = tuple(name for name in INSTANCES if name not in EXTRA)


def parse_orlib(text: str) -> list[list[tuple[int, int]]]:
    """Jobs as lists of ``(machine, duration)`` from OR-Library text."""
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    jobs, machines = int(lines[0][0]), int(lines[0][1])
    out = []
    for row in lines[1 : 1 + jobs]:
        vals = [int(x) for x in row]
        if len(vals) != 2 * machines:
            raise ValueError(f"job row has {len(vals)} numbers, expected {2 * machines}")
        out.append([(vals[2 * k], vals[2 * k + 1]) for k in range(machines)])
    if len(out) != jobs:
        raise ValueError(f"{len(out)} job rows, expected {jobs}")
    return out


def load_jobshop(name: str) -> tuple[OpGraph, Hardware, JobshopInfo]:
    """Instance ``name`` (e.g. ``"ft10"``) as an OpGraph, its hardware and its metadata."""
    info = INSTANCES[name]
    jobs = parse_orlib((DATA / f"{name}.txt").read_text())
    return (*job_shop(jobs), info)
