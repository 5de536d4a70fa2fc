"""The sweep's budget, enforced while it runs (config ``budget``; docs/architecture.md §6 units)."""
from __future__ import annotations

import statistics
import time
from typing import Any

from mutune.search.schedulers.planned_steps import DEFAULT_TRIAL_OVERHEAD_S

__all__ = ["SweepBudget", "BudgetAdmission"]


class SweepBudget:
    """Admission control of new trials against a device-hour limit."""

    def __init__(self, limit_gpu_hours: float) -> None:
        if not limit_gpu_hours > 0:
            raise ValueError(f"limit_gpu_hours = {limit_gpu_hours}: must be > 0")
        self.limit = float(limit_gpu_hours)
        self.books: list[Any] = []
        self.exhausted: str | None = None
        #: device-hours spent before this driver (a resumed sweep's finished trials)
        self.prior_gpu_hours = 0.0

    def add_prior(self, gpu_hours: float) -> None:
        """Count ``gpu_hours`` spent before this driver; ValueError if negative or non-finite."""
        import math

        if not (math.isfinite(gpu_hours) and gpu_hours >= 0):
            raise ValueError(f"gpu_hours = {gpu_hours}: must be a finite number >= 0")
        self.prior_gpu_hours += float(gpu_hours)

    def __getstate__(self) -> dict[str, Any]:
        # Tune snapshots the scheduler (which holds the gate): no live books in the pickle
        return {**self.__dict__, "books": []}

    def register(self, book: Any) -> None:
        """Count the trials of ``book`` (one Ray Tune run of this sweep)."""
        self.books.append(book)

    def _records(self) -> list[Any]:
        return [r for b in self.books for r in b.trials.values()]

    def spent_gpu_hours(self) -> float:
        """Device-hours spent before this driver, by finished trials, and by running ones."""
        now = time.monotonic()
        total = 0.0
        for b in self.books:
            waiting = list(getattr(b, "resumed", {}).values())   # not yet started again
            for r in [*b.trials.values(), *waiting]:
                if r.status == "running":
                    total += (r.held_s + (now - r.segment_start if r.segment_start is not None
                                          else 0.0)) * b.devices
                else:
                    total += r.timing.get("allocated_s", 0.0) * b.devices
        return self.prior_gpu_hours + total / 3600.0

    @staticmethod
    def _s_per_step(book: Any, group: str | None = None) -> float | None:
        rates = [r.reports[-1]["productive_s"] / r.last_step
                 for r in book.trials.values() if r.reports and r.last_step > 0
                 and (group is None or book.group_of(r.key) == group)]
        return statistics.median(rates) if rates else None

    def _overhead_s(self) -> float:
        done = [r.timing["overhead_s"] for r in self._records()
                if r.status != "running" and "overhead_s" in r.timing]
        return statistics.median(done) if done else DEFAULT_TRIAL_OVERHEAD_S

    def committed_gpu_hours(self) -> float:
        """What the running trials need to reach their next rung, device-hours."""
        total = 0.0
        for b in self.books:
            rate = self._s_per_step(b) or 0.0
            for r in b.trials.values():
                if r.status == "running":
                    nxt = b.next_milestone(r)
                    total += max(nxt - r.last_step, 0) * rate * b.devices
        return total / 3600.0

    def estimate_gpu_hours(self, book: Any, steps: int, *, scale: float = 1.0,
                           devices: float | None = None, group: str | None = None) -> float:
        """Device-hours of a new ``steps``-step trial: measured s/step × ``scale``, plus overhead.
        """
        rate = self._s_per_step(book, group)
        if rate is None:
            rates = [x for x in (self._s_per_step(b) for b in self.books) if x is not None]
            rate = max(rates) if rates else 0.0
        d = book.devices if devices is None else devices
        return (steps * rate * scale + self._overhead_s()) * d / 3600.0

    def admits(self, new_gpu_hours: float, what: str) -> bool:
        """Whether a new trial costing ``new_gpu_hours`` fits; if not, the gate closes for good."""
        if self.exhausted is not None:
            return False
        spent, committed = self.spent_gpu_hours(), self.committed_gpu_hours()
        if spent + committed + new_gpu_hours > self.limit:
            self.exhausted = (f"budget of {self.limit:.4g} GPU-hours: {spent:.4g} spent and "
                              f"{committed:.4g} committed to running trials' next rungs; "
                              f"{what} (≈{new_gpu_hours:.4g}) would exceed it")
            return False
        return True


class BudgetAdmission:
    """A :class:`SweepBudget` as the driver loop's admission: a new trial's first rung must fit."""

    def __init__(self, gate: SweepBudget, book: Any, first_rung: int) -> None:
        self.gate, self.book, self.first_rung = gate, book, first_rung

    def admit(self, group: str) -> bool:
        """Whether a new trial fits (a refusal closes the gate); other kinds' groups pass."""
        if self.book.kinds.get(group, self.book.kind) != self.book.kind:
            return True
        width = self.book.groups.get(group, (self.book.width,))[0]
        return self.gate.admits(
            self.gate.estimate_gpu_hours(self.book, self.first_rung,
                                         group=group if self.book.groups else None),
            f"a new trial at width {width}")

    @property
    def closed(self) -> bool:
        """True once the gate refused a trial."""
        return self.gate.exhausted is not None
