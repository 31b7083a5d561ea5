"""Global-memory traffic of an OpGraph: bytes read and written per GM tensor and per link.

A ``load`` reads its GM region, a ``store`` writes its region; the bytes are the region's
elements times the tensor's element size. A transfer's path is (the tensor's space, the item's
space) for a load and (item space, tensor space) for a store, the tensor's space being the one
the transfer names (:func:`~staticsched.model.opkinds.tensor_space`: a placement, else the
global space), and it crosses every link of the hardware that carries that path.
"""

from __future__ import annotations

import attrs

from staticsched.model.hardware import DTYPE_BYTES, Hardware
from staticsched.model.opgraph import OpGraph
from staticsched.model.opkinds import KINDS, tensor_space


@attrs.frozen
class Traffic:
    """``tensors``: name -> (bytes read, bytes written); ``links``: name -> bytes moved (reads
    and writes together), for every link of the hardware, in its order."""

    tensors: tuple[tuple[str, tuple[int, int]], ...] = attrs.field(converter=tuple)
    links: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)

    @property
    def read(self) -> int:
        return sum(r for _, (r, _) in self.tensors)

    @property
    def written(self) -> int:
        return sum(w for _, (_, w) in self.tensors)


def gm_traffic(graph: OpGraph, hw: Hardware) -> Traffic:
    """The GM bytes ``graph`` moves, per tensor and per link of ``hw`` (computed once per graph
    and hardware and kept with the graph: ``timetable.json`` and the summary both ask)."""
    kept = graph.memo.get("gm_traffic")
    if kept is not None and kept[0] is hw:
        return kept[1]
    found = _gm_traffic(graph, hw)
    graph.memo["gm_traffic"] = (hw, found)
    return found


def _gm_traffic(graph: OpGraph, hw: Hardware) -> Traffic:
    per_tensor: dict[str, list[int]] = {}
    per_link = {lk.name: 0 for lk in hw.links}
    items = graph.item_map
    tensors = graph.tensor_map
    for op in graph.ops:
        kind = KINDS.get(op.kind)
        if kind is None or not kind.gm:
            continue
        a = op.attr
        name = a.get("tensor")
        region = a.get("region")
        if not isinstance(name, str) or region is None:
            continue
        (r0, r1), (c0, c1) = region
        t = tensors.get(name)
        elem = DTYPE_BYTES.get(t.dtype, 2) if t is not None else 2
        nbytes = (r1 - r0) * (c1 - c0) * elem
        gm_space = tensor_space(hw, a)
        if kind.gm == "r":
            per_tensor.setdefault(name, [0, 0])[0] += nbytes
            item = items.get(op.writes[0]) if op.writes else None
            path = (gm_space, item.space if item is not None else "")
        else:
            per_tensor.setdefault(name, [0, 0])[1] += nbytes
            item = items.get(op.reads[0]) if op.reads else None
            path = (item.space if item is not None else "", gm_space)
        for lk in hw.links_of(*path):
            per_link[lk.name] += nbytes
    return Traffic(
        tuple((n, (per_tensor[n][0], per_tensor[n][1])) for n in sorted(per_tensor)),
        tuple((lk.name, per_link[lk.name]) for lk in hw.links),
    )
