"""Sweeps: spec checking before anything runs, resumable per-point results, one results.csv for
both backends (a real local Ray instance included), plots."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from common import ROOT

from staticsched.cli import main
from staticsched.errors import InputError
from staticsched.explore import load_sweep, run_sweep
from staticsched.explore.overrides import override_hardware
from staticsched.model.hardware_toml import hardware_document

EX = ROOT / "examples"


def _spec(tmp_path: Path, overrides: str, graphs: str = '["g.json"]', extra: str = "") -> Path:
    (tmp_path / "g.json").write_bytes((EX / "matmul_bias_gelu.json").read_bytes())
    (tmp_path / "c.json").write_bytes((EX / "chain.json").read_bytes())
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[sweep]\nhw = "seed-davinci"\ngraphs = {graphs}\nmethod = "list"\n{extra}\n'
                    f"[overrides]\n{overrides}\n")
    return spec


def test_key_paths_reach_every_table():
    doc, where = hardware_document("seed-davinci")
    hw = override_hardware(doc, where, {"spaces.L1.capacity": 131072, "sync.flag_latency": 3,
                                        "sync.cross_core_latency": 3, "cores": 4,
                                        "links.HBM.bytes_per_cycle": 300,
                                        "paths.GM->L1.bytes_per_cycle": 256, "vector.passes.gelu": 4.0})
    assert hw.space("L1").capacity == 131072 and hw.sync.flag_latency == 3 and hw.cores == 4
    assert hw.links[1].bytes_per_cycle == 300 and hw.path("GM", "L1").bytes_per_cycle == 256
    assert dict(hw.vector.passes)["gelu"] == 4.0
    assert doc["cores"] == 16  # the base document is not changed


@pytest.mark.parametrize(
    ("overrides", "graphs", "needle"),
    [
        ('"spaces.L9.capacity" = [1]', '["g.json"]', "no key 'L9' at 'spaces.L9' (has GM, HBM, L0A"),
        ('"sync.evnt_ids" = [1]', '["g.json"]', "no key 'evnt_ids' at 'sync'"),
        ('"links.XX.bytes_per_cycle" = [1]', '["g.json"]', "no link 'XX' (has L2, HBM)"),
        ('"spaces.L1.capacity" = ["big"]', '["g.json"]', "'capacity' must be an integer, got 'big'"),
        ('"sync.event_ids" = [-1]', '["g.json"]', "'event_ids' = -1 is below the minimum 0"),
        ('"sync.event_ids" = []', '["g.json"]', "has no values (the product would be empty)"),
        ('"sync.event_ids" = 3', '["g.json"]', "must be a list of values, got 3"),
        ('"sync.event_ids" = [1]', "[]", "'graphs' is empty (the product would be empty)"),
        ('"sync.event_ids" = [1]', '["nope.json"]', "no such graph file 'nope.json'"),
    ],
)
def test_bad_specs_fail_before_any_point_runs(tmp_path, capsys, overrides, graphs, needle):
    spec = _spec(tmp_path, overrides, graphs)
    code = main(["sweep", str(spec), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert all(line.startswith(f"staticsched: error: {spec}: ") for line in lines), lines
    assert any(needle in line for line in lines), lines
    assert not (tmp_path / "out").exists()


def test_unknown_spec_keys_are_reported_all_at_once(tmp_path):
    spec = _spec(tmp_path, '"sync.event_ids" = [1]', extra='colour = "red"\nmethod2 = 1')
    with pytest.raises(InputError) as err:
        load_sweep(spec)
    assert len(err.value.problems) == 2


def test_local_sweep_writes_rows_csv_and_plots_and_failures_do_not_stop_it(tmp_path):
    spec = load_sweep(_spec(tmp_path, '"spaces.L1.capacity" = [65536, 524288]\n"sync.event_ids" = [1, 8]',
                            '["g.json", "c.json"]'))
    assert len(spec.points) == 8
    results = run_sweep(spec, tmp_path / "o1", jobs=1)
    assert len(results) == 8
    lines = (tmp_path / "o1" / "results.csv").read_text().splitlines()
    head = lines[0].split(",")
    assert head[:5] == ["point", "graph", "tuned", "spaces.L1.capacity", "sync.event_ids"]
    for col in ("makespan", "lower_bound", "gap", "status", "util_CUBE", "gm_read_bytes", "bytes_L2",
                "error"):
        assert col in head
    rows = [dict(zip(head, line.split(","), strict=False)) for line in lines[1:]]
    # the explicit 128^3 tiling does not fit a 64 KiB L1: recorded, and the sweep went on
    failed = [r for r in rows if r["status"] == "error"]
    assert len(failed) == 2 and all(r["spaces.L1.capacity"] == "65536" for r in failed)
    assert all(int(r["makespan"]) >= int(r["lower_bound"]) for r in rows if r["status"] != "error")
    names = sorted(p.name for p in (tmp_path / "o1").iterdir())
    assert {"results.csv", "timings.csv", "points", "heatmap_g.png", "heatmap_c.png",
            "makespan_vs_spaces.L1.capacity.png", "makespan_vs_sync.event_ids.png"} <= set(names)
    assert (tmp_path / "o1" / "heatmap_g.png").read_bytes()[:4] == b"\x89PNG"
    # two processes give the same bytes
    run_sweep(spec, tmp_path / "o2", jobs=2)
    assert (tmp_path / "o1" / "results.csv").read_bytes() == (tmp_path / "o2" / "results.csv").read_bytes()


def test_a_rerun_skips_finished_points_and_a_killed_run_loses_only_running_ones(tmp_path):
    spec_path = _spec(tmp_path, '"sync.event_ids" = [1, 2, 3, 4, 5, 6, 7, 8]', '["c.json"]')
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "staticsched", "sweep", str(spec_path), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    points = out / "points"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(points.glob("*.json"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    kept = sorted(points.glob("*.json"))
    assert 3 <= len(kept) < 8, "kill the run halfway"
    # what a killed run left is complete, valid JSON (atomic writes), nothing half-written
    for f in kept:
        assert json.loads(f.read_text())["row"]["status"] != ""
    assert not [f for f in points.iterdir() if f.name.startswith(".")]
    before = {f.name: f.read_bytes() for f in kept}
    spec = load_sweep(spec_path)
    results = run_sweep(spec, out, jobs=1)
    assert len(results) == 8
    for name, data in before.items():
        assert (points / name).read_bytes() == data  # finished points were not run again
    fresh = run_sweep(spec, tmp_path / "fresh", jobs=1)
    assert {k: v["row"] for k, v in fresh.items()} == {k: v["row"] for k, v in results.items()}
    assert (out / "results.csv").read_bytes() == (tmp_path / "fresh" / "results.csv").read_bytes()


def test_ray_backend_matches_the_local_one(tmp_path):
    import ray  # the test install has the ray extra: this test must run, never skip
    spec = load_sweep(_spec(tmp_path, '"sync.event_ids" = [1, 4]\n"spaces.UB.capacity" = [131072, 262144]',
                            '["g.json", "c.json"]'))
    run_sweep(spec, tmp_path / "local", jobs=1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(spec, tmp_path / "ray", ray_address="auto")
    finally:
        ray.shutdown()
    local, remote = (tmp_path / d / "results.csv" for d in ("local", "ray"))
    assert local.read_bytes() == remote.read_bytes()
