"""The bundle view (``bundles.txt``): per cycle, what every (core, pipe) issues (Groq-style)."""

from __future__ import annotations

from collections.abc import Iterator

from staticsched.formats import jsonfmt
from staticsched.formats.encoding import MNEMONIC, quote
from staticsched.model.program import CROSS_KINDS, FLAG_KINDS, Instr, Program

#: at most this many cycle lines are written; the file says when it stops early
MAX_LINES = 200_000


def _short(ins: Instr) -> str:
    if ins.kind in FLAG_KINDS:
        return f"{MNEMONIC[ins.kind]} {quote(ins.src)} {quote(ins.dst)} {ins.event}"
    if ins.kind in CROSS_KINDS:
        mode = f" mode={ins.mode}" if ins.mode else ""
        return f"{MNEMONIC[ins.kind]} {ins.peer_core} {ins.event}{mode}"
    return f"{MNEMONIC.get(ins.kind, ins.kind.upper())} {quote(ins.id)}"


def bundle_lines(program: Program, max_lines: int = MAX_LINES) -> list[str]:
    """One line per cycle at which something issues, oldest first.

    Each line lists, per (core, pipe) in stream order, the instructions issued at that cycle
    (several when zero-cycle flag instructions precede an op). When there are more than
    ``max_lines`` such cycles the list ends with a line saying how many were left out.
    """
    names = [f"c{st.core}.{quote(st.unit)}" for st in program.streams]
    # (cycle, stream, position) sorts each cycle's issues by stream, then program order
    keys = sorted(
        (ins.cycle, s, k) for s, st in enumerate(program.streams) for k, ins in enumerate(st.instrs)
    )
    header = [
        f"# bundles: hw {quote(program.hw)}, mode {program.mode}, makespan {program.makespan} cycles",
        "# cycle | <core>.<pipe>: what it issues at that cycle (in order) | ...",
    ]
    lines: list[str] = []
    n = 0
    while n < len(keys):
        cycle = keys[n][0]
        if len(lines) == max_lines:
            rest = len({k[0] for k in keys[n:]})
            lines.append(f"# truncated: {rest} more cycles with issues (up to cycle {keys[-1][0]}) not shown")
            break
        groups: list[str] = []
        while n < len(keys) and keys[n][0] == cycle:
            s = keys[n][1]
            issued = []
            while n < len(keys) and keys[n][0] == cycle and keys[n][1] == s:
                issued.append(_short(program.streams[s].instrs[keys[n][2]]))
                n += 1
            groups.append(f"{names[s]}: {'; '.join(issued)}")
        lines.append(f"{cycle:>8} | {' | '.join(groups)}")
    return header + lines


def dumps_bundles(program: Program, max_lines: int = MAX_LINES) -> str:
    """The bundle view as text (see :func:`bundle_lines`)."""
    return "".join(iter_bundles(program, max_lines))


def iter_bundles(program: Program, max_lines: int = MAX_LINES) -> Iterator[str]:
    """:func:`dumps_bundles`'s text in chunks of lines."""
    lines = bundle_lines(program, max_lines)
    for k in range(0, len(lines), jsonfmt.BATCH):
        yield "".join(line + "\n" for line in lines[k : k + jsonfmt.BATCH])
