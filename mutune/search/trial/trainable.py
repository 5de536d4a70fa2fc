"""The Ray Tune function trainable every trial runs (proxies and the target alike)."""
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
    """Ray Tune function trainable around :func:`~mutune.training.run.run_loop`.

    Raises:
        ProxyError: the model cannot be built (reported by Ray as a failed trial)."""
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
