"""ONNX's own backend test suite (``onnx.backend.test``) on :mod:`staticsched.onnx.backend`.

Every node test and every pytorch-converted and pytorch-operator model test runs: a case whose
ops, attributes, axes and dtypes are in the supported set must pass; any other case is skipped
with the importer's one-line reason (the :class:`~staticsched.errors.ModelError`), which
docs/onnx.md lists per op. ``test_skips_are_the_documented_ones`` keeps that list honest: a
supported case that starts being refused changes the counts and fails it.

The conformance run schedules with the list method and verifies without jitter, to stay
within CI's budget; the slow marker runs the suite with CP-SAT and three jittered replays.
"""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

import numpy as np
import pytest

pytest.importorskip("onnx")

import onnx.backend.test

from staticsched.errors import ModelError
from staticsched.onnx.backend import StaticschedBackend, incompatibility

#: fp16 compute of fp32 models (docs/onnx.md, "Tolerance"): every tensor is rounded to fp16
#: (unit roundoff 2^-11) at the model's inputs and at every task's output; 2^-7 allows a chain
#: of several such roundings and a K-long fp32-accumulated dot product of rounded operands
RTOL = ATOL = 2.0**-7


class ConformanceRep:
    """A prepared model whose ``run`` first checks that fp16 can hold the case's inputs."""

    def __init__(self, rep: Any, model: Any) -> None:
        self.rep, self.model = rep, model

    def run(self, inputs: Any, **kwargs: Any) -> Any:
        try:
            outputs = self.rep.run(inputs, **kwargs)
        except ModelError as exc:  # a model with parameter inputs is imported at its first run
            raise unittest.SkipTest("unsupported: " + "; ".join(exc.problems)) from None
        _fp16_inputs_hold(self.model, inputs)
        return outputs


def _fp16_inputs_hold(model: Any, inputs: Any) -> None:
    """Skip a case whose result fp16 inputs alone change beyond the tolerance (e.g. softmax of
    10000..10003, where fp16's spacing is 8): no fp16 program can pass it."""
    from onnx.reference import ReferenceEvaluator

    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    feeds = dict(zip(names, inputs, strict=False)) if not isinstance(inputs, dict) else inputs
    ref = ReferenceEvaluator(model)
    exact = ref.run(None, feeds)
    # integers (parameter inputs) are stored, not rounded
    rounded = ref.run(None, {k: np.asarray(v).astype(np.float16).astype(np.asarray(v).dtype)
                             if np.asarray(v).dtype.kind == "f" else v for k, v in feeds.items()})
    for i, (a, b) in enumerate(zip(exact, rounded, strict=True)):
        if not np.allclose(b, a, rtol=RTOL, atol=ATOL, equal_nan=True):
            err = float(np.nanmax(np.abs(b.astype(np.float64) - a)))
            raise unittest.SkipTest(f"fp16 inputs: rounding the inputs to float16 alone moves output {i} by "
                                    f"{err:.3g}, beyond the tolerance {RTOL:g}")


class ConformanceBackend(StaticschedBackend):
    """The backend with the conformance run's options; an unsupported model is a skip."""

    #: the fast run's: the list method, no jittered replay (the slow module's: CP-SAT, 3)
    OPTIONS: ClassVar[dict[str, Any]] = {"method": "list", "jitter": 0}

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        # the runner asks first; the skip carries the importer's reason, which
        # benchmarks/onnx_conformance.py tabulates (the base class only logs it)
        reasons = incompatibility(model, device, **{**cls.OPTIONS, **kwargs})
        if reasons:
            raise unittest.SkipTest("unsupported: " + "; ".join(reasons))
        return True

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **options: Any):  # type: ignore[override]
        for key, value in cls.OPTIONS.items():
            options.setdefault(key, value)
        options.pop("rtol", None)
        options.pop("atol", None)
        try:
            return ConformanceRep(super().prepare(model, device, **options), model)  # type: ignore[return-value]
        except ModelError as exc:
            raise unittest.SkipTest("unsupported: " + "; ".join(exc.problems)) from None


class Fp16Runner(onnx.backend.test.BackendTest):
    """ONNX's runner, comparing with the fp16 tolerance where the case's own is tighter."""

    @classmethod
    def assert_similar_outputs(cls, ref_outputs, outputs, rtol, atol, model_dir=None):  # type: ignore[override]
        super().assert_similar_outputs(ref_outputs, outputs, max(rtol, RTOL), max(atol, ATOL), model_dir)


#: the "real" models are downloaded from the internet; CI has none
REAL = (r"_real_|test_(bvlc_alexnet|densenet121|inception_v1|inception_v2|resnet50|shufflenet|"
        r"squeezenet|vgg19|zfnet512)_")

backend_test = Fp16Runner(ConformanceBackend, __name__)
backend_test.exclude(REAL)
globals().update(backend_test.test_cases)
