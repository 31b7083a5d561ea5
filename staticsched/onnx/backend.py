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
from staticsched.frontend.onnx_import.load import read_model
from staticsched.frontend.onnx_import.moves import DATA_INPUTS
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
        feeds = _by_name(inputs, [b.name for b in bindings])
        values = [feeds[b.name] for b in bindings]
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


def _by_name(inputs: Any, names: Sequence[str]) -> dict[str, Any]:
    """``run``'s ``inputs`` (a list in the order of ``names``, one array, or a dict by name) as
    a dict by name; one line per missing value, or for a list of the wrong length."""
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise InputError([f"run: no value for model input '{n}'" for n in missing])
        return {n: inputs[n] for n in names}
    values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
    if len(values) != len(names):
        raise InputError(f"run: {len(values)} inputs given, the model takes {len(names)} "
                         f"({', '.join(names)})")
    return dict(zip(names, values, strict=True))


#: ONNX element types of the inputs a model's run binds as constants (parameter inputs)
INTEGER_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)  # uint8, int8, uint16, int16, int32, int64, uint32, uint64


def parameter_inputs(model: Any) -> tuple[str, ...]:
    """The graph inputs of an integer type (not initializers) that nodes read only as parameters
    (not as a reduction's or a data movement's data, nor as any other op's operand), in graph
    order: axes, shapes, pads, indices. staticsched stores integers rather than computing them,
    so their values are part of the static program: :class:`SpecializedRep` compiles a model
    per set of them."""
    g = read_model(model).graph
    inits = {t.name for t in g.initializer}
    data: set[str] = set()  # integers some node computes with, not a parameter
    for node in g.node:
        # the positions of data: a move's (None: all), a reduction's input; any other op's all
        positions = DATA_INPUTS.get(node.op_type) if node.op_type in DATA_INPUTS else (
            (0,) if node.op_type.startswith("Reduce") else None)
        data.update(x for j, x in enumerate(node.input) if positions is None or j in positions)
    return tuple(vi.name for vi in g.input if vi.name not in inits and vi.name not in data
                 and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in INTEGER_TYPES)


def bind_parameters(model: Any, values: Mapping[str, Any]) -> Any:
    """A copy of ``model`` whose parameter inputs ``values`` (name -> array) are initializers
    of those values, each checked against the input's declared element type and static dims."""
    import onnx
    from onnx import helper, numpy_helper

    proto = onnx.ModelProto()
    proto.CopyFrom(read_model(model))
    problems = []
    for vi in list(proto.graph.input):
        if vi.name not in values:
            continue
        tt = vi.type.tensor_type
        want = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        arr = np.asarray(values[vi.name])
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        fits = len(dims) == arr.ndim and all(d < 0 or d == n for d, n in zip(dims, arr.shape, strict=False))
        if tt.HasField("shape") and not fits:
            problems.append(f"run: parameter input '{vi.name}' has shape {list(arr.shape)}, the model "
                            f"declares {dims}")
            continue
        if arr.dtype.kind not in "iub" or not np.array_equal(arr.astype(want), arr):
            problems.append(f"run: parameter input '{vi.name}' must hold {want} values, got {arr.dtype}")
            continue
        proto.graph.input.remove(vi)
        proto.graph.initializer.append(numpy_helper.from_array(arr.astype(want), vi.name))
    if problems:
        raise InputError(problems)
    return proto


class SpecializedRep(BackendRep):
    """A model with parameter inputs (:func:`parameter_inputs`): its ``run`` binds their values
    as constants and prepares that model (import, schedule, emit, verify) once per distinct set
    of values, then runs it on the other inputs. What runs is a verified static program, as for
    any model; only when it is built moves to the first run that gives those values."""

    def __init__(self, model: Any, params: tuple[str, ...], inputs: tuple[str, ...], hw: Hardware,
                 options: dict[str, Any]) -> None:
        self.model, self.params, self.inputs, self.hw, self.options = model, params, inputs, hw, options
        #: the prepared model of each set of parameter values, by their bytes
        self.reps: dict[tuple, StaticschedRep] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The outputs for ``inputs`` (a list in graph-input order or a dict by name, parameter
        inputs included), from the program prepared for these parameter values."""
        feeds = _by_name(inputs, self.inputs)
        key = tuple((n, np.asarray(feeds[n]).shape, np.asarray(feeds[n]).tobytes()) for n in self.params)
        rep = self.reps.get(key)
        if rep is None:
            bound = bind_parameters(self.model, {n: feeds[n] for n in self.params})
            rep = self.reps[key] = StaticschedBackend.prepare(bound, "CPU", self.hw, **dict(self.options))
        return rep.run({n: feeds[n] for n in self.inputs if n not in self.params})


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
        model = read_model(model)  # once: a path is read here, a ModelProto kept
        params = parameter_inputs(model)
        if params:  # their values are part of the program: it is built at the first run
            g = model.graph
            inits = {t.name for t in g.initializer}
            names = tuple(vi.name for vi in g.input if vi.name not in inits)
            return SpecializedRep(model, params, names, hw, dict(options))  # type: ignore[return-value]
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
        if parameter_inputs(model):  # what imports depends on their values: run says
            return ()
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
