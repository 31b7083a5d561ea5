"""Test configuration: Hypothesis profiles and the seed every property test explores with.

Runs are reproducible but not frozen. Every test draws its examples from one seed:

- ``STATICSCHED_TEST_SEED=N`` if set (to replay a run);
- else a seed derived from the commit under test (``git rev-parse HEAD``), so each commit
  explores new examples, and CI, on a clean clone of that commit, draws the same ones;
- else (no git) the fixed seed 0.

The seed is printed in the pytest header; ``STATICSCHED_TEST_SEED=<seed> python -m pytest ...``
(or pytest's ``--hypothesis-seed=<seed>``) reproduces a failure. ``default`` keeps the suite fast;
``thorough`` (``HYPOTHESIS_PROFILE=thorough``) multiplies the example counts of the end-to-end
properties, through ``common.examples``, into the thousands.

The tests mirror the package: the tests of ``staticsched/solver/`` are in ``tests/solver/``,
and so on; what they share is in this directory (``common.py``: paths, presets, the thorough
switch, the sequential replay; ``oracles.py``: the independent reference implementations;
``strategies.py`` and ``task_strategies.py``: Hypothesis strategies; ``mutations.py``,
``taskcases.py``, ``example_sets.py``).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from common import ROOT
from hypothesis import HealthCheck, core, settings

SEED_ENV = "STATICSCHED_TEST_SEED"

# no example database: what a run explores depends on the seed alone, not on earlier runs
settings.register_profile("default", deadline=None, derandomize=False, database=None, print_blob=True)
settings.register_profile(
    "thorough",
    deadline=None,
    derandomize=False,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def test_seed() -> tuple[int, str]:
    """The seed of this run and where it came from."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if raw:
        try:
            return int(raw), f"from ${SEED_ENV}"
        except ValueError:
            raise pytest.UsageError(f"{SEED_ENV} must be an integer, got {raw!r}") from None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    if len(head) >= 8 and all(c in "0123456789abcdef" for c in head):
        return int(head[:8], 16), f"from commit {head[:12]}"
    return 0, "fixed (no git commit found)"


test_seed.__test__ = False  # a helper, not a test


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("hypothesis_seed", None) is None:
        core.global_force_seed = test_seed()[0]


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("hypothesis_seed", None) is not None:
        return f"hypothesis seed: {config.getoption('hypothesis_seed')} (from --hypothesis-seed)"
    seed, origin = test_seed()
    return (
        f"hypothesis seed: {seed} ({origin}; replay with {SEED_ENV}={seed}), "
        f"profile {settings.get_current_profile_name()!r}"
    )


# --------------------------------------------------------------------------- run statistics

_STATS: list[str] = []


@pytest.fixture
def record_stat():
    """``record_stat(line)`` adds a line to the statistics printed after the run (e.g. how often a
    property met an input it may legitimately refuse)."""
    return _STATS.append


def pytest_terminal_summary(terminalreporter) -> None:
    if _STATS:
        terminalreporter.section("property statistics")
        for line in _STATS:
            terminalreporter.write_line(line)


#: modules that build a large suite when imported, and hold only slow tests: collected only
#: when the run selects slow tests (``-m slow``), not in the default run that deselects them
SLOW_ONLY_MODULES = ("test_backend_suite_full.py",)


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    if collection_path.name in SLOW_ONLY_MODULES:
        expr = (config.getoption("markexpr") or "").strip()
        if "slow" not in expr or expr == "not slow":
            return True
    return None
