"""CP-SAT variables of a :class:`~staticsched.solver.problem.Problem`.

Created in a fixed order (ops, items, tokens) with readable names, so that the same problem
always gives the same model. Auxiliary "op ``a`` runs before op ``b``" literals are created on
demand by :meth:`Variables.runs_after`, also in a fixed order because the constraint builders
ask for them in one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model_helper import Literal

from staticsched.solver.problem import Problem


class Variables:
    """Handles of one model's variables.

    Attributes
    ----------
    start : list of IntVar
        Op starts; ``interval[i]`` is the fixed-size interval ``[start, start + dur)``.
    live_end : dict item -> LinearExpr
        End of the item's last access (items in binding spaces only).
    hold : dict item -> IntervalVar
        ``[first access start, live_end + hold)``: the bytes the item keeps from others.
    slot : dict item -> IntVar
        Offset in units of the alignment (binding spaces with mixed sizes only).
    place : dict item -> IntervalVar
        ``[offset, offset + footprint)`` for :class:`~ortools.sat.python.cp_model.CpModel`'s
        2-D no-overlap (mixed spaces only).
    token_first : dict token -> LinearExpr
        First start among the token's consumers.
    token : dict token -> IntervalVar
        The flag lifetime, optional with ``token_present`` unless mandatory.
    makespan : IntVar
    """

    def __init__(
        self,
        model: cp_model.CpModel,
        prob: Problem,
        *,
        horizon: int,
        lower: int,
        release: Sequence[int],
        deadline: Sequence[int],
        fixed_offsets: dict[int, int] | None = None,
    ) -> None:
        self.model = model
        self.prob = prob
        self.horizon = horizon
        n = prob.n
        self.start = [model.new_int_var(release[i], deadline[i] - prob.dur[i], f"s{i}") for i in range(n)]
        self.interval = [
            model.new_fixed_size_interval_var(self.start[i], prob.dur[i], f"op{i}") for i in range(n)
        ]
        self._after: dict[tuple[int, int], cp_model.IntVar] = {}
        self.live_end: dict[int, cp_model.LinearExprT] = {}
        self.live_end_var: dict[int, cp_model.IntVar] = {}
        self.hold: dict[int, cp_model.IntervalVar] = {}
        self.hold_size: dict[int, cp_model.IntVar] = {}
        self.slot: dict[int, cp_model.IntVar] = {}
        self.place: dict[int, cp_model.IntervalVar] = {}
        self._items(fixed_offsets or {})
        self.token_first: dict[int, cp_model.LinearExprT] = {}
        self.token_first_var: dict[int, cp_model.IntVar] = {}
        self.token_size: dict[int, cp_model.IntVar] = {}
        self.token_present: dict[int, cp_model.IntVar] = {}
        self.token: dict[int, cp_model.IntervalVar] = {}
        self._tokens()
        self.makespan = model.new_int_var(lower, horizon, "makespan")
        #: sizes of the intervals made by :meth:`after_makespan` (``horizon + 1 - makespan``)
        self.tail_sizes: list[cp_model.IntVar] = []

    def end(self, i: int) -> cp_model.LinearExprT:
        return self.start[i] + self.prob.dur[i]

    def _items(self, fixed_offsets: dict[int, int]) -> None:
        model, prob = self.model, self.prob
        for k, it in enumerate(prob.items):
            sp = prob.spaces[it.space]
            if not sp.binding:
                continue
            if len(it.tails) == 1:
                end = self.end(it.tails[0])
            else:
                # only lower bounds are needed: a longer hold never helps the objective
                end = model.new_int_var(0, self.horizon, f"le{k}")
                self.live_end_var[k] = end
            self.live_end[k] = end
            gap = prob.reuse_gap
            size = model.new_int_var(it.min_live + gap, self.horizon + gap, f"hs{k}")
            self.hold_size[k] = size
            self.hold[k] = model.new_interval_var(self.start[it.first], size, end + gap, f"hold{k}")
            if not sp.slot:
                if k in fixed_offsets:
                    lo = top = fixed_offsets[k] // sp.alignment
                else:
                    lo, top = 0, (sp.capacity - it.bytes) // sp.alignment
                self.slot[k] = model.new_int_var(lo, top, f"addr{k}")
                self.place[k] = model.new_fixed_size_interval_var(
                    self.slot[k] * sp.alignment, it.footprint, f"place{k}"
                )

    def _tokens(self) -> None:
        model, prob = self.model, self.prob
        for k, tok in enumerate(prob.tokens):
            if not prob.budgets[tok.budget].binding:
                continue
            if len(tok.consumers) == 1:
                first = self.start[tok.consumers[0]]
            else:
                # the lifetime must reach the *first* consumer exactly: a shorter interval
                # would undercount, so this is an equality, not a bound
                first = model.new_int_var(0, self.horizon, f"tf{k}")
                model.add_min_equality(first, [self.start[v] for v in tok.consumers])
                self.token_first_var[k] = first
            self.token_first[k] = first
            # every consumer starts at least ``latency`` after the producer ends
            size = model.new_int_var(tok.end(tok.latency), self.horizon + tok.end(tok.latency), f"ts{k}")
            self.token_size[k] = size
            begin, end = self.end(tok.producer), first + tok.end(0)
            if tok.mandatory:
                self.token[k] = model.new_interval_var(begin, size, end, f"tok{k}")
            else:
                present = model.new_bool_var(f"tp{k}")
                self.token_present[k] = present
                self.token[k] = model.new_optional_interval_var(begin, size, end, present, f"tok{k}")

    def after_makespan(self, slack: int, name: str) -> cp_model.IntervalVar:
        """``[makespan + slack, horizon + slack + 1)``: added to a cumulative at full demand it
        tells the resource reasoning that every interval there ends by ``makespan + slack``
        (OR-Tools' rcpsp_sat "interval makespan"). Valid because holds end at a tail access end
        plus ``hold`` and flag lifetimes at a consumer start plus their latency plus one."""
        end = self.horizon + slack + 1
        size = self.model.new_int_var(1, end, f"{name}_size")
        self.tail_sizes.append(size)
        return self.model.new_interval_var(self.makespan + slack, size, end, name)

    def runs_after(self, a: int, b: int) -> Literal:
        """Literal "op ``a`` starts after op ``b`` ends" for two ops on one pipe."""
        lo, hi = min(a, b), max(a, b)
        lit = self._after.get((lo, hi))
        if lit is None:
            # lit: hi runs after lo; its negation: lo runs after hi (one pipe: one of the two)
            lit = self.model.new_bool_var(f"o{lo}_{hi}")
            self.model.add(self.start[hi] >= self.end(lo)).only_enforce_if(lit)
            self.model.add(self.start[lo] >= self.end(hi)).only_enforce_if(lit.Not())
            self._after[(lo, hi)] = lit
        return lit if a == hi else lit.Not()

    @property
    def order_literals(self) -> dict[tuple[int, int], cp_model.IntVar]:
        """``(lo, hi) -> literal "hi runs after lo"``, every one created so far."""
        return self._after
