"""The CLI's ONNX steps: import (with the fusion mode), the files and the summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from staticsched._atomic import atomic_write_bytes, atomic_write_text
from staticsched.formats.jsonfmt import dumps_json
from staticsched.frontend.fusion import fuse, search_fusion
from staticsched.frontend.mapping import choose_engines, mapping_lines
from staticsched.frontend.onnx_import import Imported, import_unfused
from staticsched.frontend.onnx_import.patterns import ATTENTION
from staticsched.frontend.taskgraph import TaskGraph, constants_npz, taskgraph_to_dict
from staticsched.model.hardware import Hardware

#: how the summary names what the importer recovered
PATTERN_NAMES = {"LayerNormalization": "LayerNorm", "Gelu": "GELU", ATTENTION: "attention"}


@attrs.frozen
class ImportResult:
    """An imported model with its fusion decisions, ready to schedule or write."""

    imported: Imported
    hw: Hardware
    name: str
    search: tuple[str, ...] = ()
    mapping: tuple[str, ...] = ()
    mapping_mode: str = "rules"

    @property
    def graph(self) -> TaskGraph:
        return self.imported.graph

    def fusion_text(self) -> str:
        fused = self.imported.fusion
        text = fused.text(self.imported.origin)
        if self.search:
            text += "\nsearch (list-method makespans per kept epilogue length):\n"
            text += "".join(f"  {line}\n" for line in self.search)
        return text

    def files(self) -> dict[str, str]:
        return {"fusion.txt": self.fusion_text()}

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
            f"engines      : {self.mapping_mode}: " + ("; ".join(self.mapping) if self.mapping else
                                                        "no matmul moved to the Vector engine"),
        ]


def import_for_schedule(model: Any, hw: Hardware, *, fusion: str, budget: int | None,
                        mapping: str = "rules", dtype: str = "float16") -> ImportResult:
    """Import ``model`` computing in ``dtype``, fuse it by ``fusion`` and map its matmuls by
    ``mapping`` (``search`` schedules the candidates with the list method under ``budget``)."""
    imported = import_unfused(model, dtype)
    keep = [b.tensor for b in imported.outputs]
    search: list[str] = []

    def measure(g: TaskGraph) -> int:
        from staticsched.pipeline import compile_graph

        return compile_graph(g, hw, method="list", op_budget=budget).schedule.makespan

    if fusion == "search":
        fused, search = search_fusion(imported.graph, hw, measure, keep=keep)
    else:
        fused = fuse(imported.graph, hw, mode=fusion, keep=keep)
    graph, engines = choose_engines(fused.graph, hw, mode=mapping, measure=measure)
    name = Path(model).name if isinstance(model, (str, Path)) else "<ModelProto>"
    return ImportResult(attrs.evolve(imported, graph=graph, fusion=fused), hw, name, tuple(search),
                        tuple(engines), mapping)


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
    return out
