"""Zombie trials under Ray: holding devices, reporting nothing."""
from __future__ import annotations

from typing import Any

__all__ = ["ZombieReaper"]


class ZombieReaper:
    """Flags and kills zombie trials of one Ray Tune run (driver side)."""

    def __init__(self, timeout_s: float | None, *, devices: float, device_kind: str,
                 start_timeout_s: float | None = None) -> None:
        self.timeout_s, self.devices, self.device_kind = timeout_s, devices, device_kind
        self.start_timeout_s = start_timeout_s
        self.flagged: dict[str, str] = {}

    def _overdue(self, rec: Any, now: float) -> str | None:
        """Why ``rec`` is a zombie now, or None: quiet since its segment's first report for longer
        than the zombie timeout, or not reporting at all for longer than the start timeout."""
        started = rec.last_progress is not None and rec.last_progress >= rec.segment_start
        if not started:
            quiet = now - rec.segment_start
            if self.start_timeout_s is None or quiet <= self.start_timeout_s:
                return None
            return (f"zombie: no first report {quiet:.1f} s after its start > "
                    f"ray.start_timeout_s {self.start_timeout_s:g} s")
        quiet = now - rec.last_progress
        if self.timeout_s is None or quiet <= self.timeout_s:
            return None
        return f"zombie: no report for {quiet:.1f} s > ray.zombie_timeout_s {self.timeout_s:g} s"

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
            why = self._overdue(rec, now)
            actor = getattr(trial.temporary_state, "ray_actor", None)
            if why is None or actor is None:
                continue
            self.flagged[trial.trial_id] = (
                f"{why} while holding {self.devices:g} {self.device_kind} device(s); "
                "worker killed")
            trial.max_failures = trial.num_failures     # flagged: stopped, not retried
            ray.kill(actor, no_restart=True)
            out.append(trial.trial_id)
        return out
