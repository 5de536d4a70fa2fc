"""When a trial checkpoints: every N steps, or ``auto``: Young's √(2·C·M) from its measured C."""
from __future__ import annotations

import time
from typing import Any

__all__ = ["Cadence"]


class Cadence:
    """The periodic-checkpoint rule of one trial start.

    Raises:
        ValueError: ``auto`` without ``spot["mtbp_s"]``, a negative step count, or
            ``max_share`` outside (0, 1]."""

    def __init__(self, every: int | str | None, *, start_step: int,
                 spot: dict[str, Any] | None = None, max_share: float | None = None,
                 final_step: int | None = None) -> None:
        self.auto = every == "auto"
        self.every = 0 if self.auto else int(every or 0)
        if self.every < 0:
            raise ValueError(f"checkpoint_every = {every}: must be >= 0 or 'auto'")
        spot = dict(spot or {})
        self.mtbp_s = spot.get("mtbp_s")
        self.min_interval_s = float(spot.get("checkpoint_min_interval_s") or 0.0)
        if self.auto and not self.mtbp_s:
            raise ValueError("checkpoint_every = 'auto' needs cost.spot.mtbp_s")
        if max_share is not None and not 0.0 < float(max_share) <= 1.0:
            raise ValueError(f"checkpoint max_share = {max_share}: must be in (0, 1]")
        self.max_share = None if max_share is None else float(max_share)
        self.final_step = None if final_step is None else int(final_step)
        self.last_step = int(start_step)
        self.last_t = time.perf_counter()
        self.n, self.seconds = 0, 0.0

    def interval_s(self) -> float | None:
        """Young's interval from the checkpoints measured so far (None: not ``auto``, or none)."""
        if not self.auto or self.n == 0:
            return None
        from mutune.scaling.spot import young_interval_s

        return young_interval_s(max(self.seconds / self.n, 1e-6), float(self.mtbp_s),
                                min_interval_s=self.min_interval_s)

    def due(self, step: int) -> bool:
        """Whether the evaluation at ``step`` writes a periodic checkpoint."""
        if self.auto:
            tau = self.interval_s()
            return tau is None or time.perf_counter() - self.last_t >= tau
        if not self.every or step - self.last_step < self.every:
            return False
        if self.max_share is None:
            return True
        if self.final_step is not None and self.final_step - step < self.every:
            return False        # the final save comes sooner than the next interval
        if self.n == 0:
            return True
        return time.perf_counter() - self.last_t >= self.seconds / self.n / self.max_share

    def wrote(self, step: int, seconds: float) -> None:
        """A checkpoint of ``step`` held the trial for ``seconds`` (write and hand-off to Ray)."""
        self.last_step, self.last_t = int(step), time.perf_counter()
        self.n += 1
        self.seconds += float(seconds)
