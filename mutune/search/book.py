"""The driver-side book of one Ray Tune run: trial lifecycle → the recorder (DESIGN.md §2).

A :class:`SweepBook` is a Ray Tune callback living in the driver process (never pickled into
workers). It gives each Ray trial a database id when Ray grants it resources, records every
report and scheduler decision with a sweep-wide sequence number as they happen, and on release
records the trial's terminal status and timing:

    allocated_s   driver wall seconds from resource grant (on_trial_start) to release
    productive_s  seconds inside training steps (reported by the trial)
    eval_s        seconds inside evaluations (reported by the trial)
    overhead_s    allocated_s − productive_s − eval_s (start-up, model build, reporting, teardown)
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ray.tune import Callback

from mutune.recorder import Recorder
from mutune.search.asha import Decision, Judgement
from mutune.search.trial_log import collect

__all__ = ["SweepBook", "TrialRecord"]


@dataclass
class TrialRecord:
    """What the driver knows of one trial; ``reports`` are the raw result dicts in order."""
    key: str
    trial_id: int
    point: dict[str, Any]
    started: float
    reports: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    reason: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def last_step(self) -> int:
        return int(self.reports[-1]["step"]) if self.reports else 0

    @property
    def n_evals(self) -> int:
        return len(self.reports)


class SweepBook(Callback):
    """Records one Ray Tune run (one proxy width's sweep, or the target run).

    Args:
        recorder: where rows go (the results store, or a MemoryRecorder in tests).
        sweep_id, proxy_sweep_id: ids from the recorder (proxy_sweep_id None for the target).
        kind: ``proxy`` or ``target``.
        width: model width of every trial in this run.
        max_t: steps a completed trial reaches.
        devices: devices granted per trial; device_kind: e.g. ``cpu``.
        seq: a shared counter ordering reports and decisions across the whole sweep.
        core: the ASHA or Hyperband core (None for the target run) — tells stopped from
            completed.
        on_progress: called with (trials finished, trials started) after each change.
        on_started: called with the recorder's trial id right after a trial is recorded.
        log_dir: where trials write their stdout/stderr/traceback
            (:mod:`mutune.search.trial_log`); each is recorded when the trial ends.
    """

    def __init__(self, recorder: Recorder, *, sweep_id: int, proxy_sweep_id: int | None,
                 kind: str, width: int, max_t: int, devices: float, device_kind: str,
                 seq: itertools.count, core: Any = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_started: Callable[[int], None] | None = None,
                 log_dir: str | None = None) -> None:
        self.recorder, self.sweep_id, self.proxy_sweep_id = recorder, sweep_id, proxy_sweep_id
        self.kind, self.width, self.max_t = kind, width, max_t
        self.devices, self.device_kind = devices, device_kind
        self.seq, self.core = seq, core
        self.on_progress, self.on_started = on_progress, on_started
        self.log_dir = log_dir
        self.trials: dict[str, TrialRecord] = {}
        #: Ray trial key → rung (steps) at which the budget stopped it
        self.budget_stops: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Ray Tune pickles its run config (callbacks, scheduler) into its experiment snapshot
        # in the driver. The copy keeps the trial records but no live recorder, counter or
        # callbacks: mutune resumes from its own database, never from that snapshot.
        state = dict(self.__dict__)
        state.update(recorder=None, seq=None, on_progress=None, on_started=None)
        return state

    # -- Ray Tune callback hooks (driver) ---------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        point = trial.config["point"]
        rec_id = self.recorder.trial_started(self.sweep_id, self.proxy_sweep_id, self.kind,
                                             trial.trial_id, self.width,
                                             point["hparams"], int(point["seed"]))
        self.trials[trial.trial_id] = TrialRecord(trial.trial_id, rec_id, point,
                                                  time.monotonic())
        if self.on_started is not None:
            self.on_started(rec_id)
        self._progress()

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self.record_report(trial, result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is None:   # removed before it started (the budget): nothing ran, nothing to record
            return
        decision = self.core.stopped(trial.trial_id) if self.core else None
        last = rec.reports[-1] if rec.reports else {}
        if decision is Decision.DIVERGED or (last and not math.isfinite(last["val_loss"])):
            status, reason = "diverged", "non-finite val_loss"
        elif trial.trial_id in self.budget_stops and rec.last_step < self.max_t:
            status, reason = "stopped", (f"budget exhausted: stopped at rung "
                                         f"{self.budget_stops[trial.trial_id]}")
        elif decision is Decision.STOP:
            status, reason = "stopped", f"below the rung cutoff at step {rec.last_step}"
        elif rec.last_step >= self.max_t:
            status, reason = "completed", None
        else:
            status, reason = "failed", f"ended at step {rec.last_step} < max_t {self.max_t}"
        self._finish(rec, status, reason)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is None:  # failed before it started
            self.on_trial_start(iteration, trials, trial)
            rec = self.trials[trial.trial_id]
        err = trial.get_error()
        text = str(err).strip().splitlines()[-1] if err else "trial raised an error"
        self._finish(rec, "failed", text[:2000], ray_error=str(err) if err else None)

    def close(self, status: str, reason: str) -> None:
        """After the run: record every trial Ray ended without telling the callbacks (a
        stopped experiment) as ``status`` with ``reason``."""
        for rec in self.trials.values():
            if rec.status == "running":
                self._finish(rec, status, reason)

    # -- called by the scheduler adapter before it decides ----------------------------------
    def record_report(self, trial: Any, result: dict) -> None:
        """Record ``result`` once (idempotent on step)."""
        rec = self.trials[trial.trial_id]
        step = int(result["step"])
        if rec.reports and int(rec.reports[-1]["step"]) >= step:
            return
        keep = {k: float(result[k]) for k in ("val_loss", "train_loss", "productive_s",
                                               "eval_s", "setup_s", "samples", "n_params",
                                               "replicates")
                if k in result}
        rec.reports.append({"step": step, **keep})
        self.recorder.trial_reported(rec.trial_id, step, keep, next(self.seq))

    def record_judgement(self, trial: Any, j: Judgement) -> None:
        """Record one scheduler decision for ``trial``."""
        rec = self.trials[trial.trial_id]
        self.recorder.scheduler_decided(rec.trial_id, j.milestone, j.value, j.cutoff,
                                        j.decision.value, next(self.seq))

    def next_milestone(self, rec: TrialRecord) -> int:
        """The next step at which trial ``rec`` will be judged (its bracket's rungs), or max_t
        when no rung is left (or there is no scheduler). Assigns no Hyperband bracket."""
        core, ms = self.core, []
        if core is not None and hasattr(core, "bracket_of"):
            s = core.bracket_of(rec.key)
            ms = core.brackets[s if s is not None else 0].milestones
        elif core is not None:
            ms = core.milestones
        return next((m for m in ms if m > rec.last_step), self.max_t)

    # -- helpers -----------------------------------------------------------------------------
    def _finish(self, rec: TrialRecord, status: str, reason: str | None,
                ray_error: str | None = None) -> None:
        if rec.status != "running":
            return
        allocated = time.monotonic() - rec.started
        last = rec.reports[-1] if rec.reports else {}
        productive = float(last.get("productive_s", 0.0))
        evals = float(last.get("eval_s", 0.0))
        rec.status, rec.reason = status, reason
        rec.timing = {"allocated_s": allocated, "productive_s": productive, "eval_s": evals,
                      "overhead_s": max(allocated - productive - evals, 0.0),
                      "steps": rec.last_step, "samples": float(last.get("samples", 0.0)),
                      "evals": rec.n_evals, "n_params": float(last.get("n_params", 0.0)),
                      "devices": self.devices, "device_kind": self.device_kind}
        self.recorder.trial_finished(rec.trial_id, status, reason, rec.timing)
        log = collect(self.log_dir, rec.key)
        if log is not None or ray_error is not None:
            log = log or {"stdout": "", "stderr": "", "traceback": None}
            # a traceback only for a trial that failed (a stopped trial's thread may be ended
            # by an exception after its last report; that is not the trial's error)
            trace = (log.get("traceback") or ray_error) if status == "failed" else None
            self.recorder.trial_logged(rec.trial_id, log.get("stdout") or "",
                                       log.get("stderr") or "", trace)
        self._progress()

    def _progress(self) -> None:
        if self.on_progress is not None:
            done = sum(r.status != "running" for r in self.trials.values())
            self.on_progress(done, len(self.trials))
