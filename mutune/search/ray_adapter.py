"""Ray Tune adapter for mutune's own ASHA core (:mod:`mutune.search.asha`).

Ray Tune executes the trials; this :class:`~ray.tune.schedulers.FIFOScheduler` subclass asks the
pure core what to do with each result and hands every report and decision to the driver-side
:class:`~mutune.search.book.SweepBook` before deciding, so the results database sees them in
order. Ray calls ``on_trial_result`` with the trial RUNNING and its result not yet stored.
"""
from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from mutune.errors import SearchError
from mutune.search.asha import Decision

__all__ = ["RayASHA"]


class RayASHA(FIFOScheduler):
    """Drive a scheduler core from Ray Tune: CONTINUE, or STOP at a rung / on divergence.

    Args:
        core: the scheduler core holding the rungs (:class:`ASHA` or
            :class:`~mutune.search.hyperband.Hyperband`).
        book: the sweep's :class:`~mutune.search.book.SweepBook` (records reports, decisions).
        metric: the reported key ranked by the core (e.g. ``val_loss``).
        gate: the sweep's :class:`~mutune.search.budget.BudgetGate`, or None (no budget).
            Before a slot goes to a new trial the gate is asked whether its first rung fits;
            once it says no, the trials that never started are removed and each running
            trial stops at its next rung (``finish their rung``).
    """

    def __init__(self, core: Any, book: Any, metric: str, gate: Any = None) -> None:
        super().__init__()
        self.core, self.book, self.gate = core, book, gate
        self._metric, self._mode = metric, core.mode

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        """FIFO, unless the budget refuses the next new trial: then every trial that never
        started is removed (Ray calls this before it starts pending trials)."""
        if self.gate is not None:
            waiting = [t for t in tune_controller.get_trials()
                       if t.status == Trial.PENDING and t.trial_id not in self.book.trials]
            if waiting and not self.gate.admits(
                    self.gate.estimate_gpu_hours(self.book, self.core.grace_period),
                    f"a new trial at width {self.book.width}"):
                for t in waiting:
                    tune_controller.stop_trial(t)
                return None
        return super().choose_trial_to_run(tune_controller)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return metric in (None, self._metric) and mode in (None, self._mode)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        if self._metric not in result or "step" not in result:
            missing = self._metric if self._metric not in result else "step"
            raise SearchError(f"trial {trial.trial_id} reported without {missing!r}; "
                              f"got keys {sorted(result)}")
        self.book.record_report(trial, result)
        judgements = self.core.on_report(trial.trial_id, int(result["step"]),
                                         float(result[self._metric]))
        for j in judgements:
            self.book.record_judgement(trial, j)
        if any(j.decision is not Decision.CONTINUE for j in judgements):
            return TrialScheduler.STOP
        if judgements and self.gate is not None and self.gate.exhausted is not None:
            self.book.budget_stops[trial.trial_id] = judgements[-1].milestone
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def debug_string(self) -> str:
        return (f"mutune {type(self.core).__name__}: r={self.core.grace_period} "
                f"η={self.core.reduction_factor} max_t={self.core.max_t}")
