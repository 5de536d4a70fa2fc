"""Ray Tune's ``TrialScheduler`` face of the driver loop: translation, no decisions."""
from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from mutune.errors import SearchError
from mutune.search.driver import ActionKind, SweepDriver
from mutune.search.schedulers.inputs import check_step, check_value
from mutune.search.trial.report_hold import HELD_KEY

__all__ = ["RayScheduler"]


class RayScheduler(FIFOScheduler):
    """Drive a :class:`~mutune.search.driver.SweepDriver` from Ray Tune's scheduler hooks.

    ``worker_env``: the environment the cluster's workers start with
    (:func:`~.cluster.local_worker_env`), None when unknown; where it holds what Ray Tune would
    put in a trial actor's ``runtime_env``, the actors are made without one and can start in
    Ray's idle workers (:func:`mutune._internals.use_idle_workers`)."""

    def __init__(self, driver: SweepDriver, book: Any, metric: str, mode: str,
                 worker_env: dict[str, str] | None = None) -> None:
        super().__init__()
        self.driver, self.book = driver, book
        # the trainable's actor class is settled at the first trial added
        self._worker_env, self._classed = worker_env, False
        self._metric, self._mode = metric, mode
        self._kept: set[Any] = set()     # the trial resources whose actors Tune keeps

    def __getstate__(self) -> dict[str, Any]:
        # Tune snapshots the scheduler into its experiment state: no live driver or book,
        # nor the workers' environment (it may hold credentials)
        return {**self.__dict__, "driver": None, "book": None, "_worker_env": None}

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_add(tune_controller, trial)
        if not self._classed:        # before Tune makes any actor of the run
            from mutune._internals import use_idle_workers

            use_idle_workers(tune_controller, trial, self._worker_env)
            self._classed = True

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return metric in (None, self._metric) and mode in (None, self._mode)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        # the reports the trial held back come first, each as if it had arrived alone; one
        # the driver acts on ends the list: what followed it is not recorded
        # (mutune/search/trial/report_hold.py)
        for held in result.get(HELD_KEY) or ():
            decision = self._judge(trial, held)
            if decision != TrialScheduler.CONTINUE:
                return decision
        return self._judge(trial, result)

    def _judge(self, trial: Any, result: dict) -> str:
        for name in (self._metric, "step"):
            if name not in result:
                raise SearchError(f"trial {self.book.key_of(trial)!r} reported without "
                                  f"{name!r}; got keys {sorted(result)}")
        key = self.book.key_of(trial)
        check_step(key, result["step"])
        check_value(key, result[self._metric], field=self._metric)
        if not self.book.record_report(trial, result):
            return TrialScheduler.CONTINUE      # a step repeated after a restore
        se = result.get(f"{self._metric}_se")
        out = self.driver.report(key, result["step"], result[self._metric],
                                 se=float(se) if isinstance(se, (int, float)) else None)
        for j in out.judgements:
            self.book.record_judgement(trial, j)
        if out.judgements:
            self.book.save_state(key)
        if out.action == "end":
            return TrialScheduler.STOP
        if out.action == "pause":
            self.book.record_pause(trial)
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        trials = tune_controller.get_trials()
        paused = {self.book.key_of(t): t for t in trials if t.status == Trial.PAUSED}
        act = self.driver.next_action(can_start=False,
                                      can_promote_live=lambda key: key in paused,
                                      can_finish_live=lambda key: key in paused)
        if act.kind is ActionKind.PROMOTE:
            trial = paused[act.key]
            self.book.record_judgement(trial, act.judgement)
            self.book.save_state(act.key)
            return trial
        if act.kind is ActionKind.DONE and act.finished:
            for j in act.finished:
                trial = paused.get(j.trial)
                if trial is None:       # a dormant trial of a resumed sweep: never in Ray
                    self.book.finish_dormant(j.trial, j)
                    continue
                self.book.record_judgement(trial, j)
                tune_controller.stop_trial(trial)
            self.book.save_state()
        for trial in trials:
            if trial.status == Trial.PENDING:
                self._keep_actors(tune_controller, trial)
                return trial
        return None

    def _keep_actors(self, tune_controller: Any, trial: Any) -> None:
        """Once per trial resources: Tune keeps a slot's actor for the next trial even
        while none waits (:func:`mutune._internals.keep_actors`)."""
        resources = trial.placement_group_factory
        if resources in self._kept:
            return
        from mutune._internals import keep_actors

        keep_actors(tune_controller, resources, self.driver.concurrency)
        self._kept.add(resources)

    def debug_string(self) -> str:
        return f"mutune driver over groups {self.driver.order}"
