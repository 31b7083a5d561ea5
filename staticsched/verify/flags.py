"""Static flag checks: placement, pipes, id ranges and set/wait counts per flag key.

The dynamic ones (double set in a replay, the reuse rule over happens-before)
live in :mod:`replay` and :mod:`hb`.
"""

from __future__ import annotations

from staticsched.model.program import CROSS_MODES
from staticsched.verify.index import SET, Key, ProgramIndex, key_text
from staticsched.verify.report import Finding


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def static_flag_findings(ix: ProgramIndex) -> list[Finding]:
    """Problems visible without running the program, grouped so one mistake is one finding.

    Kinds: ``wrong_pipe`` (a set not on its source pipe, a wait not on its destination
    pipe), ``self_flag``, ``unknown_unit``, ``unknown_core``, ``id_out_of_range``,
    ``flag_in_timed_mode``, ``unpaired_set``, ``unpaired_wait``, and for the ways a cross-core
    flag travels: ``no_such_flag`` (a mode the chip lacks, a point-to-point flag on a chip
    without them, ``mode=2`` outside an AIC and an AIV of one cluster), ``bad_mode``.
    """
    hw = ix.hw
    units = set(hw.unit_names)
    # (kind, key) -> gids, so that one bad key is reported once with a count
    grouped: dict[tuple[str, Key], list[int]] = {}
    messages: dict[tuple[str, Key], str] = {}

    def note(kind: str, key: Key, gid: int, message: str) -> None:
        grouped.setdefault((kind, key), []).append(gid)
        messages.setdefault((kind, key), message)

    parts = ix.parts
    for g in range(ix.n):
        key = ix.key_of[g]
        if key is None or g in parts:  # an AIC's mode-2 instruction is checked once
            continue
        ins = ix.instr[g]
        core, unit = ix.core_of(g), ix.unit_of(g)
        if ix.timed:
            note("flag_in_timed_mode", key, g, f"{ix.describe(g)}: a timed-mode program has no flags")
        if key[0] == "flag":
            home = ins.src if ix.role[g] == SET else ins.dst
            if home != unit:
                side = "source" if ix.role[g] == SET else "destination"
                note(
                    "wrong_pipe",
                    key,
                    g,
                    f"{ix.describe(g)} sits in the {unit} stream but its {side} pipe is {home}",
                )
            if ins.src == ins.dst:
                note("self_flag", key, g, f"{ix.describe(g)}: a flag from pipe {ins.src} to itself")
            for end in (ins.src, ins.dst):
                if end not in units:
                    note(
                        "unknown_unit",
                        key,
                        g,
                        f"{ix.describe(g)} names pipe '{end}', which core {core} of hardware "
                        f"'{hw.name}' does not have (pipes: {', '.join(hw.unit_names)})",
                    )
            limit = hw.sync.event_ids
        else:
            limit = hw.sync.cross_core_event_ids
            route = _route_problem(ix, g, core)
            if route:
                note(*route)
            if ins.mode in ("0", "2") and hw.sync.cross_core_ids_per_core:
                # a mode-0 or mode-2 flag's id is one of the receiving core's own
                limit = min(limit, hw.sync.cross_core_ids_per_core)
            if ins.peer_core == core:
                note("self_flag", key, g, f"{ix.describe(g)}: a cross-core flag from core {core} to itself")
            elif not 0 <= ins.peer_core < hw.cores:
                note(
                    "unknown_core",
                    key,
                    g,
                    f"{ix.describe(g)} names core {ins.peer_core}, out of range 0..{hw.cores - 1}",
                )
        if not 0 <= ins.event < limit:
            field = ("event_ids" if key[0] != "cross" else "cross_core_ids_per_core: the receiving core's "
                     "usable ids" if limit != hw.sync.cross_core_event_ids else "cross_core_event_ids")
            note(
                "id_out_of_range",
                key,
                g,
                f"{ix.describe(g)}: id {ins.event} is outside 0..{limit - 1} ({field} = {limit})",
            )
    for g, peer in ix._mode2:
        note("no_such_flag", ix.key_of[g], g, f"{ix.describe(g)}: on the AIC a mode-2 flag names the "
             f"core itself (its cluster), not core {peer}")
    for g, peer in ix._mode0:
        note("no_such_flag", ix.key_of[g], g, f"{ix.describe(g)}: a mode-0 barrier names the core "
             f"itself (its peers are every core of its type), not core {peer}")
    out = []
    for kind, key in sorted(grouped, key=lambda x: (x[1], x[0])):
        gids = grouped[(kind, key)]
        more = f" (and {_plural(len(gids) - 1, 'more instruction')} of this key)" if len(gids) > 1 else ""
        out.append(_finding(ix, kind, messages[(kind, key)] + more, gids[:1]))
    out.extend(pairing_findings(ix))
    return out


def _route_problem(ix: ProgramIndex, g: int, core: int) -> tuple[str, Key, int, str] | None:
    """Why cross-core instruction ``g`` names a flag the chip does not have, if it does."""
    ins, sync, key = ix.instr[g], ix.hw.sync, ix.key_of[g]
    mode, peer = ins.mode, ins.peer_core
    if mode and mode not in CROSS_MODES:
        return ("bad_mode", key, g, f"{ix.describe(g)}: mode {mode!r} is not a cross-core flag mode "
                f"({', '.join(CROSS_MODES)})")
    if mode == "gm" or not 0 <= peer < ix.hw.cores or peer == core:
        return None
    modes = ", ".join(map(str, sync.cross_core_modes)) or "none"
    if not mode:
        if sync.pair_flags:
            return None
        return ("no_such_flag", key, g, f"{ix.describe(g)}: '{ix.hw.name}' has no point-to-point flag "
                f"between cores (modes {modes}): core {core} and core {peer} signal with mode=2 "
                "(an AIC and an AIV of one cluster) or mode=gm (a GM word)")
    if mode == "0":
        if 0 not in sync.cross_core_modes:
            return ("no_such_flag", key, g, f"{ix.describe(g)}: '{ix.hw.name}' has no mode-0 barrier "
                    f"(modes {modes})")
        return None
    if 2 not in sync.cross_core_modes:
        return ("no_such_flag", key, g, f"{ix.describe(g)}: '{ix.hw.name}' has no mode-2 flag "
                f"(modes {modes})")
    if sync.route(core, peer) != "2":
        return ("no_such_flag", key, g, f"{ix.describe(g)}: a mode-2 flag joins an AIC and an AIV of one "
                f"cluster, not core {core} (cluster {core // sync.cluster_size}) and core {peer} "
                f"(cluster {peer // sync.cluster_size})")
    return None


def pairing_findings(ix: ProgramIndex) -> list[Finding]:
    """``unpaired_set`` / ``unpaired_wait``: a key whose set and wait counts differ.

    The n-th wait consumes the n-th set, so the surplus is at the end of the longer list;
    the finding names the first surplus instruction.
    """
    out = []
    for key in ix.flag_keys():
        sets = ix.sets_of.get(key, [])
        waits = ix.waits_of.get(key, [])
        if len(sets) > len(waits):
            out.append(_surplus(ix, key, "set", sets, "wait", waits,
                                "never consumed, so the flag is still set at the end"))
        elif len(waits) > len(sets):
            out.append(_surplus(ix, key, "wait", waits, "set", sets, "can never be satisfied"))
    return out


def _surplus(ix: ProgramIndex, key: Key, more: str, many: list[int], fewer: str, few: list[int],
             consequence: str) -> Finding:
    """The finding of a flag key with more ``more`` instructions than ``fewer`` ones: it names
    the first surplus one."""
    g = many[len(few)]
    extra = len(many) - len(few)
    return _finding(
        ix,
        f"unpaired_{more}",
        f"{key_text(key)} has {_plural(len(many), more)} but {_plural(len(few), fewer)}: "
        f"{ix.describe(g)}" + (f" and {extra - 1} later" if extra > 1 else "") + f" {consequence}",
        [g],
    )


def _finding(ix: ProgramIndex, kind: str, message: str, gids: list[int]) -> Finding:
    g = gids[0]
    return Finding(
        "flag",
        kind,
        message,
        ops=tuple(ix.op_label(x) for x in gids),
        core=ix.core_of(g),
        pipes=(ix.unit_of(g),),
    )


def double_set_findings(
    ix: ProgramIndex, double_sets: list[tuple[int, int, int]], *, check: str = "flag", note: str = ""
) -> list[Finding]:
    """One finding per dynamic double set of a replay (``counter_overflow`` for a counting
    cross-core flag already at its capacity)."""
    out = []
    for g, prev, t in double_sets:
        key = ix.key_of[g]
        cap = ix.capacity(key)
        if cap == 1:
            kind, what = "double_set", f"while {key_text(key)} is still set by {ix.describe(prev)}"
        else:
            kind = "counter_overflow"
            what = (f"while {key_text(key)} already counts {cap} sets not yet waited (its capacity; "
                    f"the oldest is {ix.describe(prev)})")
        out.append(
            Finding(
                check,
                kind,
                f"{ix.describe(g)} fires at cycle {t} {what}{note}",
                ops=(ix.op_label(g), ix.op_label(prev)),
                core=ix.core_of(g),
                pipes=(ix.unit_of(g),),
                cycle=t,
            )
        )
    return out
