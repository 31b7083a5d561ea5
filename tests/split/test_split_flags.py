"""How a cross-core flag travels on a chip without point-to-point flags (A2/A3): mode 2
between a cluster's AIC and its AIVs, GM words otherwise; the format's ``mode=`` field, the
routes the solver prices, and the verifier's one-line refusals of flags the chip lacks."""

from __future__ import annotations

import attrs
import pytest
from common import ROOT

from staticsched.formats.program_json import dumps_program_json, program_from_dict
from staticsched.formats.program_text import dumps_program_text, parse_program_text
from staticsched.model.hardware_toml import load_hardware
from staticsched.verify import verify

_PROGRAM = """format staticsched.program 1
hw ascend-a2
mode flags
makespan {end}
stream 0 FIXPIPE 2
  0 SET_CROSS {aic_peer} {id} mode=2
  {aic_wait} WAIT_CROSS {aic_peer} {id} mode=2
stream 1 MTE2 2
  200 WAIT_CROSS 0 {id} mode=2
  200 SET_CROSS 0 {id} mode=2
stream 2 MTE2 3
  200 WAIT_CROSS 0 {id} mode=2
  200 OP work {work} ->
  {aiv2_set} SET_CROSS 0 {id} mode=2
end
"""


def _program(work=1, aic_peer=0, id=3):
    # the nominal run: AIC set at 0, visible at 200 on both AIVs; AIV 2 sets after its work;
    # the AIC's AND wait passes 200 cycles after the later AIV set
    end = 200 + work + 200
    return parse_program_text(_PROGRAM.format(aic_peer=aic_peer, id=id, aiv2_set=200 + work,
                                              aic_wait=end, end=end, work=work))


def test_routes_on_ascend_a2_and_the_coupled_preset():
    a2 = load_hardware("ascend-a2").sync
    assert (a2.route(0, 1), a2.route(2, 0), a2.route(1, 2), a2.route(0, 4), a2.route(4, 0)) == \
        ("2", "2", "gm", "gm", "gm")
    assert a2.latency((0, "FIXPIPE"), (1, "MTE2")) == a2.cross_core_latency == 200
    # a GM word costs its latency and its wait's polling load, which programs carry by
    # default; from an AIV a bound counts at most what a barrier costs instead (a mode-0 flag,
    # and a mode-2 flag on to an AIC), which the barrier pass may choose
    assert a2.gm_flag_latency + a2.gm_flag_poll == 400 + 200
    assert a2.latency((0, "FIXPIPE"), (4, "MTE2")) == a2.bound_latency((0, "FIXPIPE"), (4, "MTE2")) == 600
    assert a2.latency((1, "MTE3"), (3, "MTE2")) == 600  # AIV -> AIC, by a GM word
    assert a2.bound_latency((1, "MTE3"), (3, "MTE2")) == 200 + 200  # or a barrier and a hop
    assert a2.latency((1, "MTE3"), (4, "MTE2")) == 600
    assert a2.bound_latency((1, "MTE3"), (4, "MTE2")) == 200  # AIV -> AIV, a barrier
    assert a2.bound_latency((0, "FIXPIPE"), (1, "MTE2")) == a2.latency((0, "FIXPIPE"), (1, "MTE2")) == 200
    without = attrs.evolve(a2, cross_core_modes=(1, 2))
    assert without.bound_latency((1, "MTE3"), (3, "MTE2")) == 600
    seed = load_hardware("seed-davinci").sync
    assert seed.pair_flags and seed.route(0, 5) == ""


def test_a_mode_2_handshake_verifies_and_round_trips_in_both_forms():
    # the AIC's broadcast reaches both AIVs; its AND wait passes with the later AIV set
    program = _program()
    report = verify(program, "ascend-a2")
    assert report.ok, report.text()
    text = dumps_program_text(program)
    assert "SET_CROSS 0 3 mode=2" in text and parse_program_text(text) == program
    import json
    assert program_from_dict(json.loads(dumps_program_json(program))) == program
    late = _program(work=300)
    assert late.makespan == 700 and verify(late, "ascend-a2").ok


def test_an_and_wait_that_one_aiv_never_sets_names_the_missing_aiv():
    program = _program()
    st = program.streams[2]
    import attrs
    program = attrs.evolve(program, streams=[*program.streams[:2], attrs.evolve(st, instrs=st.instrs[:2])])
    report = verify(program, "ascend-a2")
    dead = [f for f in report.findings if f.check == "deadlock"]
    assert dead and "WAIT_CROSS mode 2 from core 2 id 3 (core 0 FIXPIPE#1" in dead[0].message, report.text()


@pytest.mark.parametrize(("text", "needle"), [
    # a point-to-point flag: A2/A3 have none
    ("SET_CROSS 0 3 mode=2", None),
    ("SET_CROSS 1 3", "'ascend-a2' has no point-to-point flag between cores (modes 0, 1, 2): core 0 "
                      "and core 1 signal with mode=2"),
    ("SET_CROSS 0 9 mode=2", "id 9 is outside 0..7 (cross_core_ids_per_core"),
    ("SET_CROSS 1 3 mode=2", "on the AIC a mode-2 flag names the core itself (its cluster), not core 1"),
    ("SET_CROSS 0 3 mode=7", "mode '7' is not a cross-core flag mode (0, 2, gm)"),
    ("SET_CROSS 1 3 mode=0", "a mode-0 barrier names the core itself (its peers are every core of its "
                             "type), not core 1"),
    ("SET_CROSS 0 9 mode=0", "id 9 is outside 0..7 (cross_core_ids_per_core"),
])
def test_flags_the_chip_does_not_have_are_one_line_each(text, needle):
    program = parse_program_text(dumps_program_text(_program()).replace("\n  0 SET_CROSS 0 3 mode=2",
                                                                        f"\n  0 {text}"))
    report = verify(program, "ascend-a2")
    if needle is None:
        assert report.ok, report.text()
        return
    hits = [f for f in report.findings if needle in f.message]
    assert len(hits) == 1 and hits[0].check == "flag", report.text()


def test_mode_2_across_clusters_is_refused():
    text = """format staticsched.program 1
hw ascend-a2
mode flags
makespan 200
stream 1 MTE3 1
  0 SET_CROSS 3 0 mode=2
stream 3 FIXPIPE 1
  200 WAIT_CROSS 1 0 mode=gm
end
"""
    report = verify(parse_program_text(text), "ascend-a2")
    assert any(f.kind == "no_such_flag" and "not core 1 (cluster 0) and core 3 (cluster 1)" in f.message
               for f in report.findings), report.text()


def test_an_aiv_without_rows_still_waits_and_sets_so_every_crossing_is_mode_2():
    # M = 1: each block's second AIV has no rows. It loads one row of the slot as a token, so
    # both AIVs wait for the FixPipe and signal the slot consumed, and each AIC SET and WAIT
    # covers the pair in mode 2 (no GM word); the numbers still match the reference
    from staticsched.api import compile_graph

    c = compile_graph("examples/gemv_m1.json", "ascend-a2", method="list")
    tokens = [op for op in c.graph.ops if op.id.endswith(".token")]
    blocks = [op for op in c.graph.ops if op.id.endswith(".fixpipe")]
    assert len(tokens) == len(blocks) > 0
    assert all(op.kind == "load" and dict(op.attrs)["region"][0][1] - dict(op.attrs)["region"][0][0] == 1
               for op in tokens)
    cross = [f for f in c.plan.flags if f.kind == "cross"]
    assert cross and {f.route for f in cross} == {"2"}
    assert verify(c.program, "ascend-a2", jitter=2, numeric=True).ok


def test_a_core_group_that_is_not_whole_clusters_prices_each_edge_by_its_real_cores():
    # chain.json on ascend-a2 runs on 6 AICs and all 48 AIVs: 54 cores renumbered from 0 in one
    # problem, whose relative numbers are not the cores' cluster slots; every edge's latency
    # must be the one of the cores it joins (a mode-2 flag, a GM word or a barrier's)
    from staticsched.api import as_opgraph
    from staticsched.solver.decompose import build_problems

    hw = load_hardware("ascend-a2")
    graph = as_opgraph(ROOT / "examples" / "chain.json", hw)
    pairs = build_problems(graph, hw)
    assert any(pmap.cores != tuple(range(len(pmap.cores))) for _, pmap in pairs)
    seen = set()
    for prob, pmap in pairs:
        for a, b, lat in prob.edges:
            oa, ob = graph.ops[pmap.ops[a]], graph.ops[pmap.ops[b]]
            assert lat == hw.sync.latency((oa.core, oa.unit), (ob.core, ob.unit)), (oa.id, ob.id)
            seen.add(lat)
    assert {0, 200, 600} <= seen  # same core, mode 2, a GM word


_TURNSTILE = """format staticsched.program 1
hw ascend-a2
mode flags
makespan {end}
stream 1 MTE3 1
  0 SET_CROSS 5 0 mode=gm
stream 4 MTE3 2
  0 OP work 100 ->
  100 SET_CROSS 5 0 mode=gm
stream 5 MTE2 {count}
{waits}
end
"""


@pytest.mark.parametrize("between", [False, True])
def test_gm_word_waits_in_a_row_are_one_turnstile_polled_once(between):
    # core 5 waits for words from core 1 (visible at 0 + 400) and core 4 (at 100 + 400). In a
    # row, the two are polled by one load: the first passes when its word is visible, the last
    # 200 cycles after both are; an instruction between them makes each pay its own load
    if between:
        waits = ("  600 WAIT_CROSS 1 0 mode=gm\n  600 OP gap 1 ->\n  801 WAIT_CROSS 4 0 mode=gm\n"
                 "  801 OP use 10 ->")
        end, count = 811, 4
    else:
        waits = "  400 WAIT_CROSS 1 0 mode=gm\n  700 WAIT_CROSS 4 0 mode=gm\n  700 OP use 10 ->"
        end, count = 710, 3
    program = parse_program_text(_TURNSTILE.format(end=end, count=count, waits=waits))
    report = verify(program, "ascend-a2", jitter=2)
    assert report.ok, report.text()


def test_a_consumers_later_gm_word_waits_join_its_first_poll_when_their_words_are_visible():
    # down's eight K steps each read a block that another AIC's up_proj wrote: a WAIT before
    # each load, each paying its own poll. The turnstile pass moves the WAITs whose words are
    # visible by the first poll into it; the program is no slower than the plan's own streams,
    # its moved WAITs still consume their flags (verified clean, numbers included)
    from staticsched.api import compile_graph
    from staticsched.emit.nominal import replay, wait_holds
    from staticsched.emit.sync import plan_sync
    from staticsched.emit.sync.barriers import choose_barriers
    from staticsched.frontend.taskgraph import taskgraph_from_dict

    doc = {"format": "staticsched.taskgraph", "version": 1,
           "tensors": {"x": {"shape": [128, 256]}, "w1": {"shape": [256, 1024]},
                       "h": {"shape": [128, 1024], "layout": "NZ"}, "w2": {"shape": [1024, 128]},
                       "y": {"shape": [128, 128]}},
           "tasks": [{"id": "up", "type": "matmul", "a": "x", "b": "w1", "out": "h",
                      "epilogue": [{"op": "gelu"}]},
                     {"id": "down", "type": "matmul", "a": "h", "b": "w2", "out": "y"}]}
    hw = load_hardware("ascend-a2")
    c = compile_graph(taskgraph_from_dict(doc), hw, method="list")
    assert c.plan.stats.turnstiles > 0
    report = verify(c.program, hw, jitter=2, numeric=True)
    assert report.ok, report.text()
    # without the pass: the barrier pass's plan replayed as it is
    plan = plan_sync(c.schedule)
    played = replay(c.schedule, plan)
    barred, replayed, choices = choose_barriers(hw, plan, played.makespan,
                                                lambda p: replay(c.schedule, p), c.schedule.ops)
    before = barred if choices else plan
    assert c.program.makespan <= ((replayed or played).makespan if choices else played.makespan)
    # the polls paid (each turnstile's last WAIT holds one): down's eight, one per K step
    # (each a run of two words, one per AIV half of the producer), become one
    polls = [sum(1 for h in wait_holds(hw.sync, p) if h) for p in (before, c.plan)]
    assert polls == [8, 1]
