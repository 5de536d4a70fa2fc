"""The words the driver loop and its backends share: groups, actions, outcomes, trial states."""
from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mutune.search.schedulers.contract import Decision, Judgement, Scheduler
from mutune.search.searchers.base import Searcher

__all__ = ["DIVERGE_SE", "beyond_limit", "Group", "Action", "ActionKind", "Outcome",
           "Admission", "TrialState", "EXECUTOR_STATUSES", "STATUS_OF"]


#: The trial status of each decision that ends a trial.
STATUS_OF = {Decision.STOP: "stopped", Decision.DIVERGED: "diverged",
             Decision.COMPLETE: "completed"}

#: Endings only a backend can know: the trial raised, was cancelled, hung (zombie), or its
#: recorded data ran out (replay).
EXECUTOR_STATUSES = ("failed", "cancelled", "zombie", "censored")


class Admission(Protocol):
    """The sweep's budget as the driver sees it."""

    def admit(self, group: str) -> bool:
        """Whether a new trial of ``group`` may start; once False, False for good."""

    @property
    def closed(self) -> bool:
        """True once a new trial was refused: running trials then stop at their next rung."""


@dataclass
class Group:
    """One scheduler core and one searcher, and the trials they own."""
    name: str
    searcher: Searcher
    core: Scheduler | None
    max_t: int
    make_point: Callable[[int, dict[str, Any]], dict[str, Any]] | None = None
    key_of: Callable[[int], str] | None = None
    diverge_above: dict[int, float] | None = None

    def point(self, index: int, hparams: dict[str, Any]) -> dict[str, Any]:
        if self.make_point is None:
            return {"hparams": hparams, "index": index}
        return self.make_point(index, hparams)

    def key(self, index: int) -> str:
        return f"t{index}" if self.key_of is None else self.key_of(index)

    def decision_steps(self) -> list[int]:
        """Steps at which the driver may act on this group's reports: rungs, limits, ``max_t``."""
        steps = {int(self.max_t), *(int(s) for s in self.diverge_above or {})}
        if self.core is not None:
            steps.update(int(m) for m in self.core.milestones)
        return sorted(steps)


class ActionKind(str, enum.Enum):
    """What to do with a free slot."""
    START = "start"          # start a trial (new, or an interrupted one continued)
    PROMOTE = "promote"      # resume a paused trial from its checkpoint
    WAIT = "wait"            # nothing this caller can do now
    DONE = "done"            # the sweep is over (``finished`` holds the final stops, once)


@dataclass(frozen=True)
class Action:
    """The driver's answer to "a slot is free"."""
    kind: ActionKind
    key: str | None = None
    group: str | None = None
    point: dict[str, Any] | None = None
    judgement: Judgement | None = None
    live: bool = True
    finished: tuple[Judgement, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What a report led to: its judgements, and whether the trial trains on, pauses or ended."""
    judgements: list[Judgement]
    action: str               # "continue", "pause" or "end"
    status: str | None = None
    reason: str | None = None


@dataclass
class TrialState:
    """The driver's view of one trial."""
    key: str
    group: str
    point: dict[str, Any]
    state: str = "pending"    # pending (to continue) → running ⇄ paused → ended
    status: str | None = None
    reason: str | None = None
    last_step: int = 0
    live: bool = False        # the backend holds it (it was started in this driver)


#: standard errors a report's value is lowered by before it is compared with its
#: ``diverge_above`` limit (so a noisy evaluation is not taken for a divergence)
DIVERGE_SE = 3.0


def beyond_limit(value: float, se: float | None, limit: float) -> bool:
    """Whether a report diverges: non-finite, or ``value − DIVERGE_SE · se > limit``."""
    if not math.isfinite(value):
        return True
    noise = DIVERGE_SE * se if se is not None and math.isfinite(se) and se > 0 else 0.0
    return value - noise > limit
