"""The ``layout`` check: every GM access reads or writes its tensor in the layout the
program declares for it (``tensor ... layout=NZ``), and the Cube reads only fractal tiles.

One finding per access, naming the instruction, the tensor and both layouts:

- ``wrong_layout``: a load or store whose claim (``nz``) differs from its tensor's declared
  layout; the DMA would move the other layout's bytes (the numeric replay reads or writes
  exactly those: scrambled values);
- ``double_conversion``: a load converting ND to the fractal format (``nd2nz``) of a tensor
  declared NZ, or claiming both;
- ``not_fractal``: on a chip that prices layouts (the Cube reads its operand buffer in the
  fractal format), a load into that buffer of an ND tensor that does not convert it, or a
  conversion into any other space;
- ``wrong_stride``: a converting load whose ``stride`` (what prices it) is not its tensor's
  row length.

The Vector units read row-major tiles in the unified buffer: a load of an NZ tensor into it
gathers the fractal runs into rows (``nz``), so a Vector read of the wrong layout is a load
whose claim is wrong, reported as ``wrong_layout``.
"""

from __future__ import annotations

from staticsched.model.opkinds import KINDS
from staticsched.verify.index import OP, ProgramIndex
from staticsched.verify.report import Finding


def layout_findings(ix: ProgramIndex) -> list[Finding]:
    """Every layout problem of the program's GM accesses (see the module docstring)."""
    hw = ix.hw
    cube = hw.cube
    strict = cube is not None and cube.models_layouts
    operand = hw.role_space("operand")
    out: list[Finding] = []
    for gid in range(ix.n):
        ins = ix.instr[gid]
        if ix.role[gid] != OP or ins.kind not in ("load", "store"):
            continue
        a = {**dict(KINDS[ins.kind].defaults), **dict(ins.attrs)}
        tensor = ix.tensors.get(a.get("tensor", ""))
        if tensor is None:
            continue  # an unknown tensor is the dataflow check's
        what = ix.describe(gid)

        def add(kind: str, message: str, gid: int = gid, what: str = what) -> None:
            out.append(Finding("layout", kind, f"{what}: {message}", ops=(ix.op_label(gid),),
                               core=ix.core_of(gid), pipes=(ix.unit_of(gid),)))

        declared = tensor.layout
        claimed = "NZ" if a.get("nz", False) else "ND"
        converts = bool(a.get("nd2nz", False))
        if converts and claimed == "NZ":
            add("double_conversion", f"claims both an NZ source (nz) and a conversion of an ND one (nd2nz) "
                                     f"of tensor '{tensor.name}'")
            continue
        if converts and declared == "NZ":
            add("double_conversion", f"converts tensor '{tensor.name}' from ND to the fractal format, but "
                                     f"the program declares it NZ already")
            continue
        if claimed != declared:
            verb = "reads" if ins.kind == "load" else "writes"
            add("wrong_layout", f"{verb} tensor '{tensor.name}' as {claimed}; the program declares it "
                                f"{declared}")
            continue
        if ins.kind != "load":
            continue
        dst = ix.items.get(ins.writes[0]) if ins.writes else None
        space = dst.space if dst is not None else ""
        if converts and space != operand:
            add("not_fractal", f"converts tensor '{tensor.name}' to the fractal format into space '{space}'; "
                               f"only the Cube's operand buffer ('{operand}') holds fractal tiles")
        elif strict and not converts and claimed == "ND" and space == operand:
            add("not_fractal", f"loads ND tensor '{tensor.name}' into the Cube's operand buffer '{operand}' "
                               f"without converting it (nd2nz): the Cube would read row-major bytes as "
                               f"fractals")
        if converts and a.get("stride", 0) != tensor.shape[1]:
            add("wrong_stride", f"converts with a source row stride of {a.get('stride', 0)} elements; "
                                f"tensor '{tensor.name}' has rows of {tensor.shape[1]}")
    return out
