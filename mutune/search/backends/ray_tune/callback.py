"""The driver-side book of one Ray Tune run: trial lifecycle → the recorder (DESIGN.md §2).

A :class:`SweepBook` is a Ray Tune callback living in the driver process (never pickled into
workers). It gives each Ray trial a database id when Ray grants it resources, records every
report and scheduler decision with a sweep-wide sequence number as they happen, and on release
records the trial's terminal status and timing:

    allocated_s   driver wall seconds holding resources: from each grant (on_trial_start) to
                  the next pause or the release, summed (restarts included, waits while
                  paused at a rung excluded: the resources were free then)
    productive_s  seconds inside training steps (reported by the trial, cumulative over
                  restarts from the checkpoint; work lost to a failure is not in it)
    eval_s        seconds inside evaluations (reported by the trial)
    overhead_s    allocated_s − productive_s − eval_s (start-up, model build, reporting,
                  checkpoints, recovery, teardown)
    restarts      times the trial started again after a failure (``max_failures`` retries)
    resumes       times a paused trial was promoted and resumed from its checkpoint
    repeated_steps  steps trained again after a restart (reported past the checkpoint before
                  the failure, then trained once more): waste
    recovery_s    seconds of restart set-up and checkpoint loading, plus the repeated steps'
                  productive seconds (their measured seconds per step): waste
"""
from __future__ import annotations

import itertools
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune import Callback

from mutune.recording import Recorder
from mutune.search.schedulers.asha import Decision, Judgement
from mutune.search.trial.logs import collect

__all__ = ["SweepBook", "TrialRecord", "close_record", "checkpoint_bytes_on_disk",
           "drop_checkpoints"]


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
    held_s: float = 0.0
    segment_start: float | None = None
    restarts: int = 0
    restarts_booked: int = 0
    resumes: int = 0
    restarting: bool = False
    repeated_steps: int = 0
    recovery_s: float = 0.0
    ended: float | None = None
    trial_dir: str | None = None
    last_progress: float | None = None
    nodes: list[str] = field(default_factory=list)

    @property
    def last_step(self) -> int:
        return int(self.reports[-1]["step"]) if self.reports else 0

    @property
    def n_evals(self) -> int:
        return len(self.reports)


def close_record(rec: TrialRecord, status: str, reason: str | None, *, devices: float,
                 device_kind: str) -> dict[str, Any]:
    """End ``rec`` with ``status``/``reason`` and compute its timing (see the module
    docstring); returns ``rec.timing``, the dict ``Recorder.trial_finished`` takes."""
    allocated = rec.held_s + (time.monotonic() - rec.segment_start
                              if rec.segment_start is not None else 0.0)
    rec.segment_start = None
    rec.ended = time.monotonic()
    last = rec.reports[-1] if rec.reports else {}
    productive = float(last.get("productive_s", 0.0))
    evals = float(last.get("eval_s", 0.0))
    rec.status, rec.reason = status, reason
    rec.timing = {"allocated_s": allocated, "productive_s": productive, "eval_s": evals,
                  "overhead_s": max(allocated - productive - evals, 0.0),
                  "steps": rec.last_step, "samples": float(last.get("samples", 0.0)),
                  "evals": rec.n_evals, "n_params": float(last.get("n_params", 0.0)),
                  "devices": devices, "device_kind": device_kind,
                  "restarts": rec.restarts, "resumes": rec.resumes,
                  "repeated_steps": rec.repeated_steps, "recovery_s": rec.recovery_s,
                  "checkpoint_s": float(last.get("checkpoint_s", 0.0)),
                  "setup_s": float(last.get("setup_s", 0.0)),
                  "checkpoint_bytes": float(last.get("checkpoint_bytes", 0.0))}
    return rec.timing


def checkpoint_bytes_on_disk(trial_dir: str | None) -> int:
    """Bytes of the checkpoint folders (``checkpoint_*``) Ray Tune keeps for a trial."""
    if not trial_dir or not os.path.isdir(trial_dir):
        return 0
    return sum(f.stat().st_size for d in Path(trial_dir).glob("checkpoint_*")
               for f in d.rglob("*") if f.is_file())


def drop_checkpoints(trial_dir: str | None) -> None:
    """Delete a finished trial's checkpoint folders (retention: a trial stopped at a rung or
    diverged will never be resumed)."""
    if trial_dir and os.path.isdir(trial_dir):
        for d in Path(trial_dir).glob("checkpoint_*"):
            shutil.rmtree(d, ignore_errors=True)


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
        zombie_timeout_s: a running trial with no report for longer is a zombie (None: off).
        log_dir: where trials write their stdout/stderr/traceback
            (:mod:`mutune.search.trial.logs`); each is recorded when the trial ends.
        searcher: the mutune searcher (its state is saved with the core's after decisions).
        heartbeat_s: beat for every running trial at most this often (seconds).
        resumed: trials of an interrupted run to continue, by key (their recorded
            :class:`TrialRecord`): they keep their database row instead of getting a new one.

    Trials are identified by ``point["key"]`` (the key the scheduler core and searcher use):
    the Ray trial id when first proposed, and the same key when a resumed sweep continues the
    trial under a new Ray trial id.
    """

    def __init__(self, recorder: Recorder, *, sweep_id: int, proxy_sweep_id: int | None,
                 kind: str, width: int, max_t: int, devices: float, device_kind: str,
                 seq: itertools.count, core: Any = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_started: Callable[[int], None] | None = None, searcher: Any = None,
                 heartbeat_s: float = 10.0,
                 resumed: dict[str, TrialRecord] | None = None,
                 log_dir: str | None = None, zombie_timeout_s: float | None = None) -> None:
        self.recorder, self.sweep_id, self.proxy_sweep_id = recorder, sweep_id, proxy_sweep_id
        self.kind, self.width, self.max_t = kind, width, max_t
        self.devices, self.device_kind = devices, device_kind
        self.seq, self.core, self.searcher = seq, core, searcher
        self.on_progress, self.on_started = on_progress, on_started
        self.heartbeat_s = heartbeat_s
        self.resumed = dict(resumed or {})
        self.trials: dict[str, TrialRecord] = {}
        self.log_dir = log_dir
        self.zombie_timeout_s = zombie_timeout_s
        #: Ray trial id → why it was flagged a zombie
        self.zombies: dict[str, str] = {}
        #: Ray trial id → rung (steps) at which the budget stopped it
        self.budget_stops: dict[str, int] = {}
        self.last_seq = 0
        self._last_beat = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        # Ray Tune pickles its run config (callbacks, scheduler) into its experiment snapshot
        # in the driver. The copy keeps the trial records but no live recorder, counter or
        # callbacks: mutune resumes from its own database, never from that snapshot.
        state = dict(self.__dict__)
        state.update(recorder=None, seq=None, on_progress=None, on_started=None,
                     searcher=None, core=None)
        return state

    def _next_seq(self) -> int:
        self.last_seq = next(self.seq)
        return self.last_seq

    # -- Ray Tune callback hooks (driver) ---------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is not None:             # a promoted trial resumed, or a retry after a failure
            if rec.segment_start is None:
                rec.segment_start = time.monotonic()
                rec.resumes += 1
            rec.restarting = True
            return
        point = trial.config["point"]
        key = str(point.get("key", trial.trial_id))
        now = time.monotonic()
        old = self.resumed.pop(key, None)
        if old is not None:            # a trial of an interrupted run continues
            old.status, old.segment_start, old.restarting = "running", now, True
            old.restarts += 1
            self.trials[trial.trial_id] = old
            self.recorder.trial_resumed(old.trial_id, old.reason or "resumed")
            rec_id = old.trial_id
        else:
            rec_id = self.recorder.trial_started(self.sweep_id, self.proxy_sweep_id, self.kind,
                                                 key, self.width, point["hparams"],
                                                 int(point["seed"]))
            self.trials[trial.trial_id] = TrialRecord(key, rec_id, point, now,
                                                      segment_start=now)
        if getattr(trial, "path", None):
            self.recorder.trial_checkpoint_dir(rec_id, str(trial.path))
            if trial.trial_id in self.trials:
                self.trials[trial.trial_id].trial_dir = str(trial.path)
        if self.on_started is not None:
            self.on_started(rec_id)
        self._progress()

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self.record_report(trial, result)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """Heartbeats: every ``heartbeat_s`` the driver beats for each trial holding
        resources (a paused trial holds none and is not beaten). Zombies: with
        ``zombie_timeout_s``, a trial holding its devices with no report for longer is
        flagged, its worker killed (no retry), and it ends ``zombie`` with the reason."""
        now = time.monotonic()
        if self.zombie_timeout_s is not None:
            self._reap_zombies(trials, now)
        if now - self._last_beat < self.heartbeat_s:
            return
        self._last_beat = now
        for rec in self.trials.values():
            if rec.status == "running" and rec.segment_start is not None:
                self.recorder.heartbeat(rec.trial_id)

    def _reap_zombies(self, trials: list, now: float) -> None:
        import ray
        from ray.tune.experiment import Trial

        for trial in trials:
            rec = self.trials.get(trial.trial_id)
            if (rec is None or trial.status != Trial.RUNNING or rec.segment_start is None
                    or trial.trial_id in self.zombies):
                continue
            quiet = now - max(rec.segment_start, rec.last_progress or 0.0)
            actor = getattr(trial.temporary_state, "ray_actor", None)
            if quiet <= self.zombie_timeout_s or actor is None:
                continue
            self.zombies[trial.trial_id] = (
                f"zombie: no report for {quiet:.1f} s > ray.zombie_timeout_s "
                f"{self.zombie_timeout_s:g} s while holding {self.devices:g} "
                f"{self.device_kind} device(s); worker killed")
            trial.max_failures = trial.num_failures     # flagged: stopped, not retried
            ray.kill(actor, no_restart=True)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is None:   # removed before it started (the budget): nothing ran, nothing to record
            return
        decision = self.core.stopped(rec.key) if self.core else None
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
        if status in ("stopped", "diverged"):
            drop_checkpoints(rec.trial_dir)   # its rung closed on it: nothing resumes it

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """Ray will retry the failed trial from its last checkpoint (``max_failures``)."""
        rec = self.trials.get(trial.trial_id)
        if rec is not None:
            rec.restarts += 1

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is None:  # failed before it started
            self.on_trial_start(iteration, trials, trial)
            rec = self.trials[trial.trial_id]
        err = trial.get_error()
        if trial.trial_id in self.zombies:
            self._finish(rec, "zombie", self.zombies[trial.trial_id])
            return
        text = str(err).strip().splitlines()[-1] if err else "trial raised an error"
        self._finish(rec, "failed", text[:2000], ray_error=str(err) if err else None)

    def close(self, status: str, reason: str) -> None:
        """After the run: record every trial Ray ended without telling the callbacks (a
        stopped experiment) as ``status`` with ``reason``."""
        for rec in self.trials.values():
            if rec.status == "running":
                self._finish(rec, status, reason)

    # -- called by the scheduler adapter before it decides ----------------------------------
    def record_report(self, trial: Any, result: dict) -> bool:
        """Record ``result`` once (idempotent on step); returns False for a step already
        recorded (a restarted trial re-reporting steps past its checkpoint). The first report
        after a restart books the recovery: repeated steps and seconds."""
        rec = self.trials[trial.trial_id]
        rec.last_progress = time.monotonic()
        step = int(result["step"])
        node = result.get("node_id")
        if node and node not in rec.nodes:
            rec.nodes.append(str(node))       # the Ray nodes the trial ran on, in order
        if rec.restarting and "restored_step" in result:
            rec.restarting = False
            if rec.restarts > rec.restarts_booked:      # a retry after a failure
                rec.restarts_booked = rec.restarts
                restored = int(result["restored_step"])
                repeated = max(rec.last_step - restored, 0)
                last = rec.reports[-1] if rec.reports else {}
                per_step = float(last.get("productive_s", 0.0)) / max(rec.last_step, 1)
                rec.repeated_steps += repeated
                rec.recovery_s += (float(result.get("setup_s", 0.0))
                                   + float(result.get("restore_s", 0.0)) + repeated * per_step)
        if rec.reports and int(rec.reports[-1]["step"]) >= step:
            return False
        keep = {k: float(result[k]) for k in ("val_loss", "train_loss", "productive_s",
                                               "eval_s", "setup_s", "samples", "n_params",
                                               "replicates", "checkpoint_s", "restored_step", "wall_s",
                                               "checkpoint_bytes", "gpu_util_mean",
                                               "gpu_util_max", "gpu_mem_max_bytes")
                if k in result}
        rec.reports.append({"step": step, **keep})
        self.recorder.trial_reported(rec.trial_id, step, keep, self._next_seq())
        return True

    def record_pause(self, trial: Any) -> None:
        """The trial pauses at a rung: its resources are free until it is promoted."""
        rec = self.trials[trial.trial_id]
        if rec.segment_start is not None:
            rec.held_s += time.monotonic() - rec.segment_start
            rec.segment_start = None

    def record_judgement(self, trial: Any, j: Judgement) -> None:
        """Record one scheduler decision for ``trial``."""
        rec = self.trials[trial.trial_id]
        self.recorder.scheduler_decided(rec.trial_id, j.milestone, j.value, j.cutoff,
                                        j.decision.value, self._next_seq())

    def record_promotion(self, key: str, j: Judgement) -> None:
        """Record the promotion of a dormant trial (paused when a resumed sweep's driver
        died): Ray starts it next, as a new Ray trial with the same key."""
        rec = self.resumed[key]
        self.recorder.scheduler_decided(rec.trial_id, j.milestone, j.value, j.cutoff,
                                        j.decision.value, self._next_seq())
        self.save_state()

    def finish_dormant(self, key: str, j: Judgement) -> None:
        """A dormant paused trial was stopped by the scheduler's ``finish()``: record the
        decision and end the trial (``stopped``), keeping it in the outcome."""
        rec = self.resumed.pop(key)
        self.recorder.scheduler_decided(rec.trial_id, j.milestone, j.value, j.cutoff,
                                        j.decision.value, self._next_seq())
        rec.status = "running"
        reason = f"below the rung cutoff at step {rec.last_step}"
        close_record(rec, "stopped", reason, devices=self.devices, device_kind=self.device_kind)
        self.trials[f"dormant:{key}"] = rec
        self.recorder.trial_finished(rec.trial_id, "stopped", reason, rec.timing)
        self._progress()

    def save_state(self) -> None:
        """Save the core's and the searcher's state as of the last sequence number."""
        if self.core is None or self.proxy_sweep_id is None:
            return
        self.recorder.scheduler_saved(self.proxy_sweep_id, self.core.state_dict(),
                                      self.searcher.state_dict() if self.searcher else None,
                                      self.last_seq)

    def key_of(self, trial: Any) -> str:
        """The core's and searcher's key of a Ray trial."""
        rec = self.trials.get(trial.trial_id)
        if rec is not None:
            return rec.key
        return str(trial.config.get("point", {}).get("key", trial.trial_id))

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
        close_record(rec, status, reason, devices=self.devices, device_kind=self.device_kind)
        self.recorder.trial_finished(rec.trial_id, status, reason, rec.timing)
        log = collect(self.log_dir, rec.key)
        if log is not None or ray_error is not None:
            log = log or {"stdout": "", "stderr": "", "traceback": None}
            # a traceback only for a trial that failed (a stopped trial's thread may be ended
            # by an exception after its last report; that is not the trial's error)
            trace = (log.get("traceback") or ray_error) if status == "failed" else None
            self.recorder.trial_logged(rec.trial_id, log.get("stdout") or "",
                                       log.get("stderr") or "", trace)
        self.save_state()
        self._progress()

    def _progress(self) -> None:
        if self.on_progress is not None:
            done = sum(r.status != "running" for r in self.trials.values())
            self.on_progress(done, len(self.trials))
