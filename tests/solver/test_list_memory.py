"""The list scheduler's memory tracker: a remembered misfit changes no timetable."""

from common import EXAMPLES, preset

from staticsched.pipeline import as_opgraph
from staticsched.solver.decompose import build_problems
from staticsched.solver.families.memory_tracker import MemoryTracker
from staticsched.solver.list_sched import Prep, Variant, run_variant
from staticsched.solver.problem import relax_event_budgets


def test_remembered_misfits_give_the_timetables_of_placing_every_time(monkeypatch):
    # the HBM chain without its event-id pools: free allocation retries ops that do not fit
    # at every event, and finishes
    hw = preset("seed-davinci")
    graph = as_opgraph(EXAMPLES / "elementwise_chain_hbm.json", hw)
    prob = relax_event_budgets(max((p for p, _ in build_problems(graph, hw)), key=lambda p: p.n))
    prep = Prep(prob)
    variants = [Variant("critical", "graph", in_order=False), Variant("order", "graph", in_order=False),
                Variant("critical", "graph")]
    hits = []
    place = MemoryTracker.place

    def counted(self, i):
        seen = self.misfit.get(i)
        hits.append(seen is not None and self.releases[seen[0]] == seen[2])
        return place(self, i)

    monkeypatch.setattr(MemoryTracker, "place", counted)
    remembered = [run_variant(prob, prep, v) for v in variants]
    assert any(hits)
    monkeypatch.setattr(MemoryTracker, "place", MemoryTracker._place_now)
    placed = [run_variant(prob, prep, v) for v in variants]
    assert remembered == placed
    assert all(hasattr(r, "makespan") for r in remembered)
