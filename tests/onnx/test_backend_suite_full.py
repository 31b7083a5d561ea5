"""The supported cases of ONNX's backend suite with the full options (slow marker): CP-SAT
and three jittered replays, where the default run (``test_backend_suite.py``) schedules with
the list method and verifies without jitter to stay within CI's budget."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("onnx")

from test_backend_suite import ConformanceBackend, Fp16Runner

pytestmark = pytest.mark.slow

SUPPORTED = [line.strip() for line in Path(__file__).with_name("supported_cases.txt").read_text().splitlines()
             if line.strip()]


class FullBackend(ConformanceBackend):
    OPTIONS: ClassVar[dict[str, Any]] = {"method": "cpsat", "jitter": 3, "time_limit": 20.0}


full_test = Fp16Runner(FullBackend, __name__)
full_test.include("^(" + "|".join(re.escape(n) for n in SUPPORTED) + ")_cpu$")
globals().update(full_test.test_cases)
