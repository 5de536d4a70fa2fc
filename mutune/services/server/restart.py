"""Rebuild a completed proxy width's results from the database, for a restarted sweep.

A sweep interrupted by a dead server is finished under the same sweep id
(:func:`mutune.services.server.worker._resume_or_restart`): widths whose proxy sweep is ``completed``
are not swept again, so the pipeline needs their :class:`~mutune.pipeline.ProxyResult` and a
:class:`~mutune.search.backends.ray_tune.run.RunOutcome`-shaped object rebuilt from the recorded rows — the
trials with their reports and timing, and the scheduler's rung values from the recorded
decisions. Nothing is written here.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["RecordedCore", "recorded_width"]


def _num(v: Any) -> float:
    """A stored metric as a float (the store keeps NaN/inf as strings)."""
    return float(v) if v is not None else math.nan


@dataclass
class RecordedCore:
    """The part of a scheduler core the pipeline reads after a sweep: ``rung_values()``,
    milestone (steps) → {trial key: judged value}, from the recorded scheduler events."""
    rungs: dict[int, dict[str, float]]

    def rung_values(self) -> dict[int, dict[str, float]]:
        return {m: dict(v) for m, v in self.rungs.items()}


def _mono(stamp: str | None, now_wall: float, now_mono: float) -> float:
    """A recorded UTC ISO time on this process's monotonic clock (the clock the ledger's span
    arithmetic uses for live trials)."""
    if not stamp:
        return now_mono
    t = datetime.fromisoformat(stamp)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return now_mono - (now_wall - t.timestamp())


def recorded_width(rows: dict[str, Any], proxy_sweep: dict[str, Any]) -> tuple[Any, Any]:
    """(ProxyResult, RunOutcome) of one completed proxy sweep, rebuilt from its rows.

    Args:
        rows: ``Store.sweep_rows(sweep_id)``.
        proxy_sweep: the ``completed`` proxy sweep row (with its recorded ``best``).
    Returns:
        ProxyResult as :func:`mutune.pipeline.sweep_width` returned it (best trial, value and
        rung, trial count, optimum), and a RunOutcome whose trials carry the recorded reports
        and timing (seconds) and whose core gives the recorded rung values.
    """
    from mutune.pipeline import ProxyResult
    from mutune.search.backends.ray_tune.callback import TrialRecord
    from mutune.search.backends.ray_tune.run import RunOutcome

    now_wall, now_mono = time.time(), time.monotonic()
    trials = [t for t in rows["trials"] if t["proxy_sweep_id"] == proxy_sweep["id"]]
    key_of = {t["id"]: t["key"] for t in trials}
    records = []
    for index, t in enumerate(trials):
        reports = [{"step": int(r["step"]), **{k: _num(v) for k, v in r["metrics"].items()}}
                   for r in t["reports"]]
        last = reports[-1] if reports else {}
        timing = {"allocated_s": t["allocated_s"] or 0.0,
                  "productive_s": t["productive_s"] or 0.0, "eval_s": t["eval_s"] or 0.0,
                  "overhead_s": t["overhead_s"] or 0.0, "steps": t["steps"] or 0,
                  "samples": float(t["samples"] or 0), "evals": len(reports),
                  "n_params": float(last.get("n_params", 0.0)),
                  "devices": t["devices"] or 1, "device_kind": t["device_kind"] or "cpu"}
        records.append(TrialRecord(t["key"], t["id"], {"hparams": dict(t["config"]),
                                                       "seed": t["seed"], "index": index},
                                   _mono(t["started_at"], now_wall, now_mono), reports,
                                   t["status"], t["reason"], timing))
    rungs: dict[int, dict[str, float]] = {}
    for e in rows["events"]:
        if e["trial_id"] in key_of:
            rungs.setdefault(int(e["milestone"]), {})[key_of[e["trial_id"]]] = _num(e["value"])
    best = proxy_sweep["best"] or {}
    result = ProxyResult(proxy_sweep["width"], proxy_sweep["id"], int(best["trial_id"]),
                         dict(best["config"]), _num(best["val_loss"]), int(best["milestone"]),
                         len(trials), dict(best.get("optimum") or {}))
    return result, RunOutcome(records, RecordedCore(dict(sorted(rungs.items()))))
