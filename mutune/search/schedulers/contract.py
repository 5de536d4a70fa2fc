"""The one contract every scheduler core keeps: ASHA, promotion ASHA and Hyperband.

A core only decides (Syne Tune's split); its one caller is the driver loop, for every backend."""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "Judgement", "Scheduler", "TERMINAL"]


class Decision(str, enum.Enum):
    """What a core decided for a trial at a rung."""
    CONTINUE = "continue"
    STOP = "stop"
    DIVERGED = "diverged"
    PAUSE = "pause"
    PROMOTE = "promote"
    COMPLETE = "complete"


#: Decisions that end a trial.
TERMINAL = (Decision.STOP, Decision.DIVERGED, Decision.COMPLETE)


@dataclass(frozen=True)
class Judgement:
    """``trial`` judged at rung ``milestone`` (steps) against ``cutoff``, the worst value still in
    the
    top fraction (None when non-finite or none exists)."""
    trial: str
    milestone: int
    value: float
    cutoff: float | None
    decision: Decision


class Scheduler(abc.ABC):
    """A scheduler core; a trial is running, paused at a rung (promotion only) or ended."""

    grace_period: int
    reduction_factor: int
    max_t: int
    mode: str
    variant: str
    milestones: list[int]

    @abc.abstractmethod
    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge a running trial's report: judgements at every milestone ≤ step not judged
        yet, lowest first; the last says what next. At step ≥ max_t the trial ends COMPLETE;
        a report after its end raises."""

    @abc.abstractmethod
    def candidate(self) -> Judgement | None:
        """The paused trial to promote on a free slot, or None. Pure."""

    @abc.abstractmethod
    def promote(self, trial: str) -> Judgement:
        """Resume the paused candidate ``trial``. Raises SearchError if it is not one."""

    @abc.abstractmethod
    def finish(self) -> list[Judgement]:
        """End of sweep (nothing runs, no candidate, no new trial): stop every paused trial."""

    @abc.abstractmethod
    def paused(self) -> dict[str, int]:
        """Paused trials → the milestone each waits at, in pause order (a copy)."""

    @abc.abstractmethod
    def ended(self, trial: str) -> Decision | None:
        """How ``trial`` ended (STOP, DIVERGED or COMPLETE), or None while it has not."""

    @abc.abstractmethod
    def milestones_of(self, trial: str) -> list[int]:
        """The milestones ``trial`` is judged at (its bracket's under Hyperband)."""

    @abc.abstractmethod
    def rung_values(self) -> dict[int, dict[str, float]]:
        """Milestone → {trial: value recorded there} (a copy)."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """A versioned JSON-able snapshot (``kind`` names the core); a rebuilt core decides alike.
        """

    def stopped(self, trial: str) -> Decision | None:
        """STOP or DIVERGED when the scheduler ended ``trial`` early, else None."""
        d = self.ended(trial)
        return d if d in (Decision.STOP, Decision.DIVERGED) else None

    def completed(self, trial: str) -> bool:
        """Whether ``trial`` reached max_t."""
        return self.ended(trial) is Decision.COMPLETE

    def next_milestone(self, trial: str, step: int) -> int:
        """The next step ``trial`` is judged at after ``step`` (max_t past its last rung)."""
        return next((m for m in self.milestones_of(trial) if m > step), self.max_t)
