"""The stages after the proxy sweeps as groups of the one run: each proxy's confirmation design,
then the gate's rounds. Each step is a function of the recorded trials alone, so a resumed
sweep takes the same steps."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mutune.errors import FitError, SearchError
from mutune.pipeline.gate import GateRound, Size
from mutune.pipeline.sweep import ProxyResult, SweepRun

__all__ = ["StageGroups", "GateRound", "Size"]

@dataclass
class _Proxy:
    index: int
    width: int
    depth: int | None
    proxy_sweep_id: int | None = None

    @property
    def size(self) -> Size:
        return self.width if self.depth is None else (self.width, self.depth)


class StageGroups:
    """The confirmation designs and gate rounds of one sweep, released as groups of its
    proxies' run.

    ``sizes``: (width, depth or None) per proxy in proxy order. Under a budget the designs wait
    until every proxy's sweep is done; ``fitted`` is the latest fit on :meth:`final`."""

    def __init__(self, run: SweepRun, sizes: list[tuple[int, int | None]]) -> None:
        self.run = run
        self.proxies = [_Proxy(i, w, d) for i, (w, d) in enumerate(sizes)]
        self._by_size = {p.size: p for p in self.proxies}
        self._sweep_groups: dict[str, _Proxy] = {}
        self._first: dict[str, Size] = {}         # first design group → proxy
        self.results: dict[Size, ProxyResult] = {}
        self.sweeps: dict[Size, Any] = {}
        self.refitted: dict[Size, ProxyResult] = {}
        self.confirmed: dict[Size, ProxyResult] = {}
        self.states: dict[Size, Any] = {}
        self.rounds: list[GateRound] = []
        self.first_verdicts: dict[str, str] | None = None
        self.fitted: tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]] | None = None
        from mutune.pipeline.confirm_stage import designed_widths
        widths = designed_widths(run.config, [p.width for p in self.proxies])
        #: the proxies that retrain a first design; the others are moved (horizon_shift)
        self.designed = {p.size for p in self.proxies if p.width in widths}

    # -- what the run is told ---------------------------------------------------------------
    def swept(self, group: str, width: int, depth: int | None, proxy_sweep_id: int) -> None:
        """Proxy ``(width, depth)``'s sweep runs as driver group ``group``."""
        p = self._by_size[width if depth is None else (width, depth)]
        p.proxy_sweep_id = proxy_sweep_id
        self._sweep_groups[group] = p

    def rebuilt(self, result: ProxyResult, outcome: Any) -> None:
        """A proxy whose sweep had completed (a resumed sweep): its result, not recorded again."""
        self.results[result.size], self.sweeps[result.size] = result, outcome

    def ready(self) -> list[Any]:
        """The groups released before the run starts."""
        return self._release()

    def follow(self, group: str, outcome: Any) -> list[Any]:
        """What joins the run now that ``group`` is done; never raises (a proxy without result gets
        no design)."""
        if group in self._sweep_groups:
            return self._sweep_done(self._sweep_groups[group], outcome)
        if group in self._first:
            size = self._first.pop(group)
            self.states[size].designs.append(outcome)
            return self._designs_done() if self._all_designed() else []
        rnd = next((r for r in self.rounds if group in r.groups), None)
        if rnd is None:
            return []
        rnd.outcomes[rnd.groups[group]] = outcome
        return self._round_done(rnd) if rnd.done else []

    def ran(self, outcomes: dict[str, Any]) -> None:
        """The run's final outcomes by group (every trial in its terminal state)."""
        for g, proxy in self._sweep_groups.items():
            if g in outcomes and proxy.size in self.sweeps:
                self.sweeps[proxy.size] = outcomes[g]
                if proxy.size in self.states:
                    self.states[proxy.size].sweep = outcomes[g]
        for state in self.states.values():
            state.designs = [outcomes.get(g, o) for g, o in zip(state.groups, state.designs)]
        for rnd in self.rounds:
            for g, size in rnd.groups.items():
                if g in outcomes and size in rnd.outcomes:
                    rnd.outcomes[size] = outcomes[g]

    # -- what the stages after the run read ---------------------------------------------------
    def screened(self) -> list[tuple[ProxyResult, Any]]:
        """(the sweep's ProxyResult, its RunOutcome) per proxy that has one, in proxy order."""
        return [(self.results[p.size], self.sweeps[p.size]) for p in self.proxies
                if p.size in self.results]

    def final(self) -> list[tuple[ProxyResult, Any]]:
        """(ProxyResult refitted on every design, its sweep's RunOutcome) per proxy, in proxy order.

        Raises:
            SearchError: a proxy has no result."""
        missing = [p.size for p in self.proxies if p.size not in self.results]
        if missing:
            raise SearchError(f"no sweep result for proxies {missing}")
        return [(self.refitted.get(p.size) or self.results[p.size], self.sweeps[p.size])
                for p in self.proxies]

    # -- steps ------------------------------------------------------------------------------
    def _sweep_done(self, proxy: _Proxy, outcome: Any) -> list[Any]:
        from mutune.pipeline.proxy_best import width_result

        try:
            result = width_result(self.run, proxy.width, proxy.proxy_sweep_id, outcome,
                                  depth=proxy.depth)
        except (SearchError, FitError, ValueError):
            return []
        self.results[proxy.size], self.sweeps[proxy.size] = result, outcome
        specs = self._release()
        return specs or (self._designs_done() if self._all_designed() else [])

    def _release(self) -> list[Any]:
        """The first designs due now, in the order their proxies' sweeps ended."""
        from mutune.pipeline.confirm_stage import design_center, design_spec, trials_per_design
        from mutune.pipeline.gate import ConfirmState

        budget = self.run.budget
        if trials_per_design(self.run.config) == 0 or (budget is not None and (
                budget.exhausted is not None or len(self.results) < len(self.proxies))):
            return []
        specs = []
        for size, result in self.results.items():
            if size in self.states or size not in self.designed:
                continue
            center = design_center(self.run.config, result)
            spec = design_spec(self.run, result, self._by_size[size].index, center)
            self.states[size] = ConfirmState(self.sweeps[size], [], center, [spec.group])
            self._first[spec.group] = size
            specs.append(spec)
        return specs

    def _all_designed(self) -> bool:
        """Whether every proxy has its sweep's result and every first design has ended, and
        the designs have not been fitted yet."""
        return (not self._first and not self.confirmed and bool(self.designed)
                and len(self.results) == len(self.proxies)
                and all(s in self.states for s in self.designed))

    def _designs_done(self) -> list[Any]:
        from mutune.pipeline.gate import refit_optimum

        for size in self.designed:
            self.refitted[size] = refit_optimum(self.run, self.results[size], self.states[size])
        unmoved = self._move_undesigned()
        if unmoved:     # a width whose optimum cannot be moved gets a design of its own
            self.designed |= set(unmoved)
            specs = self._release()
            if specs:
                return specs
        self.confirmed = dict(self.refitted)
        self.first_verdicts = self._fit()
        return self._next_round()

    def _round_done(self, rnd: GateRound) -> list[Any]:
        from mutune.pipeline.gate import refit_optimum

        for size, outcome in rnd.outcomes.items():
            self.states[size].designs.append(outcome)
            self.refitted[size] = refit_optimum(self.run, self.refitted[size],
                                                self.states[size])
        self._move_undesigned()
        rnd.verdicts = self._fit()
        return self._next_round()

    def _next_round(self) -> list[Any]:
        from mutune.pipeline.confirm_stage import design_spec
        from mutune.pipeline.gate import ConfirmState, gate_problems, plan_round

        tr, budget = self.run.config.transfer, self.run.budget
        if (tr.gate == "stop" or len(self.rounds) >= tr.gate_rounds
                or (budget is not None and budget.exhausted is not None)):
            return []
        bad = gate_problems(self.fitted[0]) if self.fitted is not None else {}
        if not bad:
            return []
        number = len(self.rounds) + 1
        actions, jobs = plan_round(self.run, self.final(), self.states, bad)
        specs = [design_spec(self.run, p, i, center, round_=number) for p, i, center in jobs]
        rnd = GateRound(number, bad, actions, {s.group: p.size for s, (p, _, _) in
                                               zip(specs, jobs)})
        self.rounds.append(rnd)
        for s, (p, _, center) in zip(specs, jobs):
            # a widened design at a width that had none: it is refitted from now on
            self.states.setdefault(p.size, ConfirmState(self.sweeps[p.size], [], center))
            self.states[p.size].groups.append(s.group)
        return specs or self._round_done(rnd)

    def _move_undesigned(self) -> list[Size]:
        """Every proxy without a design: its rung optimum moved to max_t by the widest designed
        width at its depth (:func:`mutune.pipeline.horizon_shift.shifted_optimum`), its best at
        max_t the sweep's completed trials' (the rung's where none completed). Returns the
        proxies that could not be moved (no shift measured, or no quadratic at the rung)."""
        from mutune.pipeline.fitted_rule import size_label
        from mutune.pipeline.horizon_shift import max_t_best, shifted_optimum
        from mutune.pipeline.sweep import record_best

        unmoved = []
        for p in self.proxies:
            anchors = [a for a in self.proxies if a.size in self.states and a.depth == p.depth]
            if p.size in self.states or not anchors:
                continue
            a = max(anchors, key=lambda q: q.width)
            own = self.results[p.size]
            if own.optimum is None:       # the rules' fit says so
                unmoved.append(p.size)
                continue
            opt = shifted_optimum(self.run.config, own, self.sweeps[p.size],
                                  self.refitted[a.size], self.results[a.size],
                                  self.sweeps[a.size], size_label(a.width, a.depth))
            best = max_t_best(self.run.config, self.sweeps[p.size]) or {}
            moved = dataclasses.replace(own, optimum=opt, **best)
            if moved != self.refitted.get(p.size):
                record_best(self.run, moved, opt.n_trials)
            self.refitted[p.size] = moved
            if "error" in (opt.horizon_shift or {}) or opt.method == "best-trial":
                unmoved.append(p.size)
        return unmoved

    def _fit(self) -> dict[str, str] | None:
        """Fit the rules on the current optima and return their verdicts; None when the fit
        fails."""
        from mutune.pipeline.gate import fit_rules

        try:
            self.fitted = fit_rules(self.run, self.final())
        except (FitError, ValueError):
            self.fitted = None
            return None
        return {r["hyperparameter"]: r["verdict"] for r in self.fitted[0]}
