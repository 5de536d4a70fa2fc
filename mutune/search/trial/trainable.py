"""The Ray Tune function trainable every trial runs (proxies and the target alike).

:func:`train_trial` wraps :func:`mutune.training.run.run_loop` (which trains the trial, with
mutune's loop or a ``train.loop`` plugin, and knows nothing of Ray; it is used through
``tune.with_parameters`` so the dataset travels once through Ray's object store): reports go to
``ray.tune.report`` with a ``Checkpoint.from_directory`` when one was written, and a restarted
trial (``max_failures`` retry, or a promoted paused trial) resumes from
``ray.tune.get_checkpoint()``. Besides the loop's figures (:mod:`mutune.training.run`) each
report holds:

    node_id       the Ray node the trial runs on
    worker_pid, began_at  the worker process and when (epoch seconds) the trial function
                  began on it (the trials one actor ran, in order)
    held_reports  the reports held back before this one, oldest first
                  (:mod:`mutune.search.trial.report_hold`; ``decide_at`` and
                  ``report_hold_s`` in the config)

Preemption: SIGTERM reaches the loop through the handler
:class:`~mutune.search.trial.preemption.PreemptibleTrainable` installs in the actor's main
thread; a preempted trial returns normally after its checkpointed report and the driver
retries it from that checkpoint before any new trial
(:meth:`mutune.search.backends.ray_tune.callback.SweepBook.on_trial_complete`).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mutune.training.run import run_loop

__all__ = ["train_trial"]

def train_trial(config: dict[str, Any], *, task: Any) -> None:
    """Ray Tune function trainable: :func:`~mutune.training.run.run_loop` with reports to
    ``tune.report``,
    checkpoints as ``ray.tune.Checkpoint`` folders, and resume from ``tune.get_checkpoint()``
    (a retry or a promotion) or, for a trial of an interrupted sweep continued by
    ``mutune resume``, from ``point["restore_from"]``.

    What the trial prints and the traceback of an error go to ``config["log_dir"]`` for the
    driver to record (:mod:`mutune.search.trial.logs`).

    Args:
        config: as :func:`~mutune.training.run.run_loop`.
        task: a :class:`mutune.proxies.task.ProxyTask`.
    A preempted trial returns normally after its checkpointed report (the driver retries
    it; see the module docstring).

    Raises:
        ProxyError: the model cannot be built (reported by Ray as a failed trial).
    """
    from ray import tune

    import ray

    from mutune.search.trial.logs import capture
    from mutune.search.trial.remote_trial import RemoteTier, restore_dir_for
    from mutune.search.trial.report_hold import ReportHold

    began_at = time.time()      # the function's start on its worker (epoch seconds)
    node = ray.get_runtime_context().get_node_id()
    ray_id = str(tune.get_context().get_trial_id() or "")
    key = str(config["point"].get("key") or ray_id or "trial")
    remote = RemoteTier.for_trial(config, key, ray_id)
    # reports no decision waits for travel with the next one (report_hold.py)
    hold = ReportHold(config.get("decide_at") or (), float(config.get("report_hold_s") or 0))

    def report(metrics: dict[str, Any], folder: Path | None) -> None:
        metrics["node_id"] = node
        metrics["worker_pid"], metrics["began_at"] = os.getpid(), began_at
        if remote is not None:      # background upload; Ray keeps only the final one
            remote.checkpointed(metrics, folder)
            folder = remote.for_ray(folder, int(metrics["step"]))
        if not hold.hold(metrics, folder is not None):
            send(hold.sending(metrics), folder)

    def send(metrics: dict[str, Any], folder: Path | None = None) -> None:
        log.save()   # before the report: a trial stopped at this report has its output
        tune.report(metrics, checkpoint=None if folder is None
                    else tune.Checkpoint.from_directory(str(folder)))

    with capture(config.get("log_dir"), key,
                 upload=remote.upload_log if remote is not None else None) as log, \
            tempfile.TemporaryDirectory(prefix="mutune-ckpt-") as tmp, \
            contextlib.ExitStack() as stack:
        root = str(remote.cache_dir) if remote is not None else tmp
        restore_dir = restore_dir_for(tune.get_checkpoint(), config["point"], remote, tmp, stack)
        try:
            # without the remote tier the folders are scratch copies of what Ray keeps
            status = run_loop(config, task, report=report, restore_dir=restore_dir,
                                  checkpoint_root=root, scratch_checkpoints=remote is None)
        except BaseException as exc:
            if remote is not None:      # a retry here may restore from the cache
                remote.close(finished=False)
            if isinstance(exc, Exception) and hold.held:   # what it held is recorded first
                send(hold.flush())
            raise
        if hold.held:    # a loop that returned between decisions (a plugin's early end)
            send(hold.flush())
        if remote is not None:   # no rung pauses it (stopping variant), or it reached max_t
            remote.close(finished=status == "completed" or not remote.stop_at)
    del status      # how it ended is in its reports (a preemption's carries preempted = 1)
