"""When a trial writes its periodic checkpoint: every N steps, or ``auto`` — Young's interval
√(2·C·M) from the checkpoint seconds C this trial measured and the mean time between
preemptions M (``cost.spot.mtbp_s``; :func:`mutune.scaling.spot.young_interval_s`).

Both of mutune's loops (:mod:`mutune.search.trial.trainable`, the user-loop runner
:mod:`mutune.search.trial.user_loop`) ask :meth:`Cadence.due` at each evaluation step and
tell :meth:`Cadence.wrote` after every checkpoint they write (periodic, rung, preemption), so
the interval counts from the latest one. Under ``auto`` the first evaluation checkpoints, to
measure C.
"""
from __future__ import annotations

import time
from typing import Any

__all__ = ["Cadence"]


class Cadence:
    """The periodic-checkpoint rule of one trial start.

    Args:
        every: steps between checkpoints (0: none), or ``"auto"``.
        start_step: the step the trial starts from (its last checkpoint's, or 0).
        spot: ``cost.spot`` as a dict (``mtbp_s``, ``checkpoint_min_interval_s``); needed
            for ``auto``.
    Raises:
        ValueError: ``auto`` without ``spot["mtbp_s"]``, or a negative step count.
    """

    def __init__(self, every: int | str | None, *, start_step: int,
                 spot: dict[str, Any] | None = None) -> None:
        self.auto = every == "auto"
        self.every = 0 if self.auto else int(every or 0)
        if self.every < 0:
            raise ValueError(f"checkpoint_every = {every}: must be >= 0 or 'auto'")
        spot = dict(spot or {})
        self.mtbp_s = spot.get("mtbp_s")
        self.min_interval_s = float(spot.get("checkpoint_min_interval_s") or 0.0)
        if self.auto and not self.mtbp_s:
            raise ValueError("checkpoint_every = 'auto' needs cost.spot.mtbp_s")
        self.last_step = int(start_step)
        self.last_t = time.perf_counter()
        self.n, self.seconds = 0, 0.0

    def interval_s(self) -> float | None:
        """Young's interval from the checkpoints measured so far (None: not ``auto``, or
        none written yet)."""
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
        return bool(self.every) and step - self.last_step >= self.every

    def wrote(self, step: int, seconds: float) -> None:
        """A checkpoint of ``step`` was written in ``seconds``."""
        self.last_step, self.last_t = int(step), time.perf_counter()
        self.n += 1
        self.seconds += float(seconds)
