"""Stopping a whole Ray Tune run from outside: ``mutune cancel`` (and a cancelled server sweep)."""
from __future__ import annotations

import time
from typing import Any

from ray.tune import Stopper

from mutune.search.recording import SweepControl

__all__ = ["CancelStopper"]


class CancelStopper(Stopper):
    """Stop the Ray Tune run once ``control.stop_requested(sweep_id)`` returns a reason."""

    def __init__(self, control: SweepControl | None, sweep_id: int, poll_s: float = 1.0) -> None:
        self.control, self.sweep_id, self.poll_s = control, sweep_id, poll_s
        self.reason: str | None = None
        self._last = float("-inf")

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its run config into the experiment snapshot: no live controller there.
        return {**self.__dict__, "control": None}

    def check(self) -> str | None:
        """Poll now (rate-limited) and return the reason to stop, if any."""
        if self.reason is None and self.control is not None:
            now = time.monotonic()
            if now - self._last >= self.poll_s:
                self._last = now
                self.reason = self.control.stop_requested(self.sweep_id)
        return self.reason

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.check() is not None
