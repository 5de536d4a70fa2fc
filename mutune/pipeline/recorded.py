"""Trials rebuilt from the rows a results database holds, for a resumed sweep to continue."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["trial_records", "continue_points", "never_started", "recorded_trials",
           "unfinished"]


def trial_records(trial_rows: list[dict[str, Any]], seeds: list[int],
                  replicates: int = 1) -> list[Any]:
    """Rebuild the driver's TrialRecord of recorded trials (rows with their reports)."""
    from mutune.search.backends.trial_record import TrialRecord

    out = []
    for t in trial_rows:
        reports = [{"step": int(r["step"]), **{k: float(v) for k, v in r["metrics"].items()}}
                   for r in t["reports"]]
        seed = int(t["seed"])
        pos = seeds.index(seed) if seed in seeds else -1
        point = {"hparams": dict(t["config"]), "seed": seed,
                 "index": pos // replicates if pos >= 0 else -1, "key": t["key"]}
        if replicates > 1 and pos >= 0:
            point["replicate_seeds"] = [int(x) for x in seeds[pos:pos + replicates]]
        rec = TrialRecord(t["key"], int(t["id"]), point, 0.0, reports=reports,
                          status=t["status"], reason=t["reason"])
        last = reports[-1] if reports else {}
        rec.restarts = int(t.get("restarts") or 0)
        rec.preemptions = int(t.get("preemptions") or 0)
        rec.restarts_booked = rec.restarts + rec.preemptions
        rec.repeated_steps = int(t.get("repeated_steps") or 0)
        rec.recovery_s = float(t.get("recovery_s") or 0.0)
        if t.get("upload_s"):
            rec.upload_s_by_start[-1.0] = float(t["upload_s"])
        if t["status"] == "running" or t["allocated_s"] is None:
            # never released: the seconds it is known to have held are its reported ones
            rec.held_s = sum(float(last.get(k, 0.0)) for k in ("productive_s", "eval_s",
                                                               "setup_s"))
        else:
            rec.timing = {k: t[k] for k in ("allocated_s", "productive_s", "eval_s",
                                            "overhead_s", "steps", "samples", "devices",
                                            "device_kind", "restarts", "preemptions",
                                            "repeated_steps",
                                            "recovery_s", "checkpoint_s", "upload_s")}
            rec.timing["setup_s"] = float(last.get("setup_s", 0.0))
            rec.timing.update(evals=len(reports), n_params=float(last.get("n_params", 0.0)))
        out.append(rec)
    return out


def unfinished(rec: Any) -> bool:
    """Running when the driver died, or reaped as stale: to continue from its checkpoint."""
    return rec.status == "running" or (rec.status == "failed"
                                       and (rec.reason or "").startswith("stale:"))


def continue_points(records: list[Any], trial_rows: list[dict[str, Any]]
                    ) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """(unfinished records, ended records, the unfinished trials' points with ``restore_from`` and
    ``restore_at_most``)."""
    from mutune.search.trial.checkpoint import latest_checkpoint
    from mutune.search.trial.remote_trial import CONTINUE

    trial_dir = {t["id"]: t.get("checkpoint_dir") for t in trial_rows}
    left = [r for r in records if unfinished(r)]
    ended = [r for r in records if not unfinished(r)]
    return left, ended, [
        {**r.point, "key": r.key,
         "restore_from": latest_checkpoint(trial_dir[r.trial_id], r.last_step) or CONTINUE,
         "restore_at_most": r.last_step}
        for r in left]


def never_started(proposed: Mapping[str, Mapping[str, Any]], records: list[Any],
                  seeds: list[int], replicates: int = 1) -> list[dict[str, Any]]:
    """The points of trials the searcher had proposed but the database never recorded, to start
    afresh under their own keys."""
    have = {r.key for r in records}
    r = max(replicates, 1)
    out = []
    for i, (key, hparams) in enumerate(proposed.items()):
        if key in have:
            continue
        own = [int(x) for x in seeds[i * r:(i + 1) * r]]
        out.append({"hparams": dict(hparams), "seed": own[0], "index": i, "key": key,
                    **({"replicate_seeds": own} if r > 1 else {})})
    return out


def recorded_trials(run: Any, points: list[dict[str, Any]],
                    seeds: list[int]) -> tuple[list[dict[str, Any]], Any]:
    """Split a design's (or the target's) points by what a resumed sweep had recorded under their
    keys: ended trials kept, running ones continued, the rest new (a recorded trial counts only
    with the point's configuration and seed)."""
    from mutune.search.backends.groups import ResumeState

    rows = []
    for p in points:
        row = run.recorded.get(p["key"])
        if (row is not None and int(row["seed"]) == p["seed"]
                and dict(row["config"]) == p["hparams"]):
            rows.append(row)
    known = {r["key"] for r in rows}
    records = trial_records(rows, seeds)
    for rec, row in zip(records, rows):
        rec.trial_dir = row.get("checkpoint_dir")
    left, ended, cont = continue_points(records, rows)
    return ([p for p in points if p["key"] not in known],
            ResumeState(cont, {r.key: r for r in left}, ended))
