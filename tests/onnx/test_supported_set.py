"""The supported set of ONNX's backend test cases is the documented one.

A case is supported when staticsched imports its model (its parameter inputs bound to the
first data set's values, as the backend's first run binds them); the backend suite
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

from staticsched.errors import InputError, ModelError
from staticsched.model.hardware_toml import load_hardware
from staticsched.onnx import import_model
from staticsched.onnx.backend import bind_parameters, parameter_inputs

LISTED = Path(__file__).with_name("supported_cases.txt")


def _imports(model) -> bool:
    try:
        import_model(model, load_hardware("seed-davinci"))
    except ModelError:
        return False
    return True


def _bound(case, model):
    """``model`` with its parameter inputs bound to the values of the case's first data set
    (what the backend's first run compiles; staticsched.onnx.backend.SpecializedRep)."""
    import onnx
    from onnx import numpy_helper

    params = parameter_inputs(model)
    if not params:
        return model
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    if case.data_sets:
        values = dict(zip(names, case.data_sets[0][0], strict=False))
    else:
        values = {}
        for j, name in enumerate(names):
            if name in params:
                t = onnx.TensorProto()
                t.ParseFromString((Path(case.model_dir) / "test_data_set_0" / f"input_{j}.pb").read_bytes())
                values[name] = numpy_helper.to_array(t)
    try:
        return bind_parameters(model, {n: values[n] for n in params})
    except (InputError, KeyError):
        return model


def test_supported_set_is_the_documented_one():
    import onnx

    found = set()
    for kind in ("node", "pytorch-converted", "pytorch-operator", "simple"):
        for case in load_model_tests(kind=kind):
            model = case.model
            if model is None and case.model_dir is not None:
                model = onnx.load(str(Path(case.model_dir) / "model.onnx"))
            if model is not None and _imports(_bound(case, model)):
                found.add(case.name)
    listed = {line.strip() for line in LISTED.read_text().splitlines() if line.strip()}
    assert sorted(found - listed) == [], "cases now imported: rerun benchmarks/onnx_conformance.py --write"
    assert sorted(listed - found) == [], "documented cases no longer imported"
