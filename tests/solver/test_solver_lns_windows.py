"""LNS windows keep the whole problem's model, also where the window's items and flags reach
past the window's span (the crash of examples/attention.json: "pipe order contradicts the
edges" in normalisation, after a window moved an item onto bytes another item held later)."""

import importlib

import attrs
import pytest

from staticsched.model.hardware import SyncModel
from staticsched.model.pools import PoolKey
from staticsched.solver.budget import Clock
from staticsched.solver.feasibility import model_violations
from staticsched.solver.list_sched import Timetable
from staticsched.solver.lns import LnsResult, _solve_window
from staticsched.solver.normalize import semi_active
from staticsched.solver.portfolio import Phase
from staticsched.solver.problem import Budget, ItemSpec, Problem, SpaceSpec, Token

KB = 1024
# the module (the package exports the function ``solve`` under its name)
solve_mod = importlib.import_module("staticsched.solver.subproblem")


def held_past_the_window() -> tuple[Problem, Timetable]:
    """Three items in a 48 KB mixed space, flag latency 0:

    * X, 16 KB at 0, held [0, 100) by ops 0 and 1 (pipe 0);
    * Y, 32 KB at 0, written by op 2 at 100 (pipe 1; it waits for X's bytes) and read by op 3
      at 1000 (pipe 2);
    * Z, 16 KB at 32 KB, held [500, 600) by ops 4 and 5 (pipe 3).

    A window of op 2 alone spans [0, 110): X is held there, Z is not. Op 2 could start at 0
    with Y at 16 KB -- but Y is held until 1010, and at 16 KB it covers Z's bytes.
    """
    space = SpaceSpec(0, "L1", 48 * KB, 32, 0, 48 * KB, True)
    items = [
        ItemSpec(0, 16 * KB, 16 * KB, 0, (1,)),
        ItemSpec(0, 32 * KB, 32 * KB, 2, (3,)),
        ItemSpec(0, 16 * KB, 16 * KB, 4, (5,)),
    ]
    prob = Problem(
        n_cores=1,
        pipes=[(0, "MTE2"), (0, "MTE1"), (0, "CUBE"), (0, "VECTOR")],
        dur=[50, 50, 10, 10, 50, 50],
        pipe_of=[0, 0, 1, 2, 3, 3],
        edges=[(0, 1, 0), (2, 3, 0), (4, 5, 0)],
        spaces=[space],
        items=items,
        tokens=[],
        budgets=[],
        sync=SyncModel(),
    )
    tt = Timetable([0, 50, 100, 1000, 500, 550], [0, 0, 32 * KB], 1010)
    assert model_violations(prob, tt.starts, tt.offsets) == []
    return prob, tt


def test_a_window_does_not_move_an_item_held_past_its_span_onto_other_bytes():
    prob, tt = held_past_the_window()
    moved, _, _ = _solve_window(prob, tt, [2], 1.0, 30.0, 0)
    assert moved is not None
    assert model_violations(prob, moved.starts, moved.offsets) == []
    # Y keeps its address (its read after the span is fixed), so op 2 still waits for X
    assert moved.offsets[1] == 0 and moved.starts[2] == 100
    semi_active(prob, moved.starts, moved.offsets)  # raised "pipe order contradicts the edges"


def flag_past_the_window() -> tuple[Problem, Timetable]:
    """One event id from pipe 0 to pipe 1, flag latency 0:

    * ops 0 (u, 50 cycles) and 1 (r, 10) on pipe 0 both feed op 3 (c) on pipe 1 at 1000, and
      r feeds op 6 (d) on pipe 1 and op 2 (x, 100 cycles, pipe 2): the flag u -> c is needed
      only when u runs after r; r's flag lives until d starts;
    * op 4 (pipe 0, at 400) flags op 5 (pipe 1, at 600): live [450, 601).

    The timetable runs u, r, then d and x: u's flag is not needed. A window of u, r, x and d
    ends at 160, or at 110 with r first and d right after it -- but then u's flag is live
    [60, 1001), over op 4's, and the pool has one id.
    """
    prob = Problem(
        n_cores=1,
        pipes=[(0, "MTE2"), (0, "MTE1"), (0, "CUBE")],
        dur=[50, 10, 100, 10, 50, 10, 10],
        pipe_of=[0, 0, 2, 1, 0, 1, 1],
        edges=[(0, 3, 0), (1, 2, 0), (1, 3, 0), (1, 6, 0), (4, 5, 0)],
        spaces=[],
        items=[],
        tokens=[
            Token(0, 0, (3,), 0, ((1,),)),
            Token(1, 0, (3, 6), 0, ((0,), ())),
            Token(4, 0, (5,), 0, ((),)),
        ],
        budgets=[Budget(PoolKey("flag", 0, "MTE2", "MTE1"), 1, True)],
        sync=SyncModel(event_ids=1),
    )
    tt = Timetable([0, 50, 60, 1000, 400, 600, 60], [], 1010)
    assert model_violations(prob, tt.starts, tt.offsets) == []
    return prob, tt


def test_a_window_does_not_count_a_flag_live_past_its_span_against_nothing():
    prob, tt = flag_past_the_window()
    moved, _, _ = _solve_window(prob, tt, [0, 1, 2, 6], 1.0, 30.0, 0)
    assert moved is not None
    assert model_violations(prob, moved.starts, moved.offsets) == []


def test_a_search_timetable_that_breaks_the_model_leaves_the_list_schedule(monkeypatch):
    prob, _ = held_past_the_window()  # its list schedule (120) is above the bound (100)

    def broken(prob, tt, **kwargs):
        return LnsResult(attrs.evolve(tt, starts=[0] * prob.n), "deterministic_limit")

    monkeypatch.setattr(solve_mod, "plan", lambda shape: (Phase("lns", 1.0),))
    monkeypatch.setattr(solve_mod, "improve_lns", broken)
    lines = []
    res = solve_mod.solve_problem(prob, "cpsat", Clock("deterministic", 1.0, 30.0), 0, progress=lines.append)
    assert res.makespan == res.list_makespan
    assert any("breaks the model" in line for line in lines)


def test_an_lns_whose_budget_cannot_pay_for_one_pass_is_not_started(monkeypatch):
    from staticsched.solver.budget import STOP_LNS_SHORT
    from staticsched.solver.lns import covers_one_pass

    # GPT-2-small's chip-wide problem on ascend-a2 (38,056 ops) in a minute: no; a
    # 5,000-op core in a minute: yes; two lanes pay for twice the windows
    assert not covers_one_pass(38_056, 60.0)
    assert covers_one_pass(5_000, 60.0)
    assert not covers_one_pass(20_000, 15.0) and covers_one_pass(20_000, 15.0, workers=3)
    prob, _ = held_past_the_window()  # its list schedule (120) is above the bound (100)

    def never(prob, tt, **kwargs):
        raise AssertionError("the LNS ran")

    monkeypatch.setattr(solve_mod, "plan", lambda shape: (Phase("lns", 1.0),))
    monkeypatch.setattr(solve_mod, "improve_lns", never)
    lines = []
    res = solve_mod.solve_problem(prob, "cpsat", Clock("deterministic", 1e-4, 30.0), 0, progress=lines.append)
    assert res.makespan == res.list_makespan
    assert (res.status, res.stop_reason) == ("heuristic", STOP_LNS_SHORT)
    assert any("cannot pay for one pass of windows over 6 ops" in line for line in lines)
    # with a budget that pays for it, the LNS runs
    with pytest.raises(AssertionError, match="the LNS ran"):
        solve_mod.solve_problem(prob, "cpsat", Clock("deterministic", 1.0, 30.0), 0)
