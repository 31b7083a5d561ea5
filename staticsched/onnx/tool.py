"""The CLI's ONNX steps: import (with the fusion mode), the files and the summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from staticsched._atomic import atomic_write_bytes, atomic_write_text
from staticsched.formats.jsonfmt import dumps_json
from staticsched.frontend.mapping import mapping_lines
from staticsched.frontend.onnx_import import Imported
from staticsched.frontend.onnx_import.patterns import ATTENTION
from staticsched.frontend.taskgraph import TaskGraph, constants_npz, taskgraph_to_dict
from staticsched.model.hardware import Hardware
from staticsched.onnx.importer import import_model

#: how the summary names what the importer recovered
PATTERN_NAMES = {"LayerNormalization": "LayerNorm", "Gelu": "GELU", ATTENTION: "attention"}


@attrs.frozen
class ImportResult:
    """An imported model with its fusion decisions, ready to schedule or write."""

    imported: Imported
    hw: Hardware
    name: str

    @property
    def graph(self) -> TaskGraph:
        return self.imported.graph

    def fusion_text(self) -> str:
        fused = self.imported.fusion
        text = fused.text(self.imported.origin)
        if self.imported.search:
            text += "\nsearch (list-method makespans per kept epilogue length):\n"
            text += "".join(f"  {line}\n" for line in self.imported.search)
        return text

    def files(self) -> dict[str, str]:
        out = {"fusion.txt": self.fusion_text()}
        if self.imported.layouts is not None:
            out["layouts.txt"] = self.imported.layouts.text()
        return out

    def lines(self) -> list[str]:
        im = self.imported
        rec = ", ".join(f"{c} {PATTERN_NAMES.get(op, op)}" for op, c in im.recovered.items()) or "none"
        fused = im.fusion
        taken = sum(1 for d in fused.decisions if d.fused)
        unfused = sum(len(v) for v in fused.members.values())
        rules: dict[str, int] = {}
        for d in fused.decisions:
            if not d.fused:
                rules[d.rule] = rules.get(d.rule, 0) + 1
        kept = ", ".join(f"{r} {c}" for r, c in sorted(rules.items())) or "none"
        return [
            f"model        : {self.name}: {im.nodes} nodes (opset {im.opset}); recovered: {rec}",
            f"fusion       : {fused.mode}: {unfused} unfused tasks -> {len(im.graph.tasks)} tasks; "
            f"{taken} fused, kept apart by rule: {kept} (fusion.txt has every decision)",
            *mapping_lines(im.graph, self.hw),
            f"engines      : {im.mapping}: " + ("; ".join(im.engines) if im.engines else
                                                 "no matmul moved to the Vector engine"),
            f"weights      : {self._weights()}",
            *(im.layouts.lines() if im.layouts is not None else []),
        ]

    def _weights(self) -> str:
        tg = self.graph
        nz = sorted(t.name for t in tg.tensors if t.layout == "NZ")
        if nz:
            return (f"{len(nz)} of {len(tg.constants)} constants stored NZ (the Cube's fractal format, "
                    f"converted at load time; --no-weights-nz keeps them ND)")
        return f"{len(tg.constants)} constants, all ND"


def import_for_schedule(model: Any, hw: Hardware, *, fusion: str, budget: int | None,
                        mapping: str = "rules", weights_nz: bool = True,
                        dtype: str = "float16", layouts: str = "rules") -> ImportResult:
    """Import ``model`` with :func:`staticsched.onnx.import_model` for the CLI."""
    imported = import_model(model, hw, fusion=fusion, mapping=mapping, op_budget=budget,
                            weights_nz=weights_nz, dtype=dtype, layouts=layouts)
    name = Path(model).name if isinstance(model, (str, Path)) else "<ModelProto>"
    return ImportResult(imported, hw, name)


def write_graph(result: ImportResult, path: str | Path) -> list[Path]:
    """``path`` (the TaskGraph JSON), its weights beside it as ``.npz`` and ``.fusion.txt``."""
    path = Path(path)
    tg = result.graph
    out = []
    npz = path.with_suffix(".npz")
    if tg.constants:
        out.append(atomic_write_bytes(npz, constants_npz(tg)))
    doc = taskgraph_to_dict(tg, constants=npz.name if tg.constants else None)
    out.append(atomic_write_text(path, dumps_json(doc)))
    out.append(atomic_write_text(path.with_suffix(".fusion.txt"), result.fusion_text()))
    if result.imported.layouts is not None:
        out.append(atomic_write_text(path.with_suffix(".layouts.txt"), result.imported.layouts.text()))
    return out
