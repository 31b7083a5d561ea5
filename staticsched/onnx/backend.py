"""An ``onnx.backend.base.Backend`` that runs models as statically scheduled, verified programs.

``prepare`` imports the model, schedules it for a hardware model, emits the program as its
JSON text, reads that text back and verifies it (races, flags, deadlocks, memory, and the
numbers against NumPy on seeded inputs and the model's weights); only a clean program is
returned. ``run`` executes that program's nominal replay on the caller's inputs
(:func:`staticsched.verify.execute.execute`): every value is computed by the emitted
instructions, in the import's dtype (``dtype``: float16 unless asked), and returned in the
model's dtype.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from staticsched.errors import InputError, StaticschedError
from staticsched.formats.load import loads_program
from staticsched.formats.program_json import dumps_program_json
from staticsched.frontend.onnx_import import Imported
from staticsched.model.dtypes import as_dtype
from staticsched.model.hardware import Hardware
from staticsched.model.hardware_toml import load_hardware
from staticsched.model.program import Program
from staticsched.onnx.importer import import_model
from staticsched.pipeline import compile_graph
from staticsched.verify import Report, verify
from staticsched.verify.execute import execute

#: options of :meth:`StaticschedBackend.prepare` that go to the verifier, not the scheduler
VERIFY_OPTIONS = ("jitter", "numeric")
#: keys the ONNX test runner passes through ``prepare``'s options; they are its own
RUNNER_OPTIONS = ("rtol", "atol")
#: the import's options, with prepare's defaults
IMPORT_OPTIONS = {"fusion": "rules", "mapping": "rules", "weights_nz": True, "dtype": "float16",
                  "layouts": "rules"}

_LOG = logging.getLogger(__name__)


class VerificationFailed(StaticschedError):
    """The emitted program did not verify clean (the report's findings, one line each)."""


try:
    from onnx.backend.base import Backend, BackendRep
except ImportError as exc:  # pragma: no cover - the extra is part of [test]
    raise ImportError("staticsched.onnx.backend needs the 'onnx' package: "
                      "pip install 'staticsched[onnx]'") from exc


class StaticschedRep(BackendRep):
    """A prepared model: its import, its verified program and the verifier's report."""

    def __init__(self, imported: Imported, program: Program, hw: Hardware, report: Report,
                 makespan: int = 0, lower_bound: int = 0) -> None:
        self.imported, self.program, self.hw, self.report = imported, program, hw, report
        #: the schedule's makespan and lower bound, in cycles
        self.makespan, self.lower_bound = makespan, lower_bound

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs, in graph-output order, for ``inputs`` (a list in graph-input
        order, one array, or a dict by input name)."""
        bindings = self.imported.inputs
        if isinstance(inputs, Mapping):
            missing = [b.name for b in bindings if b.name not in inputs]
            if missing:
                raise InputError([f"run: no value for model input '{n}'" for n in missing])
            values = [inputs[b.name] for b in bindings]
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(values) != len(bindings):
                raise InputError(f"run: {len(values)} inputs given, the model takes {len(bindings)} "
                                 f"({', '.join(b.name for b in bindings)})")
        gm: dict[str, np.ndarray] = dict(self.imported.graph.constants)
        tmap = self.imported.graph.tensor_map
        for b, v in zip(bindings, values, strict=True):
            arr = np.asarray(v)
            if tuple(arr.shape) != b.shape:
                raise InputError(f"run: input '{b.name}' has shape {list(arr.shape)}, the model declares "
                                 f"{list(b.shape)}")
            if b.tensor not in tmap:  # an input nothing computes with (a dropout's ratio)
                continue
            decl = tmap[b.tensor]
            gm[b.tensor] = as_dtype(arr.reshape(decl.shape2d), decl.dtype)
        out = execute(self.program, self.hw, gm)
        return tuple(np.asarray(out[b.tensor]).astype(np.float32).reshape(b.shape).astype(b.dtype)
                     for b in self.imported.outputs)


class StaticschedBackend(Backend):
    """``onnx.backend.base.Backend`` for staticsched (see the module docstring)."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", hw: str | Hardware = "seed-davinci",
                **options: Any) -> StaticschedRep:
        """Import, schedule, emit and verify ``model``.

        Parameters
        ----------
        model
            An ``onnx.ModelProto`` or a path.
        device
            ``"CPU"``: the program runs on the verifying executor.
        hw
            The hardware model (a preset name, a TOML path or a :class:`Hardware`).
        **options
            :func:`staticsched.schedule`'s options (``method``, ``time_limit``, ``mode``, ...),
            the import's ``fusion`` (default ``"rules"``), ``mapping`` (default ``"rules"``),
            ``weights_nz`` (default True: constant matmul weights stored in the Cube's fractal
            format), ``layouts`` (default ``"rules"``: each tensor's layout by its cost, see
            :func:`staticsched.onnx.import_model`) and ``dtype`` (``"float16"``, default;
            ``"bfloat16"``; ``"float32"``), and the
            verifier's ``jitter`` (default 1) and ``numeric`` (default True).

        Raises
        ------
        staticsched.errors.ModelError
            The model is outside the supported set (one line per problem).
        VerificationFailed
            The emitted program has findings.
        """
        if not cls.supports_device(device):
            raise InputError(f"device {device!r}: staticsched runs on 'CPU' (its verifying executor)")
        hw = load_hardware(hw)
        checks = {"jitter": int(options.pop("jitter", 1)), "numeric": bool(options.pop("numeric", True))}
        for key in RUNNER_OPTIONS:
            options.pop(key, None)
        imported = _import(model, hw, options)
        compiled = compile_graph(imported.graph, hw, **options)
        # what runs is what was emitted: the program's file text, read back
        program = loads_program(dumps_program_json(compiled.program), "<emitted program>")
        report = verify(program, hw, **checks)
        if not report.ok:
            raise VerificationFailed([f.line() for f in report.findings][:20])
        return StaticschedRep(imported, program, hw, report, compiled.schedule.makespan,
                              compiled.schedule.lower_bound)

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether :meth:`prepare` can import ``model`` on ``device`` with these options (the
        hardware ``hw`` and the import's); when not, the importer's reasons are logged (logger
        ``staticsched.onnx.backend``, level INFO), so a harness can skip without catching
        anything. Scheduling and verification are not tried."""
        reasons = incompatibility(model, device, **kwargs)
        for line in reasons:
            _LOG.info("not compatible: %s", line)
        return not reasons

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Sequence[Any] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node: it is wrapped in a model whose inputs have ``inputs``' shapes and
        dtypes (opset 17), which is then prepared and run like any model."""
        from onnx import helper

        arrays = [np.asarray(x) for x in inputs]
        names = [n for n in node.input if n]
        elem = helper.np_dtype_to_tensor_dtype(arrays[0].dtype) if arrays else 1
        graph = helper.make_graph(
            [node], "node",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(names, arrays, strict=True)],
            [helper.make_tensor_value_info(n, elem, None) for n in node.output if n])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        return cls.prepare(model, device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """True for ``"CPU"`` (the verifying executor runs there), False for any other device."""
        return device == "CPU"


def incompatibility(model: Any, device: str = "CPU", **options: Any) -> tuple[str, ...]:
    """Why :meth:`StaticschedBackend.prepare` would refuse ``model`` before scheduling it, one
    line per problem; empty when it imports (see :meth:`StaticschedBackend.is_compatible`)."""
    if not StaticschedBackend.supports_device(device):
        return (f"device {device!r}: staticsched runs on 'CPU' (its verifying executor)",)
    try:
        _import(model, load_hardware(options.pop("hw", "seed-davinci")), dict(options))
    except StaticschedError as exc:
        return tuple(exc.problems)
    return ()


def _import(model: Any, hw: Hardware, options: dict[str, Any]) -> Imported:
    """The model's import with :data:`IMPORT_OPTIONS`' keys taken out of ``options``."""
    chosen = {key: options.pop(key, default) for key, default in IMPORT_OPTIONS.items()}
    return import_model(model, hw, fusion=str(chosen["fusion"]), mapping=str(chosen["mapping"]),
                        weights_nz=bool(chosen["weights_nz"]), dtype=str(chosen["dtype"]),
                        layouts=str(chosen["layouts"]))


prepare = StaticschedBackend.prepare
run_model = StaticschedBackend.run_model
run_node = StaticschedBackend.run_node
is_compatible = StaticschedBackend.is_compatible
supports_device = StaticschedBackend.supports_device
