"""Hold a trial's reports that no decision waits for, and send them with the next one."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["ReportHold", "HELD_KEY"]

#: the key of a sent report under which the reports held before it travel (oldest first)
HELD_KEY = "held_reports"


class ReportHold:
    """Decides which of one trial's reports wait for the next one.

    Raises:
        ValueError: ``hold_s`` negative or not finite."""

    def __init__(self, decide_at: Iterable[int], hold_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(hold_s) and hold_s >= 0):
            raise ValueError(f"hold_s = {hold_s!r}: must be a finite number of seconds >= 0")
        self.decide_at = frozenset(int(s) for s in decide_at)
        self.hold_s = float(hold_s)
        self._clock = clock
        self._held: list[dict[str, Any]] = []
        self._since = clock()        # when the last report was sent (or the trial began)
        self._last_step = -1         # the step of the last report seen (held or sent)

    @property
    def held(self) -> list[dict[str, Any]]:
        """The reports waiting, oldest first (a copy)."""
        return list(self._held)

    def hold(self, metrics: dict[str, Any], checkpointed: bool) -> bool:
        """Whether to keep ``metrics`` for the next report (False: send via :meth:`sending`)."""
        step, prev = int(metrics["step"]), self._last_step
        self._last_step = step
        if (self.hold_s <= 0 or checkpointed or prev < 0
                or any(prev < m <= step for m in self.decide_at)
                or metrics.get("preempted")
                or not all(math.isfinite(v) for v in metrics.values()
                           if isinstance(v, float))
                or self._clock() - self._since >= self.hold_s):
            return False
        self._held.append(metrics)
        return True

    def sending(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """``metrics`` with the held reports under :data:`HELD_KEY`; the hold empties."""
        if self._held:
            metrics[HELD_KEY] = self._held
            self._held = []
        self._since = self._clock()
        return metrics

    def flush(self) -> dict[str, Any] | None:
        """The newest held report with the others, for a trial ending unreported, or None."""
        if not self._held:
            return None
        *older, last = self._held
        self._held = older
        return self.sending(last)
