"""The supported set of ONNX's backend test cases is the documented one.

A case is supported when staticsched imports its model; the backend suite
(``test_backend_suite.py``) must pass every supported case and skips the others with the
importer's reason. This test keeps the skips from hiding a regression: the cases that import
must be exactly those listed in ``supported_cases.txt`` (written with docs/onnx.md's table by
``benchmarks/onnx_conformance.py --write``), so a supported case that starts being refused
fails here instead of turning into one more skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx")

from onnx.backend.test.loader import load_model_tests

from staticsched.errors import ModelError
from staticsched.model.hardware_toml import load_hardware
from staticsched.onnx import import_model

LISTED = Path(__file__).with_name("supported_cases.txt")


def _imports(model) -> bool:
    try:
        import_model(model, load_hardware("seed-davinci"))
    except ModelError:
        return False
    return True


def test_supported_set_is_the_documented_one():
    import onnx

    found = set()
    for kind in ("node", "pytorch-converted", "pytorch-operator", "simple"):
        for case in load_model_tests(kind=kind):
            model = case.model
            if model is None and case.model_dir is not None:
                model = onnx.load(str(Path(case.model_dir) / "model.onnx"))
            if model is not None and _imports(model):
                found.add(case.name)
    listed = {line.strip() for line in LISTED.read_text().splitlines() if line.strip()}
    assert sorted(found - listed) == [], "cases now imported: rerun benchmarks/onnx_conformance.py --write"
    assert sorted(listed - found) == [], "documented cases no longer imported"
