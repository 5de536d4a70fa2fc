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
        """A trial is granted its resources. ``kind`` is ``proxy`` or ``target``; ``key`` is
        the driver's name for the trial. Returns the trial id."""

    def trial_reported(self, trial_id: int, step: int, metrics: Mapping[str, float],
                       seq: int) -> None:
        """An evaluation report at training ``step``; ``seq`` orders all reports and decisions
        of the sweep. Idempotent on (trial, step)."""

    def scheduler_decided(self, trial_id: int, milestone: int, value: float | None,
                          cutoff: float | None, decision: str, seq: int) -> None:
        """The scheduler judged the trial at rung ``milestone`` (steps) with ``value`` against
        ``cutoff`` and decided ``decision`` (a :class:`~mutune.search.schedulers.Decision`
        value)."""

    def scheduler_saved(self, proxy_sweep_id: int, state: Mapping[str, Any],
                        searcher_state: Mapping[str, Any] | None, seq: int) -> None:
        """The scheduler core's and the searcher's state (versioned JSON dicts) after the
        decision numbered ``seq``: what a resumed sweep restores."""

    def trial_checkpoint_dir(self, trial_id: int, path: str) -> None:
        """The folder where the trial's checkpoints are kept (for a resume)."""

    def trial_resumed(self, trial_id: int, reason: str) -> None:
        """A trial of a resumed sweep continues from its checkpoint (running again);
        ``reason`` says why it had stopped (e.g. a stale heartbeat)."""

    def trial_finished(self, trial_id: int, status: str, reason: str | None,
                       timing: Mapping[str, float]) -> None:
        """The trial released its resources with a terminal ``status`` (TRIAL_STATUSES).
        ``timing`` keys: allocated_s, productive_s, eval_s, overhead_s, steps, samples,
        devices (count granted, may be fractional), restarts, repeated_steps, recovery_s,
        checkpoint_s, plus device_kind (str) — seconds are wall seconds."""

    def trial_logged(self, trial_id: int, stdout: str, stderr: str,
                     traceback: str | None) -> None:
        """What the trial wrote (the tails of its stdout and stderr) and, when it raised, the
        formatted traceback. Called once per trial, after it finished; a repeat replaces."""


@runtime_checkable
class SweepControl(Protocol):
    """What a running sweep asks of whoever controls it (never a record of what happened)."""

    def stop_requested(self, sweep_id: int) -> str | None:
        """Why the sweep should stop now (e.g. ``cancelled by user``), or None to go on.
        Polled by the driver between trial events; must be cheap."""

    def heartbeat(self, trial_id: int) -> None:
        """The running trial is alive (beaten through the driver at ``ray.heartbeat_s``); a
        resume treats a trial whose last beat is older than its lease as interrupted."""
