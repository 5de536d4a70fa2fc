"""Stopping a whole sweep from outside: ``mutune cancel`` (and the budget) through Ray Tune.

:class:`SweepStopper` is a Ray Tune ``Stopper`` living in the driver. Ray asks ``stop_all()``
after every trial event; the stopper asks the recorder (``Recorder.stop_requested``: one
indexed read of the results database) at most every ``poll_s`` seconds. Once it says why, Tune
stops every running trial and starts no other; the :class:`~mutune.search.backends.ray_tune.callback.SweepBook` then
records the trials Tune ended without a result as ``cancelled`` with that reason.
"""
from __future__ import annotations

import time
from typing import Any

from ray.tune import Stopper

__all__ = ["SweepStopper"]


class SweepStopper(Stopper):
    """Stop the Ray Tune run once ``recorder.stop_requested(sweep_id)`` returns a reason.

    Args:
        recorder: a :class:`~mutune.recording.Recorder` (polled in the driver only).
        sweep_id: the sweep it polls.
        poll_s: seconds between two polls (the database is not asked on every event).
    Attributes:
        reason: why the run was stopped, None while it runs.
    """

    def __init__(self, recorder: Any, sweep_id: int, poll_s: float = 1.0) -> None:
        self.recorder, self.sweep_id, self.poll_s = recorder, sweep_id, poll_s
        self.reason: str | None = None
        self._last = float("-inf")

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its run config into the experiment snapshot: no live recorder there.
        return {**self.__dict__, "recorder": None}

    def check(self) -> str | None:
        """Poll now (rate-limited) and return the reason to stop, if any."""
        if self.reason is None and self.recorder is not None:
            now = time.monotonic()
            if now - self._last >= self.poll_s:
                self._last = now
                self.reason = self.recorder.stop_requested(self.sweep_id)
        return self.reason

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.check() is not None
