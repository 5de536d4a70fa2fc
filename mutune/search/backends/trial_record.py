"""The driver's record of one trial under Ray, and how its seconds are split when it ends."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TrialRecord", "close_record"]


@dataclass
class TrialRecord:
    """What the driver knows of one trial; ``reports`` are the raw result dicts in order."""
    key: str
    trial_id: int
    point: dict[str, Any]
    started: float
    reports: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    reason: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    held_s: float = 0.0
    segment_start: float | None = None
    restarts: int = 0
    #: restarts and preemptions whose recovery is booked (the first report after each)
    restarts_booked: int = 0
    preemptions: int = 0
    #: the step a preemption report carried (None: none pending): when Ray ends the trial
    #: undecided, it is retried from its latest checkpoint (the one that report carried)
    preempt_pending: int | None = None
    #: True while a preempted trial waits to be started again (its next start is a retry)
    requeued: bool = False
    resumes: int = 0
    restarting: bool = False
    repeated_steps: int = 0
    recovery_s: float = 0.0
    ended: float | None = None
    trial_dir: str | None = None
    last_progress: float | None = None
    nodes: list[str] = field(default_factory=list)
    #: each start's (its ``start_wall``) cumulative upload seconds, as last reported
    upload_s_by_start: dict[float, float] = field(default_factory=dict)
    #: when Ray granted the trial its resources, epoch seconds (the workers' clock)
    granted_at: float = field(default_factory=time.time)

    @property
    def last_step(self) -> int:
        return int(self.reports[-1]["step"]) if self.reports else 0

    @property
    def n_evals(self) -> int:
        return len(self.reports)


def close_record(rec: TrialRecord, status: str, reason: str | None, *, devices: float,
                 device_kind: str) -> dict[str, Any]:
    """End ``rec`` with ``status``/``reason``; returns ``rec.timing`` for
    ``Recorder.trial_finished``.

    Timing (wall seconds): ``allocated_s`` grant to pause/release, summed; ``productive_s`` inside
    steps; ``eval_s`` inside evaluations; ``overhead_s`` the rest of allocated; ``restarts``,
    ``preemptions``, ``resumes`` counts; ``repeated_steps`` and ``recovery_s`` the waste after a
    failure or preemption; ``upload_s`` remote uploads; ``start_s`` grant to the worker's start."""
    allocated = rec.held_s + (time.monotonic() - rec.segment_start
                              if rec.segment_start is not None else 0.0)
    rec.segment_start = None
    rec.ended = time.monotonic()
    last = rec.reports[-1] if rec.reports else {}
    productive = float(last.get("productive_s", 0.0))
    evals = float(last.get("eval_s", 0.0))
    rec.status, rec.reason = status, reason
    began = rec.reports[0].get("began_at") if rec.reports else None
    start = (min(max(float(began) - rec.granted_at, 0.0), allocated) if began is not None
             else 0.0)
    rec.timing = {"allocated_s": allocated, "productive_s": productive, "eval_s": evals,
                  "overhead_s": max(allocated - productive - evals, 0.0),
                  "steps": rec.last_step, "samples": float(last.get("samples", 0.0)),
                  "evals": rec.n_evals, "n_params": float(last.get("n_params", 0.0)),
                  "devices": devices, "device_kind": device_kind,
                  "restarts": rec.restarts, "resumes": rec.resumes,
                  "preemptions": rec.preemptions,
                  "repeated_steps": rec.repeated_steps, "recovery_s": rec.recovery_s,
                  "checkpoint_s": float(last.get("checkpoint_s", 0.0)),
                  "upload_s": sum(rec.upload_s_by_start.values()),
                  "setup_s": float(last.get("setup_s", 0.0)), "start_s": start,
                  "checkpoint_bytes": float(last.get("checkpoint_bytes", 0.0))}
    return rec.timing
