"""Zombie trials under Ray: holding devices, reporting nothing.

A trial that holds its devices with no report for longer than ``ray.zombie_timeout_s`` (a
hanging data fetch, a deadlocked collective) is flagged, its worker killed with ``ray.kill``
and not retried; it ends ``zombie`` with the reason. The clock starts at the trial's grant, so
the timeout must exceed a cold worker's start-up (a fresh Ray worker imports torch: seconds).
"""
from __future__ import annotations

from typing import Any

__all__ = ["ZombieReaper"]


class ZombieReaper:
    """Flags and kills zombie trials of one Ray Tune run (driver side).

    Args:
        timeout_s: seconds without a report after which a running trial is a zombie.
        devices, device_kind: what each trial holds (named in the reason).
    Attributes:
        flagged: Ray trial id → the reason it was flagged.
    """

    def __init__(self, timeout_s: float, *, devices: float, device_kind: str) -> None:
        self.timeout_s, self.devices, self.device_kind = timeout_s, devices, device_kind
        self.flagged: dict[str, str] = {}

    def reap(self, trials: list[Any], records: dict[str, Any], now: float) -> list[str]:
        """Kill the workers of running trials quiet for longer than the timeout; returns the
        Ray trial ids flagged now. ``records``: Ray trial id → TrialRecord."""
        import ray
        from ray.tune.experiment import Trial

        out = []
        for trial in trials:
            rec = records.get(trial.trial_id)
            if (rec is None or trial.status != Trial.RUNNING or rec.segment_start is None
                    or trial.trial_id in self.flagged):
                continue
            quiet = now - max(rec.segment_start, rec.last_progress or 0.0)
            actor = getattr(trial.temporary_state, "ray_actor", None)
            if quiet <= self.timeout_s or actor is None:
                continue
            self.flagged[trial.trial_id] = (
                f"zombie: no report for {quiet:.1f} s > ray.zombie_timeout_s "
                f"{self.timeout_s:g} s while holding {self.devices:g} "
                f"{self.device_kind} device(s); worker killed")
            trial.max_failures = trial.num_failures     # flagged: stopped, not retried
            ray.kill(actor, no_restart=True)
            out.append(trial.trial_id)
        return out
