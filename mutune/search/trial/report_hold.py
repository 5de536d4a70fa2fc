"""Hold a trial's reports that no decision waits for, and send them with the next one.

Ray Tune runs a function trainable's reports synchronously: after ``tune.report`` the trial
waits until the driver has taken the report, recorded it and asked for the next one. On the
quickstart's proxies (200 steps in well under a second, an evaluation every 10 steps) that
wait is several times the evaluation's own bookkeeping and a third of the trials' allocated
seconds (benchmarks/results/README.md, measured from the reports' clocks).

:class:`ReportHold` lets a trial keep training past a report that nothing can act on. A
report is held when all of these are true:

- it has no checkpoint;
- it is not the first report of this start of the trial (the driver's zombie clock,
  ``ray.zombie_timeout_s``, starts at that report);
- it is not the trial's first report at or past one of its ``decide_at`` steps (its
  scheduler's rung milestones, since a rung judges the first report at or past it; its
  divergence limits' steps; max_t);
- all its numbers are finite;
- it comes less than ``hold_s`` after the last report sent.

The held reports travel, in order, under :data:`HELD_KEY` of the next report sent, and the
driver takes each of them before that report, exactly as if it had arrived alone
(:meth:`mutune.search.backends.ray_tune.scheduler_adapter.RayScheduler.on_trial_result`).

Why this cannot change a sweep's results: the driver judges reports one at a time in step
order whatever their arrival, and a trial it ends at some report has nothing after that
report recorded (:meth:`mutune.search.backends.ray_tune.callback.SweepBook.record_report`).
Were ``decide_at`` wrong, the trial would only have trained a few steps too many before it
stopped. What changes is when the driver learns of a report: at most ``hold_s`` later, so a
cancellation, a zombie check and the progress display lag by that much (``hold_s`` is capped
at a quarter of ``ray.zombie_timeout_s`` and of ``ray.start_timeout_s``). A trial that
raises, or whose loop returns between decisions, sends what it holds before it ends.
"""
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

    Args:
        decide_at: the steps at which the driver may act on the trial (see the module
            docstring); the first report at or past each of them is always sent at once.
        hold_s: the longest a report may wait, seconds (0: every report is sent at once).
        clock: monotonic seconds (``time.monotonic``; a test's own clock).
    Raises:
        ValueError: ``hold_s`` negative or not finite.
    """

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
        """Keep ``metrics`` for the next report sent (True), or say it goes now (False: pass
        it through :meth:`sending`)."""
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
        """``metrics`` as sent: the held reports under :data:`HELD_KEY` (none held: unchanged);
        the hold empties and its clock restarts."""
        if self._held:
            metrics[HELD_KEY] = self._held
            self._held = []
        self._since = self._clock()
        return metrics

    def flush(self) -> dict[str, Any] | None:
        """The newest held report with the others under :data:`HELD_KEY`, to send before the
        trial ends without a report of its own (it raised, or its loop returned between
        decisions); None when nothing is held."""
        if not self._held:
            return None
        *older, last = self._held
        self._held = older
        return self.sending(last)
