"""The one contract every scheduler core keeps: ASHA, promotion ASHA and Hyperband.

"Schedulers decide, searchers propose, backends execute" (Syne Tune): a core never chooses
hyperparameters and never runs anything. Its only caller is the driver loop
(:class:`mutune.search.driver.SweepDriver`), which the Ray Tune backend and the simulator both
use, so every backend feeds a core the same calls in the same order.

Trials are named by string keys. A trial's states, as a core sees them: *running* (started or
promoted, reporting), *paused* at a rung (promotion variant only; its resources are free),
*ended* (stopped, diverged or completed). A report after a trial ended raises.

Hooks, with the trial's state when the driver calls them:

* :meth:`Scheduler.on_report` — the trial is running. ``step`` is an integer ≥ 1 and ``value``
  a real number (both checked: :mod:`.inputs`). Returns the judgements at every milestone
  ≤ step not judged yet, lowest first (often none). The last one says what happens next:
  ``CONTINUE`` (train on), ``STOP`` or ``DIVERGED`` (the trial ended), ``PAUSE`` (it waits at
  that rung) or ``COMPLETE`` (it reached max_t). A report at step ≥ max_t ends the trial as
  completed even when it crosses no milestone (then :meth:`ended` says ``COMPLETE``).
* :meth:`Scheduler.candidate` — a slot is free. The paused trial that should take it, as a
  ``PROMOTE`` judgement, or None (then the driver starts a new trial). Pure.
* :meth:`Scheduler.promote` — the trial is paused and was the candidate; it is running again
  once this returns.
* :meth:`Scheduler.finish` — nothing runs, no candidate exists and no new trial will start:
  every paused trial is stopped (``STOP``); afterwards nothing is paused.
* :meth:`Scheduler.state_dict` / ``from_state`` — a versioned JSON-able snapshot; a core
  rebuilt from it makes the decisions the original would have made for the same later calls.
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "Judgement", "Scheduler", "TERMINAL"]


class Decision(str, enum.Enum):
    """What a core decided for a trial at a rung.

    ``CONTINUE``: train on. ``STOP``: ended below the rung's cutoff. ``DIVERGED``: ended by a
    non-finite value. ``PAUSE``: waits at the rung, resources freed (promotion variant).
    ``PROMOTE``: a paused trial resumes towards its next rung. ``COMPLETE``: the trial reached
    max_t; nothing is left to decide (it is never "stopped" after training the full budget).
    """
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
    """One decision: ``trial`` judged at rung ``milestone`` (steps) with ``value`` against
    ``cutoff`` (the worst value still inside the rung's top fraction; None when the value was
    non-finite or no finite cutoff exists)."""
    trial: str
    milestone: int
    value: float
    cutoff: float | None
    decision: Decision


class Scheduler(abc.ABC):
    """A scheduler core (see the module docstring for the contract of each hook).

    Attributes every core has: ``grace_period`` r, ``reduction_factor`` η and ``max_t`` (steps),
    ``mode`` (``min``/``max``), ``variant`` (``stopping``/``promotion``) and ``milestones``
    (the smallest grace period's rungs, increasing).
    """

    grace_period: int
    reduction_factor: int
    max_t: int
    mode: str
    variant: str
    milestones: list[int]

    @abc.abstractmethod
    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge a running trial's report (see the module docstring)."""

    @abc.abstractmethod
    def candidate(self) -> Judgement | None:
        """The paused trial to promote on a free slot, or None. Pure."""

    @abc.abstractmethod
    def promote(self, trial: str) -> Judgement:
        """Resume the paused candidate ``trial``. Raises SearchError if it is not one."""

    @abc.abstractmethod
    def finish(self) -> list[Judgement]:
        """End of sweep: stop every paused trial."""

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
        """A versioned, JSON-able snapshot (``kind`` names the core)."""

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
