"""The driver-side book of one Ray Tune run: trial lifecycle → the recorder.

A :class:`SweepBook` is a Ray Tune callback living in the driver process (never pickled into
workers). It gives each Ray trial a database id when Ray grants it resources, records every
report and scheduler decision with a sweep-wide sequence number as they happen (the scheduler
adapter hands them over before it answers Ray), beats for every running trial, and on release
records the trial's terminal status — as the :class:`~mutune.search.driver.SweepDriver`
decided it, or as Ray ended it (an error, a zombie, a cancelled run) — with its timing
(:mod:`mutune.search.backends.trial_record`) and what it wrote (:mod:`mutune.search.trial.logs`).
The book records; :class:`~.control.RunControl` controls (requeue, zombies, checkpoint removal).
"""
from __future__ import annotations

import itertools
import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune import Callback

from mutune.search.backends.trial_record import TrialRecord, close_record
from mutune.search.recording import SweepControl, TrialRecorder
from mutune.search.schedulers.contract import Judgement
from mutune.search.trial.logs import collect
from mutune.search.trial.report_hold import HELD_KEY

__all__ = ["SweepBook", "BookSpec", "KEPT_METRICS"]

#: Report keys the book keeps (and records) besides ``step`` (and the keys a training-loop
#: plugin reported, listed in the report's ``loop_keys``).
KEPT_METRICS = ("val_loss", "val_loss_se", "test_loss", "test_loss_se", "train_loss",
                "productive_s", "eval_s", "setup_s", "samples", "n_params", "replicates",
                "checkpoint_s", "checkpoints", "restored_step", "restore_s", "wall_s",
                "checkpoint_bytes", "gpu_util_mean", "gpu_util_max", "gpu_mem_max_bytes",
                "upload_s", "uploads", "remote_step", "remote_restore_s", "worker_pid",
                "began_at")


@dataclass(frozen=True)
class BookSpec:
    """What a book records one run's trials as (a group's own width, proxy sweep and kind
    override these: :attr:`SweepBook.groups`, :attr:`SweepBook.kinds`)."""
    sweep_id: int
    proxy_sweep_id: int | None        # None: the target run
    kind: str                         # proxy, confirm or target
    width: int
    max_t: int                        # steps a completed trial reaches
    devices: float                    # granted per trial
    device_kind: str                  # e.g. cpu
    metric: str = "val_loss"          # the ranked metric, kept in every report
    heartbeat_s: float = 10.0         # beat for every running trial at most this often
    log_dir: str | None = None        # trials' stdout/stderr/traceback, recorded at their end


class SweepBook(Callback):
    """Records one Ray Tune run (every proxy width's sweep, a confirmation stage, or the
    target run).

    Args:
        recorder: where trial rows go (the results store, or a MemoryRecorder in tests).
        spec: what the run's trials are recorded as.
        seq: a shared counter ordering reports and decisions across the whole sweep.
        control: heartbeats go here (usually the same store).
        driver: the run's :class:`~mutune.search.driver.SweepDriver` (it decided how each
            trial ended; the book tells it how Ray ended the others).
        on_progress: called with (trials finished, trials started) after each change.
        on_started: called with the recorder's trial id right after a trial is recorded.
        resumed: trials of an interrupted run to continue, by key: they keep their row.

    Trials are identified by ``point["key"]``, the driver's key: a resumed sweep continues a
    trial under a new Ray trial id and the same key. A run of several groups (widths) sets
    :attr:`groups`: group → (width, proxy sweep id, on_progress).
    """

    def __init__(self, recorder: TrialRecorder, spec: BookSpec, *, seq: itertools.count,
                 control: SweepControl | None = None, driver: Any = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_started: Callable[[int], None] | None = None,
                 resumed: dict[str, TrialRecord] | None = None) -> None:
        self.recorder, self.control = recorder, control
        self.sweep_id, self.proxy_sweep_id = spec.sweep_id, spec.proxy_sweep_id
        self.kind, self.width, self.max_t = spec.kind, spec.width, spec.max_t
        self.devices, self.device_kind = spec.devices, spec.device_kind
        self.seq, self.driver, self.metric = seq, driver, spec.metric
        self.on_progress, self.on_started = on_progress, on_started
        self.heartbeat_s, self.log_dir = spec.heartbeat_s, spec.log_dir
        self.resumed = dict(resumed or {})
        self.trials: dict[str, TrialRecord] = {}
        #: the run's remote store (``ray.storage``): trial logs written on another node
        self.remote: Any = None
        #: Ray trial id → why control killed it (:class:`~.control.RunControl`)
        self.killed: dict[str, str] = {}
        self.last_seq = 0
        self._last_beat = time.monotonic()
        self.groups: dict[str, tuple[int, int | None, Any]] = {}
        #: group → the kind its trials are recorded as, where it differs from :attr:`kind`
        self.kinds: dict[str, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Ray Tune pickles its run config (callbacks, scheduler) into its experiment snapshot
        # in the driver. The copy keeps the trial records but no live recorder, counter,
        # driver or callbacks: mutune resumes from its own database, never from that snapshot.
        state = dict(self.__dict__)
        state.update(recorder=None, control=None, seq=None, on_progress=None,
                     on_started=None, driver=None, groups={}, kinds={}, killed={})
        return state

    def _next_seq(self) -> int:
        self.last_seq = next(self.seq)
        return self.last_seq

    def group_of(self, key: str) -> str | None:
        """The driver group of trial ``key`` (None without a driver)."""
        if self.driver is None:
            return None
        t = self.driver.trials.get(key)
        return t.group if t is not None else self.driver.given[0]

    def core_of(self, key: str) -> Any:
        """The scheduler core of trial ``key``'s group (None: the target run)."""
        g = self.group_of(key)
        return self.driver.groups[g].core if g is not None else None

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
        if old is not None:   # a trial of an interrupted run, or a preempted one, continues
            old.status, old.segment_start, old.restarting = "running", now, True
            if old.requeued:            # a preemption: counted apart from failures
                old.requeued = False
            else:
                old.restarts += 1
            reason = old.reason or "resumed"
            self.trials[trial.trial_id] = old
            self.recorder.trial_resumed(old.trial_id, reason)
            rec_id = old.trial_id
        else:
            group = self.group_of(key) or ""
            width, ps_id, _ = self.groups.get(group, (self.width, self.proxy_sweep_id, None))
            rec_id = self.recorder.trial_started(self.sweep_id, ps_id,
                                                 self.kinds.get(group, self.kind), key,
                                                 width, point["hparams"], int(point["seed"]))
            self.trials[trial.trial_id] = TrialRecord(key, rec_id, point, now,
                                                      segment_start=now)
        if getattr(trial, "path", None):
            self.recorder.trial_checkpoint_dir(rec_id, str(trial.path))
            self.trials[trial.trial_id].trial_dir = str(trial.path)
        if self.on_started is not None:
            self.on_started(rec_id)
        self._progress()

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        if trial.trial_id in self.trials:       # idempotent: the adapter recorded them
            for held in result.get(HELD_KEY) or ():      # (a stopper's stop skips it)
                self.record_report(trial, held)
            self.record_report(trial, result)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """Heartbeats: every ``heartbeat_s`` the driver beats for each trial holding
        resources (a paused trial holds none and is not beaten)."""
        now = time.monotonic()
        if self.control is None or now - self._last_beat < self.heartbeat_s:
            return
        self._last_beat = now
        for rec in self.trials.values():
            if rec.status == "running" and rec.segment_start is not None:
                self.control.heartbeat(rec.trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        rec = self.trials.get(trial.trial_id)
        if rec is None:   # removed before it started: nothing ran, nothing to record
            return
        decided = self.driver.status(rec.key) if self.driver else None
        if decided is None and rec.preempt_pending is not None and self.driver is not None:
            return    # RunControl retries it from its checkpoint, or ends it (ended_early)
        if decided is None:
            self.ended_early(trial)
        else:
            self._finish(rec, *decided)

    def ended_early(self, trial: Any) -> None:
        """Ray ended ``trial`` without a decision of the driver (its loop returned early)."""
        rec = self.trials[trial.trial_id]
        reason = f"ended at step {rec.last_step} < max_t {self.max_t}"
        if self.driver:
            self.driver.ended(rec.key, "failed", reason)
        self._finish(rec, "failed", reason)

    def requeued(self, trial: Any, reason: str) -> None:
        """Control handed ``trial`` back to the driver: its record waits, resources free,
        for the retry that continues it under its key and row."""
        rec = self.trials.pop(trial.trial_id)
        rec.requeued, rec.reason = True, reason
        if rec.segment_start is not None:
            rec.held_s += time.monotonic() - rec.segment_start
            rec.segment_start = None
        self.resumed[rec.key] = rec
        self._progress()

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
        if trial.trial_id in self.killed:
            status, reason, ray_error = "zombie", self.killed[trial.trial_id], None
        else:
            text = str(err).strip().splitlines()[-1] if err else "trial raised an error"
            status, reason, ray_error = "failed", text[:2000], str(err) if err else None
        if self.driver:
            self.driver.ended(rec.key, status, reason)
        self._finish(rec, status, reason, ray_error=ray_error)

    def close(self, status: str, reason: str) -> None:
        """After the run: record every trial Ray ended without telling the callbacks (a
        stopped experiment) as ``status`` (``cancelled``) with ``reason``."""
        for rec in self.trials.values():
            if rec.status == "running":
                if self.driver:
                    self.driver.ended(rec.key, status, reason)
                self._finish(rec, status, reason)

    # -- called by the scheduler adapter before it answers Ray ------------------------------
    def record_report(self, trial: Any, result: dict) -> bool:
        """Record ``result`` once (idempotent on step); returns False for a step already
        recorded (a restarted trial re-reporting steps past its checkpoint). The first report
        after a restart books the recovery: repeated steps and seconds."""
        rec = self.trials[trial.trial_id]
        rec.last_progress = time.monotonic()
        step = int(result["step"])
        if "upload_s" in result:     # cumulative within a start; summed over starts
            rec.upload_s_by_start[float(result.get("start_wall", 0.0))] = float(
                result["upload_s"])
        if result.get("preempted"):
            rec.preempt_pending = step
            if not result.get("at_eval"):
                # a report only the preemption made: its checkpoint is kept, its figures are
                # not (the retried trial reports exactly what an uninterrupted one would)
                return False
        node = result.get("node_id")
        if node and node not in rec.nodes:
            rec.nodes.append(str(node))       # the Ray nodes the trial ran on, in order
        if rec.restarting and "restored_step" in result:
            rec.restarting = False
            if rec.restarts + rec.preemptions > rec.restarts_booked:   # a retry
                rec.restarts_booked = rec.restarts + rec.preemptions
                restored = int(result["restored_step"])
                repeated = max(rec.last_step - restored, 0)
                last = rec.reports[-1] if rec.reports else {}
                per_step = float(last.get("productive_s", 0.0)) / max(rec.last_step, 1)
                rec.repeated_steps += repeated
                rec.recovery_s += (float(result.get("setup_s", 0.0))
                                   + float(result.get("restore_s", 0.0))
                                   + float(result.get("remote_restore_s", 0.0))
                                   + repeated * per_step)
        if rec.reports and int(rec.reports[-1]["step"]) >= step:
            return False
        if self.driver is not None and self.driver.status(rec.key) is not None:
            return False    # reported past the report the driver ended it at (a held one)
        # a training-loop plugin's own numeric keys travel named in ``loop_keys``
        own = tuple(result.get("loop_keys") or ())
        keep = {k: float(result[k]) for k in (self.metric, *KEPT_METRICS, *own)
                if k in result and isinstance(result[k], numbers.Real)
                and not isinstance(result[k], bool)}
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
        self._decided(self.trials[trial.trial_id].trial_id, j)

    def _decided(self, trial_id: int, j: Judgement) -> None:
        self.recorder.scheduler_decided(trial_id, j.milestone, j.value, j.cutoff,
                                        j.decision.value, self._next_seq())

    def record_promotion(self, key: str, j: Judgement) -> None:
        """Record the promotion of a dormant trial (paused when an earlier driver died): Ray
        starts it next, as a new Ray trial with the same key."""
        self._decided(self.resumed[key].trial_id, j)
        self.save_state(key)

    def finish_dormant(self, key: str, j: Judgement) -> None:
        """A dormant paused trial was stopped by the scheduler's ``finish()``: record the
        decision and end the trial as the driver did, keeping it in the outcome."""
        rec = self.resumed.pop(key)
        self._decided(rec.trial_id, j)
        rec.status = "running"
        status, reason = self.driver.status(key) or ("stopped", None)
        close_record(rec, status, reason, devices=self.devices, device_kind=self.device_kind)
        self.trials[f"dormant:{key}"] = rec
        self.recorder.trial_finished(rec.trial_id, status, reason, rec.timing)
        self._progress()

    def save_state(self, key: str | None = None) -> None:
        """Save the scheduler core's and the searcher's state as of the last sequence number
        on the proxy sweep row: of trial ``key``'s group, or of every group (None)."""
        if self.driver is None:
            return
        for g in [self.group_of(key)] if key is not None else self.driver.order:
            core, searcher = self.driver.groups[g].core, self.driver.groups[g].searcher
            ps_id = self.groups.get(g, (None, self.proxy_sweep_id, None))[1]
            if core is not None and ps_id is not None:
                self.recorder.scheduler_saved(ps_id, core.state_dict(),
                                              searcher.state_dict(), self.last_seq)

    def key_of(self, trial: Any) -> str:
        """The driver's key of a Ray trial."""
        rec = self.trials.get(trial.trial_id)
        if rec is not None:
            return rec.key
        return str(trial.config.get("point", {}).get("key", trial.trial_id))

    def next_milestone(self, rec: TrialRecord) -> int:
        """The next step at which trial ``rec`` will be judged (its bracket's rungs), or max_t
        when no rung is left (or there is no scheduler). Assigns no Hyperband bracket."""
        core = self.core_of(rec.key)
        return self.max_t if core is None else core.next_milestone(rec.key, rec.last_step)

    # -- helpers -----------------------------------------------------------------------------
    def _finish(self, rec: TrialRecord, status: str, reason: str | None,
                ray_error: str | None = None) -> None:
        if rec.status != "running":
            return
        close_record(rec, status, reason, devices=self.devices, device_kind=self.device_kind)
        self.recorder.trial_finished(rec.trial_id, status, reason, rec.timing)
        log = collect(self.log_dir, rec.key, self.remote)
        if log is not None or ray_error is not None:
            log = log or {"stdout": "", "stderr": "", "traceback": None}
            # a traceback only for a trial that failed (a stopped trial's thread may be ended
            # by an exception after its last report; that is not the trial's error)
            trace = (log.get("traceback") or ray_error) if status == "failed" else None
            self.recorder.trial_logged(rec.trial_id, log.get("stdout") or "",
                                       log.get("stderr") or "", trace)
        self.save_state(rec.key)
        self._progress()

    def _progress(self) -> None:
        for g, (_, _, cb) in (self.groups or {None: (0, 0, self.on_progress)}).items():
            if cb is not None:
                mine = [r for r in self.trials.values()
                        if g is None or self.group_of(r.key) == g]
                cb(sum(r.status != "running" for r in mine), len(mine))
