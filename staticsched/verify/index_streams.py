"""Indexing a program's streams: every instruction gets a global id, its flag key, latency,
duration and resolved operand accesses, and whatever does not resolve becomes an ``input``
finding (a mixin of :class:`~staticsched.verify.index.ProgramIndex`)."""

from __future__ import annotations

from typing import Any

import attrs

from staticsched.model.opkinds import KINDS
from staticsched.model.program import (
    SYNC_KINDS,
    Instr,
)
from staticsched.verify.index_state import (
    _FLAGS,
    _SETS,
    _SYNC,
    OP,
    SET,
    WAIT,
    GmAccess,
    IndexState,
    Key,
    _region,
)


class StreamIndex(IndexState):
    """The streams and instructions of an index."""

    def _index_streams(self) -> None:
        hw = self.hw
        units = set(hw.unit_names)
        seen_streams: set[tuple[int, str]] = set()
        for s, st in enumerate(self.streams):
            if (st.core, st.unit) in seen_streams:
                self._input(
                    "duplicate_stream", f"core {st.core} has two streams for pipe {st.unit}", core=st.core
                )
            seen_streams.add((st.core, st.unit))
            if not 0 <= st.core < hw.cores:
                self._input(
                    "unknown_core",
                    f"stream core {st.core} {st.unit}: core out of range 0..{hw.cores - 1}",
                    core=st.core,
                    pipes=(st.unit,),
                )
            if st.unit not in units:
                self._input(
                    "unknown_unit",
                    f"stream core {st.core} {st.unit}: hardware '{hw.name}' has no pipe '{st.unit}' "
                    f"(pipes: {', '.join(hw.unit_names)})",
                    core=st.core,
                    pipes=(st.unit,),
                )
            base = len(self.instr)
            instrs = self._expanded(base, st)
            n = len(instrs)
            self.instr.extend(instrs)
            self.stream_of.extend([s] * n)
            self.pos_of.extend(range(n))
            self.stream_gids.append(list(range(base, base + n)))
            self._index_stream(base, st.core, st.unit, instrs)

    def _expanded(self, base: int, st: Any) -> list[Instr]:
        """The stream's instructions, with every mode-2 SET or WAIT of a cluster's AIC as one
        instruction per AIV of the cluster in a row (a SET counts on each AIV's counter, a WAIT
        needs each AIV's SET: the AIVs' WAITs in a row are one AIC WAIT, as every cross-core
        wait stalls the whole core), and every mode-0 SET or WAIT (a barrier) as one per other
        core of its type. The file's positions are kept for messages."""
        instrs = st.instrs
        sync = self.hw.sync
        hub = bool(sync.cluster_size) and st.core % sync.cluster_size == sync.hub_slot
        if not sync.cluster_size or not any(ins.mode == "0" or (ins.mode == "2" and hub) for ins in instrs):
            return instrs
        first = st.core - sync.hub_slot
        kind = self.hw.core_type(st.core)
        peers = {
            "2": [c for c in range(first, first + sync.cluster_size) if c != st.core] if hub else [],
            # a barrier's peers: every other core of this core's type
            "0": [c for c in range(self.hw.cores) if c != st.core and self.hw.core_type(c) == kind],
        }
        misnamed = {"2": self._mode2, "0": self._mode0}
        out: list[Instr] = []
        for pos, ins in enumerate(instrs):
            if peers.get(ins.mode) and ins.kind in _SYNC and ins.kind not in _FLAGS:
                if ins.peer_core != st.core:
                    misnamed[ins.mode].append((base + len(out), ins.peer_core))
                for peer in peers[ins.mode]:
                    self.file_pos[base + len(out)] = pos
                    out.append(attrs.evolve(ins, peer_core=peer))
                    self.parts.add(base + len(out) - 1)
                self.parts.discard(base + len(out) - 1)
            else:
                if len(out) != pos:
                    self.file_pos[base + len(out)] = pos
                out.append(ins)
        return out

    def _index_stream(self, base: int, core: int, unit: str, instrs: Any) -> None:
        """Index one stream's instructions; sync instructions (most of a chip's ~10^6) take an
        inlined path, everything else :meth:`_index_instr`."""
        sync = self.hw.sync
        flag_latency, cross_latency = sync.flag_latency, sync.cross_core_latency
        gm_latency, poll = sync.gm_flag_latency, sync.gm_flag_poll
        role, dur, accesses, latency, key_of, cycle = (
            self.role.append,
            self.dur.append,
            self.accesses.append,
            self.latency.append,
            self.key_of.append,
            self.cycle.append,
        )
        sets_of, waits_of = self.sets_of, self.waits_of
        for pos, ins in enumerate(instrs):
            kind, cyc = ins.kind, ins.cycle
            if kind not in _SYNC or type(cyc) is not int or cyc < 0:
                self._index_instr(base + pos, ins, core, unit)
                continue
            cycle(cyc)
            dur(0)
            accesses(())
            if kind == "set_flag" or kind == "wait_flag":
                key: Key = ("flag", core, ins.src, ins.dst, ins.event)
                latency(flag_latency)
            elif kind == "set_cross":
                key = ("cross", core, ins.peer_core, ins.event, ins.mode)
                latency(gm_latency if ins.mode == "gm" else cross_latency)
            else:
                key = ("cross", ins.peer_core, core, ins.event, ins.mode)
                latency(gm_latency if ins.mode == "gm" else cross_latency)
                if poll and ins.mode == "gm":
                    self.hold[base + pos] = poll
            key_of(key)
            if kind in _SETS:
                role(SET)
                table = sets_of
            else:
                role(WAIT)
                table = waits_of
            got = table.get(key)
            if got is None:
                table[key] = [base + pos]
            else:
                got.append(base + pos)
        if poll:
            # GM-word waits in a row are one turnstile, polled by one load: only the last of
            # the run holds the core for the poll (docs/program-format.md, "mode=gm")
            hold = self.hold
            for gid in range(base, base + len(instrs) - 1):
                if gid in hold and gid + 1 in hold:
                    del hold[gid]

    def _index_instr(self, gid: int, ins: Instr, core: int, unit: str) -> None:
        # runs once per instruction (~10^6 on a chip): the common case is checked first and
        # messages are only formatted for problems
        cyc = ins.cycle
        if isinstance(cyc, int) and cyc >= 0:
            self.cycle.append(cyc)
        else:
            self.cycle.append(cyc if isinstance(cyc, int) else 0)
            self._input("bad_cycle", f"core {core} {unit}#{self.pos_of[gid]}: cycle {cyc!r} is not >= 0")
        kind_name = ins.kind
        if kind_name in _SYNC:
            role = SET if kind_name in _SETS else WAIT
            self.role.append(role)
            self.dur.append(0)
            self.accesses.append(())
            if kind_name in _FLAGS:
                key: Key = ("flag", core, ins.src, ins.dst, ins.event)
                self.latency.append(self.hw.sync.flag_latency)
            else:
                if kind_name == "set_cross":
                    key = ("cross", core, ins.peer_core, ins.event, ins.mode)
                else:
                    key = ("cross", ins.peer_core, core, ins.event, ins.mode)
                self.latency.append(self.hw.sync.route_latency(ins.mode))
                if role == WAIT and self.hw.sync.wait_hold(ins.mode):
                    self.hold[gid] = self.hw.sync.wait_hold(ins.mode)
            self.key_of.append(key)
            table = self.sets_of if role == SET else self.waits_of
            got = table.get(key)
            if got is None:
                table[key] = [gid]
            else:
                got.append(gid)
            return
        self.role.append(OP)
        self.key_of.append(None)
        self.latency.append(0)
        self.accesses.append(())  # filled in by _index_segments
        op_id, duration = ins.id, ins.duration

        def where() -> str:
            return f"op '{op_id}' (core {core} {unit})"

        if not op_id:
            self._input(
                "missing_id", f"core {core} {unit}#{self.pos_of[gid]}: micro-op without an id", core=core
            )
        elif op_id in self.op_gid:
            self._input("duplicate_op", f"{where()}: id used twice", ops=(op_id,), core=core)
        else:
            self.op_gid[op_id] = gid
        if isinstance(duration, int) and duration >= 1:
            self.dur.append(duration)
        else:
            self._input("bad_duration", f"{where()}: duration must be >= 1, got {duration!r}", core=core)
            self.dur.append(max(0, duration) if isinstance(duration, int) else 0)
        kind = KINDS.get(kind_name)
        if kind is None and kind_name != "op":
            self._input(
                "unknown_kind",
                f"{where()}: unknown instruction kind {kind_name!r} (kinds: op, {', '.join(KINDS)}, "
                f"{', '.join(SYNC_KINDS)})",
                ops=(op_id,),
                core=core,
            )
        items, bounded = self.items, self._bounded
        for names in (ins.reads, ins.writes):
            for name in names:
                it = items.get(name)
                if it is None:
                    self._input("unknown_item", f"{where()}: unknown item '{name}'", ops=(op_id,), core=core)
                elif it.core != core and name in bounded:
                    self._input(
                        "wrong_core",
                        f"{where()}: accesses item '{name}' that lives in {it.space} of core {it.core}",
                        ops=(op_id,),
                        core=core,
                    )
        if kind is None:
            return
        a = dict(ins.attrs)
        names_key = (kind_name, *a)
        missing = self._missing.get(names_key)
        if missing is None:
            missing = self._missing[names_key] = kind.missing(a)
        for name in missing:
            self._input(
                "missing_attr", f"{where()}: {kind_name} needs a {name!r} attribute", ops=(op_id,), core=core
            )
        if kind.gm:
            tensor, region = a.get("tensor"), _region(a.get("region"))
            if not isinstance(tensor, str) or not tensor:
                if "tensor" in a:
                    what = f"{where()}: {kind_name} needs a 'tensor' name, got {tensor!r}"
                    self._input("missing_attr", what, ops=(op_id,))
            elif region is None:
                self._input(
                    "bad_region",
                    f"{where()}: 'region' {a.get('region')!r} is not ((r0, r1), (c0, c1)) with r0<r1, c0<c1",
                    ops=(op_id,),
                )
            else:
                if tensor not in self.tensors:
                    self._input("unknown_tensor", f"{where()}: unknown tensor '{tensor}'", ops=(op_id,))
                self.gm_accesses.append(GmAccess(gid, tensor, region, kind.gm == "w"))
