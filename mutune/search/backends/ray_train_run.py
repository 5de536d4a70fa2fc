"""The driver's side of the target's Ray Train run (:func:`run_target`; the workers' side is
:mod:`.ray_train`): the ``TorchTrainer`` fits, the queue of reports drained into the book while
each fit runs in a thread, stop requests and heartbeats, a preempted fit followed by the next,
and the status the run ends with."""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from mutune.errors import SearchError
from mutune.search.backends.base import RunSettings
from mutune.search.backends.groups import GroupSpec, RunOutcome

__all__ = ["run_target", "check_workers", "TargetFit"]


def run_target(spec: GroupSpec, settings: RunSettings, num_workers: int) -> RunOutcome:
    """Train the target on ``num_workers`` Ray Train workers and record it like a trial.

    Raises:
        SearchError: num_workers < 1, or the cluster cannot hold that many workers."""
    done = list(spec.resume.finished) if spec.resume else []
    point = (spec.points[0] if spec.points else
             spec.resume.points[0] if spec.resume and spec.resume.points else None)
    if point is None:
        return RunOutcome(done, None)
    check_workers(settings.ray_cfg, num_workers)
    fit = TargetFit(spec, settings, num_workers, point)
    status = fit.run()
    return RunOutcome(done + [fit.rec], None, None,
                      fit.stopped if status == "cancelled" else None)


def check_workers(ray_cfg: Any, num_workers: int) -> None:
    """Raises SearchError when ``num_workers`` is not an int >= 1 or the cluster cannot
    hold that many workers of one trial's resources."""
    from mutune.search.backends.ray_tune.cluster import shortfall

    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise SearchError(f"target.num_workers = {num_workers!r}: must be an int >= 1")
    short = shortfall(ray_cfg.cpus_per_trial * num_workers,
                      ray_cfg.gpus_per_trial * num_workers)
    if short is not None:
        kind, need, have = short
        raise SearchError(f"the target's {num_workers} workers need {need:g} {kind}s; the "
                          f"Ray cluster has {have:g}: lower target.num_workers")


class TargetFit:
    """One target run on Ray Train, recorded by a :class:`~.ray_tune.callback.SweepBook`."""

    def __init__(self, spec: GroupSpec, settings: RunSettings, num_workers: int,
                 point: dict[str, Any]) -> None:
        from ray.util.queue import Queue

        from mutune.search.backends.ray_train_relay import RunHandle, stop_flag
        from mutune.search.backends.ray_tune.callback import BookSpec, SweepBook
        from mutune.search.trial.remote_trial import remote_store

        self.settings, self.num_workers = settings, num_workers
        ray_cfg, name = settings.ray_cfg, settings.name
        storage = Path(settings.storage).resolve()
        self.control = settings.controller
        book_spec = BookSpec(
            sweep_id=settings.sweep_id, proxy_sweep_id=None, kind="target", width=spec.width,
            max_t=settings.max_t,
            devices=(ray_cfg.gpus_per_trial or ray_cfg.cpus_per_trial) * num_workers,
            device_kind=ray_cfg.priced_kind or "cuda", metric=settings.metric,
            heartbeat_s=ray_cfg.heartbeat_s, log_dir=str(storage / "trial_logs" / name))
        self.book = SweepBook(settings.recorder, book_spec, seq=settings.seq,
                              control=self.control, on_progress=spec.on_progress,
                              on_started=settings.on_started,
                              resumed=spec.resume.records if spec.resume else None)
        self.handle = RunHandle(trial_id=name, config={"point": point},
                                path=str(storage / name))
        self.queue, self.stop = Queue(), stop_flag()
        self.loop_config = self._loop_config(spec, point)
        self.book.on_trial_start(0, [], self.handle)
        self.rec = self.book.trials[self.handle.trial_id]
        self.book.remote = remote_store(ray_cfg, name)
        self.ended: str | None = None
        self.stopped: str | None = None
        self._last_beat = time.monotonic()

    def _loop_config(self, spec: GroupSpec, point: dict[str, Any]) -> dict[str, Any]:
        """What every worker's loop receives (:func:`~.ray_train.train_worker`)."""
        from mutune.search.trial.remote_trial import remote_settings

        s, ck = self.settings, self.settings.checkpoints
        ray_cfg = s.ray_cfg
        return {"task": s.task, "stop_flag": self.stop, "point": point, "width": spec.width,
                "max_t": s.max_t, "threads": max(int(ray_cfg.cpus_per_trial), 1),
                "gpus": ray_cfg.gpus_per_trial, "checkpoint_every": int(ck.every),
                "keep_final": ck.keep_final, "checkpoint_max_share": ck.max_share,
                "metric": s.metric, "preemption": ray_cfg.preemption.model_dump(),
                "remote": remote_settings(ray_cfg, s.name, None),
                "owner": uuid.uuid4().hex,
                "diverge_above": {int(k): float(v)
                                  for k, v in (spec.diverge_above or {}).items()}}

    def _trainer(self) -> Any:
        from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer

        from mutune.search.backends.ray_train import train_worker
        from mutune.search.backends.ray_train_relay import preemptible_torch_config, relay

        s = self.settings
        gpus, cpus = s.ray_cfg.gpus_per_trial, s.ray_cfg.cpus_per_trial
        return TorchTrainer(
            train_worker, train_loop_config=self.loop_config,
            torch_config=preemptible_torch_config("nccl" if gpus else "gloo"),
            scaling_config=ScalingConfig(
                num_workers=self.num_workers, use_gpu=bool(gpus),
                resources_per_worker={"CPU": cpus, **({"GPU": gpus} if gpus else {})}),
            run_config=RunConfig(
                name=s.name, storage_path=str(Path(s.storage).resolve()),
                failure_config=FailureConfig(max_failures=s.ray_cfg.max_failures),
                checkpoint_config=CheckpointConfig(num_to_keep=max(s.checkpoints.keep, 1)),
                callbacks=[relay(self.queue)]))

    def run(self) -> str:
        """Fit until the run ends (a preempted fit is followed by the next: same name and
        storage, so it continues from the preemption's checkpoint with a fresh failure
        budget); record its end. Returns its status."""
        import ray

        from mutune.search.backends.ray_tune.retention import checkpoint_bytes_on_disk

        while True:
            outcome = self._fit_once()
            failed = outcome.get("error") or getattr(outcome.get("result"), "error", None)
            if self.ended != "preempted" or failed is not None or self.stopped is not None:
                break
            self._preempted()
        status, reason = self._status(failed)
        self.book.close(status, reason)
        ray.kill(self.stop)
        self.rec.timing["checkpoint_bytes_kept"] = float(
            checkpoint_bytes_on_disk(self.rec.trial_dir))
        return status

    def _fit_once(self) -> dict[str, Any]:
        """One ``fit()`` in a thread while the driver drains its reports; result or error."""
        outcome: dict[str, Any] = {}
        self.ended = None
        trainer = self._trainer()

        def fit() -> None:
            try:
                outcome["result"] = trainer.fit()
            except Exception as exc:  # noqa: BLE001 - any failure of the run is recorded
                outcome["error"] = exc

        thread = threading.Thread(target=fit, name=f"mutune-{self.settings.name}",
                                  daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                self._drain(0.5)
                self._watch()
        except BaseException:
            # the driver cannot record any more (its database, an interrupt): the workers
            # stop at their next evaluation instead of training on unrecorded; what they
            # checkpointed stays for `mutune resume`
            self.stop.set.remote()
            thread.join(timeout=120)
            raise
        thread.join()
        while not self.queue.empty():
            self._drain(0.1)
        return outcome

    def _watch(self) -> None:
        """Answer a stop request; send the heartbeat when it is due."""
        control, s = self.control, self.settings
        if control is None:
            return
        if self.stopped is None and control.stop_requested(s.sweep_id):
            self.stopped = "cancel requested"
            self.stop.set.remote()
        if time.monotonic() - self._last_beat >= s.ray_cfg.heartbeat_s:
            control.heartbeat(self.rec.trial_id)
            self._last_beat = time.monotonic()

    def _drain(self, timeout: float) -> None:
        from ray.util.queue import Empty

        try:
            item = self.queue.get(timeout=timeout)
        except Empty:
            return
        if "failure" in item:                 # Ray Train restarts the group from a checkpoint
            self.rec.restarts += 1
            self.rec.restarting = True
            return
        m = item["metrics"]
        if "ended" in m:
            self.ended = str(m["ended"])
        elif "step" in m:
            self.book.record_report(self.handle, m)

    def _preempted(self) -> None:
        rec = self.rec
        step = rec.preempt_pending if rec.preempt_pending is not None else rec.last_step
        rec.preemptions += 1              # not a failure: Ray Train's budget is untouched
        rec.preempt_pending, rec.restarting = None, True
        rec.reason = f"preempted at step {step}: the worker group restarts from its checkpoint"

    def _status(self, err: Any) -> tuple[str, str | None]:
        max_t, last, ended = self.settings.max_t, self.rec.last_step, self.ended
        if err is not None:
            self.handle.error = str(err)
            return "failed", (str(err).strip().splitlines() or ["failed"])[-1][:2000]
        if ended == "diverged":
            return "diverged", f"diverged at step {last}"
        if ended == "cancelled" or self.stopped is not None:
            return "cancelled", self.stopped or "cancelled"
        if ended == "completed" and last == max_t:
            return "completed", None
        return "failed", f"ended ({ended}) at step {last} < max_t {max_t}"
