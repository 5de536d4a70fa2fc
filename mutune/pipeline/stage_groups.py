"""The stages after the proxy sweeps as groups of the one run: each proxy's confirmation
design, then the gate's rounds.

:class:`StageGroups` is the follow-up of the run that sweeps the proxies
(:func:`mutune.pipeline.proxy_stage.run_widths`). When a proxy's sweep is done its best trial
and optimum are recorded and its first design is released; when every design is done the
optima are refitted at the full horizon, the transfer rules fitted, and — where the gate acts
(docs/transfer.md) — the next round's designs released; and so on for up to
``transfer.gate_rounds`` rounds. Every release is a
:class:`~mutune.search.backends.groups.GroupSpec` whose trials take the slots the
other groups leave free, so nothing waits for a Ray Tune run of its own.

The same object runs a new sweep, a budgeted one and a resumed one:

* without a budget a design is released as soon as its proxy's sweep is done;
* under a budget every proxy trial is admitted before any design trial: the designs are
  released once every proxy's sweep is done;
* on resume the proxies that had completed are handed in (:meth:`StageGroups.rebuilt`) and their
  designs released before the run starts (:meth:`StageGroups.ready`); a design's trials the
  sweep had recorded are kept or continued under their keys
  (:func:`mutune.pipeline.recorded.recorded_trials`), so a stage that had ended is done again
  without training anything.

Each step is a function of the recorded trials alone, so a resumed sweep takes the same
steps, and the gate after the run (:func:`mutune.pipeline.gate.gate_rules`) records what
the rounds did without training anything more.
"""
from __future__ import annotations

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
    """The confirmation designs and gate rounds of one sweep, released as groups of the run
    that sweeps its proxies (see the module docstring).

    Args:
        run: the sweep.
        sizes: (width, depth or None) per proxy, in the sweep's proxy order (a proxy's
            position seeds its trials).
    Attributes:
        results: proxy → its sweep's :class:`ProxyResult` (best trial at the equal-budget
            rung), once its sweep is done.
        sweeps: proxy → its sweep's RunOutcome.
        refitted: proxy → its ProxyResult refitted on every design trained so far.
        confirmed: proxy → its ProxyResult refitted on its first design alone (before any
            gate round).
        states: proxy → its :class:`~mutune.pipeline.gate.ConfirmState`.
        rounds: the gate rounds released, in order.
        first_verdicts: the rules' verdicts on the first designs (None: not fitted yet, or
            the fit failed).
        fitted: the latest :func:`~mutune.pipeline.gate.fit_rules` (rules, the target's
            hyperparameters, its settings) on :meth:`final`, None before the designs are
            done or when that fit failed.
    """

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

    # -- what the run is told ---------------------------------------------------------------
    def swept(self, group: str, width: int, depth: int | None, proxy_sweep_id: int) -> None:
        """Proxy ``(width, depth)``'s sweep runs as driver group ``group``."""
        p = self._by_size[width if depth is None else (width, depth)]
        p.proxy_sweep_id = proxy_sweep_id
        self._sweep_groups[group] = p

    def rebuilt(self, result: ProxyResult, outcome: Any) -> None:
        """A proxy whose sweep had completed (a resumed sweep): its result, not recorded
        again."""
        self.results[result.size], self.sweeps[result.size] = result, outcome

    def ready(self) -> list[Any]:
        """The groups released before the run starts (a resumed sweep's completed proxies'
        designs, and whatever follows a stage that had ended)."""
        return self._release()

    def follow(self, group: str, outcome: Any) -> list[Any]:
        """The run's follow-up (:data:`~mutune.search.backends.joining.FollowUp`):
        what joins the run now that ``group`` is done. Never raises for a group it cannot
        follow: a proxy whose result cannot be had (every trial diverged) gets no design,
        and the stages after the run report it."""
        if group in self._sweep_groups:
            return self._sweep_done(self._sweep_groups[group], outcome)
        if group in self._first:
            size = self._first.pop(group)
            self.states[size].designs.append(outcome)
            return self._designs_done() if not self._first else []
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
        """(ProxyResult refitted on every design, its sweep's RunOutcome) per proxy, in proxy
        order (the sweep's result where no design was trained).

        Raises:
            SearchError: a proxy has no result.
        """
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
        return self._release()

    def _release(self) -> list[Any]:
        """The first designs due now (see the module docstring), in the order their proxies'
        sweeps ended."""
        from mutune.pipeline.confirm_stage import design_center, design_spec, trials_per_design
        from mutune.pipeline.gate import ConfirmState

        budget = self.run.budget
        if trials_per_design(self.run.config) == 0 or (budget is not None and (
                budget.exhausted is not None or len(self.results) < len(self.proxies))):
            return []
        specs = []
        for size, result in self.results.items():
            if size in self.states:
                continue
            center = design_center(self.run.config, result)
            spec = design_spec(self.run, result, self._by_size[size].index, center)
            self.states[size] = ConfirmState(self.sweeps[size], [], center, [spec.group])
            self._first[spec.group] = size
            specs.append(spec)
        return specs

    def _designs_done(self) -> list[Any]:
        from mutune.pipeline.gate import refit_optimum

        if len(self.states) < len(self.proxies):      # a proxy without a result
            return []
        for p in self.proxies:
            self.refitted[p.size] = refit_optimum(self.run, self.results[p.size],
                                                  self.states[p.size])
        self.confirmed = dict(self.refitted)
        self.first_verdicts = self._fit()
        return self._next_round()

    def _round_done(self, rnd: GateRound) -> list[Any]:
        from mutune.pipeline.gate import refit_optimum

        for size, outcome in rnd.outcomes.items():
            self.states[size].designs.append(outcome)
            self.refitted[size] = refit_optimum(self.run, self.refitted[size],
                                                self.states[size])
        rnd.verdicts = self._fit()
        return self._next_round()

    def _next_round(self) -> list[Any]:
        from mutune.pipeline.confirm_stage import design_spec
        from mutune.pipeline.gate import gate_problems, plan_round

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
        for s in specs:
            self.states[rnd.groups[s.group]].groups.append(s.group)
        return specs or self._round_done(rnd)

    def _fit(self) -> dict[str, str] | None:
        """Fit the transfer rules on the current optima (kept for the next round's plan) and
        return their verdicts; None when the fit fails (the gate after the run fits again
        and raises)."""
        from mutune.pipeline.gate import fit_rules

        try:
            self.fitted = fit_rules(self.run, self.final())
        except (FitError, ValueError):
            self.fitted = None
            return None
        return {r["hyperparameter"]: r["verdict"] for r in self.fitted[0]}
