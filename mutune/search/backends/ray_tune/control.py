"""The driver-side control of one Ray Tune run: what the book only records.

:class:`RunControl` is a Ray Tune callback registered after the
:class:`~.callback.SweepBook`: it kills zombie trials (:mod:`.zombies`), hands a preempted
trial back to the :class:`~mutune.search.driver.SweepDriver` to start again from its checkpoint,
and deletes the checkpoints of trials nothing will resume (:mod:`.retention`).
"""
from __future__ import annotations

import time
from typing import Any

from ray.tune import Callback

from mutune.search.backends.ray_tune.callback import SweepBook
from mutune.search.backends.ray_tune.retention import drop_checkpoints
from mutune.search.backends.ray_tune.zombies import ZombieReaper
from mutune.search.backends.trial_record import TrialRecord

__all__ = ["RunControl"]


class RunControl(Callback):
    """Requeues preempted trials, reaps zombies and drops dead checkpoints of one run.

    Args:
        book: the run's book (its trial records; it is told what control did).
        reaper: kills trials quiet for too long (None: zombies are not reaped).
    """

    def __init__(self, book: SweepBook, reaper: ZombieReaper | None = None) -> None:
        self.book, self.reaper = book, reaper
        if reaper is not None:
            book.killed = reaper.flagged

    def __getstate__(self) -> dict[str, Any]:
        # pickled into Ray Tune's experiment snapshot: no live book (see SweepBook)
        return {"book": None, "reaper": None}

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if self.reaper is not None:
            self.reaper.reap(trials, self.book.trials, time.monotonic())

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        book = self.book
        rec = book.trials.get(trial.trial_id)
        driver = book.driver
        if rec is None or driver is None:
            return
        decided = driver.status(rec.key)
        if decided is None and rec.preempt_pending is not None:
            if not self._requeue(trial, rec):
                book.ended_early(trial)
        elif decided is not None and decided[0] in ("stopped", "diverged"):
            drop_checkpoints(rec.trial_dir)   # its rung closed on it: nothing resumes it
            if book.remote is not None:
                book.remote.drop(rec.key)

    def _requeue(self, trial: Any, rec: TrialRecord) -> bool:
        """Hand a preempted trial (its loop checkpointed and returned) back to the driver,
        which starts it again first in line from that checkpoint, under the same key and
        database row; no failure is counted. False when neither Ray nor the remote store
        (``ray.storage``) holds a checkpoint of it."""
        from mutune.search.trial.remote_trial import CONTINUE

        book = self.book
        path = getattr(getattr(trial, "checkpoint", None), "path", None)
        if book.remote is not None and path is None:
            path = CONTINUE if book.remote.latest(rec.key) is not None else None
        if path is None:
            return False
        step, rec.preempt_pending = rec.preempt_pending, None
        rec.preemptions += 1
        book.requeued(trial, f"preempted at step {step}: retried from its checkpoint")
        book.driver.requeue(rec.key, {**rec.point, "restore_from": str(path)})
        return True
