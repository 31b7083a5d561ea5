"""Human-readable tables of a hardware model (``staticsched hw show``)."""

from __future__ import annotations

from staticsched.model.hardware import ROLES, Hardware


def _kib(n: int) -> str:
    if n == 0:
        return "unbounded"
    return f"{n} B ({n / 1024:g} KiB)"


def hardware_table(hw: Hardware) -> list[str]:
    """Lines describing pipes, spaces, sync and costs of ``hw``."""
    out = [
        f"hardware  {hw.name}" + (f" — {hw.description}" if hw.description else ""),
        f"cores     {hw.cores}    clock {hw.clock_ghz:g} GHz    "
        f"launch overhead {hw.launch_overhead_us:g} µs    fused ops <= {hw.max_fused_ops or '-'}    "
        f"source {hw.source}",
    ]
    if hw.split:
        out += ["", f"core types ({hw.clusters} clusters of {hw.cluster_size} cores; cluster c is "
                    f"cores {hw.cluster_size}c..{hw.cluster_size}c+{hw.cluster_size - 1} in this order)"]
        for t in hw.core_types:
            out.append(f"  {t.name:<6} x{t.per_cluster} per cluster  pipes {', '.join(t.units)}  "
                       f"spaces {', '.join(t.spaces) or '-'}")
    out += ["", "pipes"]
    width = max(len(u.name) for u in hw.units)
    for u in hw.units:
        out.append(f"  {u.name:<{width}}  {u.description}")
    out += ["", "spaces", f"  {'name':<6} {'capacity':>24} {'alignment':>10}"]
    for s in hw.spaces:
        out.append(f"  {s.name:<6} {_kib(s.capacity):>24} {s.alignment:>10}")
    roles = [(r, hw.role_space(r)) for r in ROLES]
    roles = [f"{r} {s}" for r, s in roles if s is not None]
    if roles:
        out.append("  roles: " + ", ".join(roles))
    sy = hw.sync
    out += [
        "",
        "sync",
        f"  event ids per (src, dst) pipe pair  {sy.event_ids}",
        f"  flag latency                        {sy.flag_latency} cycles",
        f"  cross-core event ids                {sy.cross_core_event_ids}",
        f"  cross-core latency                  {sy.cross_core_latency} cycles",
        f"  cross-core counter capacity         {sy.cross_core_capacity} sets per id",
    ]
    if hw.split:
        out += [
            f"  cross-core ids per core             {sy.cross_core_ids_per_core}",
            f"  cross-core flag modes               {', '.join(map(str, sy.cross_core_modes)) or '-'}",
            f"  a cross-core wait stalls            "
            f"{'every pipe of its core' if sy.cross_core_wait_stalls_core else 'its own pipe'}",
            f"  GM-word flag latency                {sy.gm_flag_latency} cycles "
            f"({'unused: point-to-point flags exist' if sy.pair_flags else 'across clusters, AIV to AIV'})",
            f"  GM-word wait's polling load         {sy.gm_flag_poll} cycles",
        ]
    if hw.paths:
        out += ["", "transfer paths (cycles = overhead + ceil(bytes / bytes_per_cycle))"]
        out.append(f"  {'unit':<8} {'src':>5} -> {'dst':<5} {'B/cycle':>9} {'overhead':>9}")
        for p in hw.paths:
            out.append(
                f"  {p.unit:<8} {p.src:>5} -> {p.dst:<5} {p.bytes_per_cycle:>9g} {p.overhead:>9}"
            )
    if hw.links:
        out += ["", "links (chip-wide bandwidth shared by every core's transfers on these paths)"]
        width = max(len(lk.name) for lk in hw.links)
        out.append(f"  {'name':<{width}} {'B/cycle':>9} {'GB/s':>8}  paths")
        for lk in hw.links:
            gbs = lk.bytes_per_cycle * hw.clock_ghz
            paths = ", ".join(f"{a}->{b}" for a, b in lk.paths)
            out.append(f"  {lk.name:<{width}} {lk.bytes_per_cycle:>9g} {gbs:>8.0f}  {paths}"
                       + (f"  ({lk.description})" if lk.description else ""))
    if hw.cube is not None:
        c = hw.cube
        rates = ", ".join(f"{k} {v} MAC/cycle" for k, v in c.macs_per_cycle)
        derate = f", ND->NZ operand loads at 1/{1 + c.nd2nz_derate:g} of the rate" if c.nd2nz_derate else ""
        out += ["", f"cube      unit {c.unit}, fractal {'x'.join(map(str, c.fractal))}, {rates}, "
                f"overhead {c.overhead}{derate}"]
    if hw.vector is not None:
        v = hw.vector
        passes = ", ".join(f"{k} {p:g}" for k, p in v.passes)
        out += [f"vector    unit {v.unit}, {v.bytes_per_cycle:g} B/cycle, overhead {v.overhead}, "
                f"passes: {passes}"]
    return out
