"""Hardware model: presets load, every file error names the file and the key."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest
from common import preset

from staticsched.errors import HardwareError, StaticschedError
from staticsched.model.hardware_toml import hardware_from_dict, list_presets, load_hardware


def _preset_dict(name: str = "double-buffer-demo") -> dict:
    text = (resources.files("staticsched") / "presets" / f"{name}.toml").read_text()
    return tomllib.loads(text)


def test_presets_listed_and_loadable():
    names = list_presets()
    assert "seed-davinci" in names and "double-buffer-demo" in names
    for name in names:
        hw = load_hardware(name)
        assert hw.name == name


def test_seed_davinci_numbers_from_the_seed():
    hw = preset("seed-davinci")
    assert hw.cores == 16 and hw.clock_ghz == 1.8
    caps = {s.name: s.capacity for s in hw.spaces}
    assert caps == {
        "GM": 0,
        "HBM": 0,
        "L1": 512 * 1024,
        "L0A": 64 * 1024,
        "L0B": 64 * 1024,
        "L0C": 256 * 1024,
        "UB": 256 * 1024,
    }
    # 16x16x16 fractal per cycle: a 128^3 tile is 2,097,152 MACs / 4096 = 512 cycles
    assert hw.cube.cycles(128, 128, 128) == 512
    # tails pad to the fractal: 1x128x128 costs as 16x128x128
    assert hw.cube.cycles(1, 128, 128) == hw.cube.cycles(16, 128, 128) == 64
    assert hw.unit_names == ("MTE2", "MTE1", "CUBE", "FIXPIPE", "VECTOR", "MTE3")
    assert hw.path("GM", "L1").cycles(32768) == 32 + 32768 // 240 + 1


def test_seed_links_follow_their_sources():
    # 7 TB/s L2 and the seed's 1 TB/s HBM at 1.8 GHz
    hw = preset("seed-davinci")
    l2, hbm = hw.links
    assert (l2.name, l2.bytes_per_cycle) == ("L2", 3888) and int(7e12 / 1.8e9) == 3888
    assert (hbm.name, hbm.bytes_per_cycle) == ("HBM", 555) and int(1e12 / 1.8e9) == 555
    assert hw.links_of("GM", "L1") == (l2,) and hw.links_of("UB", "HBM") == (hbm,)
    assert hw.links_of("L1", "L0A") == ()
    (only,) = preset("seed-davinci-hbm").links
    assert only.bytes_per_cycle == 555 and set(only.paths) == {("GM", "L1"), ("GM", "UB"), ("UB", "GM")}


@pytest.mark.parametrize(
    ("links", "needle"),
    [
        ([{"paths": ["GM->L9"]}], "link 'X': unknown path 'GM->L9' (declared [[paths]]: "),
        ([{"paths": ["GM to L1"]}], "link 'X': path 'GM to L1' must be written 'SRC->DST'"),
        ([{"bytes_per_cycle": 0}], "link 'X': 'bytes_per_cycle' must be > 0, got 0"),
        ([{"bytes_per_cycle": -3}], "link 'X': 'bytes_per_cycle' must be > 0, got -3"),
        ([{"bytes_per_cycle": 0.3}], "link 'X': 'bytes_per_cycle' = 0.3 must be a multiple of 1/64"),
        ([{}, {}], "link 'X': duplicate link name"),
        ([{"paths": []}], "link 'X': 'paths' names no transfer path"),
        ([{"paths": ["GM->L1", "GM->L1"]}], "link 'X': path 'GM->L1' listed twice"),
        ([{"speed": 3}], "link 'X': unknown key 'speed'"),
    ],
)
def test_bad_links_are_one_line_each(links, needle):
    d = _preset_dict("seed-davinci")
    d["links"] = [{"name": "X", "bytes_per_cycle": 100, "paths": ["GM->L1"], **x} for x in links]
    with pytest.raises(HardwareError) as exc:
        hardware_from_dict(d, "bad.toml")
    assert len(exc.value.problems) == 1, exc.value.problems
    assert exc.value.problems[0] == f"bad.toml: {needle}" or needle in exc.value.problems[0]


def test_load_from_path(tmp_path):
    src = (resources.files("staticsched") / "presets" / "double-buffer-demo.toml").read_text()
    f = tmp_path / "hw.toml"
    f.write_text(src.replace("capacity = 65536", "capacity = 32768"))
    assert load_hardware(str(f)).space("L1").capacity == 32768


def _bad(mutate) -> str:
    d = _preset_dict()
    mutate(d)
    with pytest.raises(HardwareError) as exc:
        hardware_from_dict(d, "bad.toml")
    return str(exc.value)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(colour="red"), "bad.toml: unknown key 'colour'"),
        (lambda d: d.pop("name"), "missing required key 'name'"),
        (lambda d: d.update(cores=0), "'cores' = 0 is below the minimum 1"),
        (lambda d: d.update(cores="16"), "'cores' must be an integer"),
        (lambda d: d.update(clock_ghz=float("nan")), "'clock_ghz' must be finite"),
        (lambda d: d.update(clock_ghz=-1.0), "'clock_ghz' must be > 0"),
        (lambda d: d["spaces"]["L1"].update(capacity=-5), "spaces.L1: 'capacity' = -5"),
        # a typo must not give infinite on-chip memory: unbounded is explicit
        # and the old spelling of unbounded says what to write instead
        (lambda d: d["spaces"]["L1"].update(capacity=0),
         "spaces.L1: 'capacity' = 0 no longer means unbounded; write `unbounded = true`"),
        (lambda d: d["spaces"]["L1"].pop("capacity"), "spaces.L1: missing required key 'capacity'"),
        (lambda d: d["spaces"]["L1"].update(unbounded=True), "spaces.L1: give either 'capacity' or"),
        (lambda d: d["spaces"]["L1"].update(unbounded="yes"), "spaces.L1: 'unbounded' must be true or false"),
        (lambda d: d["spaces"]["L1"].update(size=5), "spaces.L1: unknown key 'size'"),
        (lambda d: d["spaces"]["L1"].update(alignment=0), "spaces.L1: 'alignment' = 0"),
        (lambda d: d["units"].update(DMA=3), "units.DMA: must be a table"),
        (lambda d: d.pop("units"), "missing required key 'units'"),
        (lambda d: d["sync"].update(event_ids=-1), "sync: 'event_ids' = -1"),
        (
            lambda d: d["sync"].update(flag_latency=4, cross_core_latency=1),
            "'cross_core_latency' = 1 must be >= 'flag_latency' = 4",
        ),
        (lambda d: d["sync"].update(flag_latancy=1), "sync: unknown key 'flag_latancy'"),
        (
            lambda d: d.update(paths=[{"unit": "NOPE", "src": "GM", "dst": "L1", "bytes_per_cycle": 1}]),
            "paths[0]: unknown unit 'NOPE'",
        ),
        (
            lambda d: d.update(paths=[{"unit": "DMA", "src": "GM", "dst": "L9", "bytes_per_cycle": 1}]),
            "paths[0]: unknown space 'L9'",
        ),
        (
            lambda d: d.update(paths=[{"unit": "DMA", "src": "GM", "dst": "L1", "bytes_per_cycle": 0}]),
            "paths[0]: 'bytes_per_cycle' must be > 0",
        ),
        (
            lambda d: d.update(cube={"unit": "CUBE", "macs_per_cycle": {"float9": 4}}),
            "cube: macs_per_cycle: unknown dtype 'float9'",
        ),
        (
            lambda d: d.update(cube={"unit": "CUBE", "fractal": [16, 16], "macs_per_cycle": {"float16": 4}}),
            "cube: 'fractal' must be three positive integers",
        ),
        (lambda d: d.update(vector={"unit": "VPU", "bytes_per_cycle": 4}), "vector: unknown unit 'VPU'"),
    ],
)
def test_hardware_errors_name_the_key(mutate, needle):
    assert needle in _bad(mutate)


def test_all_problems_reported_at_once():
    def mutate(d):
        d.update(cores=0, colour="red")
        d["sync"]["event_ids"] = "many"

    msg = _bad(mutate)
    assert len(msg.splitlines()) == 3


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(HardwareError, match="no such hardware file or preset"):
        load_hardware(str(tmp_path / "nope.toml"))
    f = tmp_path / "broken.toml"
    f.write_text("name = [unclosed\n")
    with pytest.raises(HardwareError, match=r"broken\.toml: not valid TOML"):
        load_hardware(str(f))
    assert issubclass(HardwareError, StaticschedError)
