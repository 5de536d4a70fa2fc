"""What a search backend records about trials, and what it asks its controller."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["TrialRecorder", "SweepControl", "TRIAL_STATUSES"]

#: Trial statuses. ``completed``: ran to max_t; ``stopped``: ended by the scheduler at a rung
#: (or by the budget at a rung); ``diverged``: reported a NaN/inf metric; ``failed``: raised an
#: error; ``cancelled``: ended by ``mutune cancel`` before its rung; ``zombie``: held its
#: devices without reporting for longer than ``ray.zombie_timeout_s``.
TRIAL_STATUSES = ("running", "completed", "stopped", "diverged", "failed", "cancelled",
                  "zombie")


@runtime_checkable
class TrialRecorder(Protocol):
    """What a search backend records about each trial (docs/architecture.md §2, §7)."""

    def trial_started(self, sweep_id: int, proxy_sweep_id: int | None, kind: str, key: str,
                      width: int, config: Mapping[str, Any], seed: int) -> int:
        """A trial got its resources (``kind``: ``proxy`` or ``target``); returns its id."""

    def trial_reported(self, trial_id: int, step: int, metrics: Mapping[str, float],
                       seq: int) -> None:
        """A report at ``step``; ``seq`` orders the sweep's events. Idempotent on (trial, step)."""

    def scheduler_decided(self, trial_id: int, milestone: int, value: float | None,
                          cutoff: float | None, decision: str, seq: int) -> None:
        """The scheduler judged the trial at rung ``milestone`` (steps) against ``cutoff``."""

    def scheduler_saved(self, proxy_sweep_id: int, state: Mapping[str, Any],
                        searcher_state: Mapping[str, Any] | None, seq: int) -> None:
        """The scheduler's and searcher's state after decision ``seq``: what a resume restores."""

    def trial_checkpoint_dir(self, trial_id: int, path: str) -> None:
        """The folder where the trial's checkpoints are kept (for a resume)."""

    def trial_resumed(self, trial_id: int, reason: str) -> None:
        """A resumed sweep's trial continues from its checkpoint; ``reason``: why it stopped."""

    def trial_finished(self, trial_id: int, status: str, reason: str | None,
                       timing: Mapping[str, float]) -> None:
        """The trial released its resources, terminal ``status``; ``timing`` in wall seconds."""

    def trial_logged(self, trial_id: int, stdout: str, stderr: str,
                     traceback: str | None) -> None:
        """The trial's output tails and traceback, once after it finished (a repeat replaces)."""


@runtime_checkable
class SweepControl(Protocol):
    """What a running sweep asks of whoever controls it (never a record of what happened)."""

    def stop_requested(self, sweep_id: int) -> str | None:
        """Why the sweep should stop now, or None; polled between trial events: keep it cheap."""

    def heartbeat(self, trial_id: int) -> None:
        """The running trial is alive; a resume treats one older than its lease as interrupted."""
