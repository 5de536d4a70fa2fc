"""Ray Tune adapter for mutune's scheduler cores (:mod:`mutune.search.schedulers.factory`).

Ray Tune executes the trials; this :class:`~ray.tune.schedulers.FIFOScheduler` subclass asks the
pure core what to do with each result and hands every report and decision to the driver-side
:class:`~mutune.search.backends.ray_tune.callback.SweepBook` before deciding, so the results database sees them in
order. Hook states (Ray Tune 2.x):

* ``on_trial_result``: the trial is RUNNING, its result not yet stored. Returns CONTINUE, STOP
  (stopped at a rung, or diverged) or PAUSE (promotion variant: Ray saves the trial's last
  reported checkpoint and frees its resources).
* ``choose_trial_to_run``: called whenever Ray could start a trial. The core's promotion
  candidate (a PAUSED trial) goes first: it is promoted, recorded, and handed back for Ray to
  resume from its checkpoint; otherwise a PENDING trial. When nothing runs or waits, no point is
  left to propose and no paused trial is promotable, the core's ``finish()`` stops the paused
  trials (``stop_trial``), so no trial is left paused (DESIGN.md §4).

Ray's own ``AsyncHyperBandScheduler`` is the stopping variant only, cuts at a percentile of the
other trials' values (the newcomer excluded), and judges a report that jumps past several
milestones at the highest one only (the lower rungs never see the trial); see
:mod:`mutune.search.schedulers.asha` for mutune's rule.
"""
from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from mutune.errors import SearchError
from mutune.search.schedulers.asha import Decision

__all__ = ["RayASHA"]


class RayASHA(FIFOScheduler):
    """Drive a scheduler core from Ray Tune.

    Args:
        core: the scheduler core (ASHA, PromotionASHA or Hyperband).
        book: the sweep's :class:`~mutune.search.backends.ray_tune.callback.SweepBook` (records reports, decisions).
        metric: the reported key ranked by the core (e.g. ``val_loss``).
        searcher: the :class:`~mutune.search.backends.ray_tune.searcher_adapter.RaySearcher` (tells whether new
            trials may still come); None: every trial is already known to Ray.
        gate: the sweep's :class:`~mutune.search.budget.BudgetGate`, or None (no budget).
            The searcher asks it before each new trial; once it has said no, each running
            trial stops at its next rung (``finish their rung``).
    """

    def __init__(self, core: Any, book: Any, metric: str, searcher: Any = None,
                 gate: Any = None) -> None:
        super().__init__()
        self.core, self.book, self.searcher, self.gate = core, book, searcher, gate
        self._metric, self._mode = metric, core.mode

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return metric in (None, self._metric) and mode in (None, self._mode)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        if self._metric not in result or "step" not in result:
            missing = self._metric if self._metric not in result else "step"
            raise SearchError(f"trial {trial.trial_id} reported without {missing!r}; "
                              f"got keys {sorted(result)}")
        if not self.book.record_report(trial, result):
            return TrialScheduler.CONTINUE      # a step repeated after a restore
        judgements = self.core.on_report(self.book.key_of(trial), int(result["step"]),
                                         float(result[self._metric]))
        for j in judgements:
            self.book.record_judgement(trial, j)
        if judgements:
            self.book.save_state()
        if any(j.decision in (Decision.STOP, Decision.DIVERGED) for j in judgements):
            return TrialScheduler.STOP
        if judgements and self.gate is not None and self.gate.exhausted is not None:
            self.book.budget_stops[trial.trial_id] = judgements[-1].milestone
            return TrialScheduler.STOP
        if judgements and judgements[-1].decision is Decision.PAUSE:
            self.book.record_pause(trial)
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        trials = tune_controller.get_trials()
        cand = self.core.candidate()
        if cand is not None:
            for trial in trials:
                if trial.status == Trial.PAUSED and self.book.key_of(trial) == cand.trial:
                    self.book.record_judgement(trial, self.core.promote(cand.trial))
                    self.book.save_state()
                    return trial
        for trial in trials:
            if trial.status == Trial.PENDING:
                return trial
        busy = any(t.status in (Trial.RUNNING, Trial.PENDING) for t in trials)
        more = self.searcher is not None and self.searcher.new_trials_left
        if cand is None and not busy and not more and self.core.paused():
            by_key = {self.book.key_of(t): t for t in trials}
            for j in self.core.finish():
                trial = by_key.get(j.trial)
                if trial is None:       # a dormant trial of a resumed sweep: never in Ray
                    self.searcher.finish_dormant(j.trial, j)
                    continue
                self.book.record_judgement(trial, j)
                tune_controller.stop_trial(trial)
            self.book.save_state()
        return None

    def debug_string(self) -> str:
        return (f"mutune {type(self.core).__name__} ({self.core.variant}): "
                f"r={self.core.grace_period} η={self.core.reduction_factor} "
                f"max_t={self.core.max_t}")
