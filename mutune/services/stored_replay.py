"""`mutune replay`: what another scheduler would have chosen and spent on a recorded sweep —
in recorded order when the settings are the original's (reproducing its decisions), else on
a simulated clock of ``concurrency`` workers. Both sides report ``productive_gpu_hours``
(Σ (productive_s + eval_s) × devices / 3600); the original's held time is apart."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mutune.errors import SearchError, StoreError
from mutune.services.report.formatting import unclipped
from mutune.search.backends.replay import (SCHEDULER_KINDS, ReplayResult, ReplaySettings,
                                           replay, replay_in_order)

__all__ = ["replay_sweep", "ReplayChanges", "render_replay", "sweep_curves", "REPLAY_CAPTION"]


def _num(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _original_concurrency(config: Mapping[str, Any]) -> int:
    ray = config.get("ray") or {}
    cap = ray.get("max_concurrent_trials")
    if cap:
        return int(cap)
    cpus, per = float(ray.get("num_cpus") or 1), float(ray.get("cpus_per_trial") or 1)
    return max(int(cpus // per), 1)


def sweep_curves(trials: list[Mapping[str, Any]], metric: str
                 ) -> dict[str, list[tuple[int, float, float]]]:
    """Trial key → ``[(step, metric value, seconds since start)]`` by step, in arrival order
    (seconds: cumulative ``productive_s + eval_s``, non-decreasing)."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    for t in trials:
        reports = t["reports"]
        total = (t.get("productive_s") or 0.0) + (t.get("eval_s") or 0.0) \
            or (t.get("allocated_s") or 0.0)
        last_step = max((r["step"] for r in reports), default=0) or 1
        curve, prev = [], 0.0
        for r in reports:
            m = r["metrics"]
            if "productive_s" in m or "eval_s" in m:
                sec = _num(m.get("productive_s", 0.0)) + _num(m.get("eval_s", 0.0))
            else:
                sec = total * r["step"] / last_step
            sec = prev if not math.isfinite(sec) else max(sec, prev)
            prev = sec
            curve.append((int(r["step"]), _num(m.get(metric)), sec))
        out[t["key"]] = curve
    return out


def _trial_view(t: Mapping[str, Any] | None, value: float | None, milestone: int | None
                ) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"trial_id": t["id"], "key": t["key"], "config": t["config"], "value": value,
            "milestone": milestone}


def _finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass(frozen=True)
class ReplayChanges:
    """What a replay changes of the recorded sweep (None: the original's); steps for r and max_t."""
    scheduler: str | None = None
    grace_period: int | None = None
    reduction_factor: int | None = None
    max_t: int | None = None
    concurrency: int | None = None
    seed: int | None = None

    def check(self) -> None:
        """Raises SearchError: an unknown scheduler, or a concurrency below 1."""
        if self.scheduler is not None and self.scheduler not in SCHEDULER_KINDS:
            raise SearchError(f"scheduler = {self.scheduler!r}: must be one of "
                              f"{SCHEDULER_KINDS}")
        c = self.concurrency
        if c is not None and (not isinstance(c, int) or c < 1):
            raise SearchError(f"concurrency = {c!r}: must be an integer >= 1")

    def applied(self, original: ReplaySettings) -> ReplaySettings:
        new = {"kind": self.scheduler, "grace_period": self.grace_period,
               "reduction_factor": self.reduction_factor, "max_t": self.max_t,
               "seed": self.seed}
        return replace(original, **{k: v for k, v in new.items() if v is not None})


def _original_settings(rows: Mapping[str, Any], ps: Mapping[str, Any]) -> ReplaySettings:
    settings = ps["settings"] or {}
    sched = settings.get("scheduler") or {}
    if sched.get("variant", "stopping") != "stopping":
        raise SearchError(f"proxy sweep {ps['id']} ran promotion ASHA: replay re-simulates the "
                          "stopping variant only (a paused trial's curve past its pause is "
                          "not recorded unless it was promoted)")
    # Hyperband's bracket seed: the one recorded with the scheduler settings, else the sweep's
    return ReplaySettings(kind=sched.get("kind", "asha"),
                          grace_period=int(sched["grace_period"]),
                          reduction_factor=int(sched["reduction_factor"]),
                          max_t=int(sched["max_t"]), mode=settings.get("mode", "min"),
                          seed=int(sched.get("seed", rows["sweep"]["seed"])))


def _replay_width(rows: Mapping[str, Any], ps: Mapping[str, Any],
                  changes: ReplayChanges) -> dict[str, Any]:
    metric = (ps["settings"] or {}).get("metric", "val_loss")
    original = _original_settings(rows, ps)
    chosen = changes.applied(original)
    orig_conc = _original_concurrency(rows["sweep"]["config"])
    conc = orig_conc if changes.concurrency is None else changes.concurrency
    trials = [t for t in rows["trials"]
              if t["kind"] == "proxy" and t["proxy_sweep_id"] == ps["id"]]
    failed = [t["key"] for t in trials if t["status"] == "failed"]
    curves = sweep_curves(trials, metric)
    if chosen.kind == "asha":
        same = replace(chosen, seed=0) == replace(original, seed=0)
    else:
        same = chosen == original
    in_order = same and conc == orig_conc
    if in_order:
        seconds = {k: {s: sec for s, _, sec in c} for k, c in curves.items()}
        reports = sorted(((r["seq"], t["key"], r["step"], _num(r["metrics"].get(metric)),
                           seconds[t["key"]][r["step"]])
                          for t in trials for r in t["reports"]), key=lambda x: x[0])
        result: ReplayResult = replay_in_order(reports, chosen, failed=failed)
    else:
        result = replay(curves, chosen, concurrency=conc, failed=failed)
    by_id = {t["id"]: t for t in trials}
    events = [e for e in rows["events"] if e["trial_id"] in by_id]
    # the sweep's own best (a confirmation design may have replaced the width's best since)
    orig_best = ps.get("best") or {}
    orig_best = (orig_best.get("optimum") or {}).get("sweep_best") or orig_best
    orig_trial = by_id.get(orig_best.get("trial_id"))
    depth = (ps.get("settings") or {}).get("depth")
    return {
        "width": ps["width"], **({"depth": depth} if depth is not None else {}),
        "replayed": _replayed_view(result, trials, {**chosen.__dict__, "concurrency": conc},
                                   in_order),
        "original": _original_view(trials, events, orig_best, orig_trial,
                                   {**original.__dict__, "concurrency": orig_conc}),
        "matches_original": (_matches(result, trials, events, orig_trial) if in_order
                             else None),
    }


def _matches(result: ReplayResult, trials: list[dict[str, Any]], events: list[dict[str, Any]],
             orig_trial: Mapping[str, Any] | None) -> bool:
    """Whether the in-order replay made the recorded decisions and picked the same best."""
    by_key = {t["key"]: t for t in trials}
    ours = [(by_key[d.trial]["id"], d.milestone, d.decision.value,
             _finite_or_none(d.value), _finite_or_none(d.cutoff)) for d in result.decisions]
    theirs = [(e["trial_id"], e["milestone"], e["decision"], e["value"], e["cutoff"])
              for e in events]
    best = result.best
    return (ours == theirs and best is not None and orig_trial is not None
            and best.trial == orig_trial["key"])


def _replayed_view(result: ReplayResult, trials: list[dict[str, Any]],
                   settings: dict[str, Any], in_order: bool) -> dict[str, Any]:
    by_key = {t["key"]: t for t in trials}
    devices = {t["key"]: float(t.get("devices") or 1) for t in trials}
    device_s = sum(sec * devices.get(k, 1.0) for k, sec in result.held_s.items())
    counts: dict[str, int] = {}
    for st in result.statuses.values():
        counts[st] = counts.get(st, 0) + 1
    best = result.best
    return {
        "method": "recorded-order" if in_order else "simulated-clock",
        "settings": settings,
        "best": _trial_view(by_key.get(best.trial) if best else None,
                            best.value if best else None, best.milestone if best else None),
        "decisions": len(result.decisions),
        "stops": sum(d.decision.value in ("stop", "diverged") for d in result.decisions),
        "statuses": counts,
        "wall_s": result.wall_s,
        "device_s": device_s,
        "productive_gpu_hours": device_s / 3600.0,
        "gpu_hours": device_s / 3600.0,
        "missing_data": {"decisions": result.missing_data_decisions,
                         "treatment": result.treatment,
                         "trials": [c.trial for c in result.censored]},
    }


def _original_view(trials: list[dict[str, Any]], events: list[dict[str, Any]],
                   best: Mapping[str, Any], trial: Mapping[str, Any] | None,
                   settings: dict[str, Any]) -> dict[str, Any]:
    allocated = sum((t.get("allocated_s") or 0.0) * float(t.get("devices") or 1)
                    for t in trials) / 3600.0
    return {
        "settings": settings,
        "best": _trial_view(trial, best.get("val_loss"), best.get("milestone")),
        "decisions": len(events),
        "stops": sum(e["decision"] in ("stop", "diverged") for e in events),
        "trials": len(trials),
        "productive_gpu_hours": sum(((t.get("productive_s") or 0.0)
                                     + (t.get("eval_s") or 0.0))
                                    * float(t.get("devices") or 1) for t in trials) / 3600.0,
        "allocated_gpu_hours": allocated,
        "gpu_hours": allocated,
    }


def replay_sweep(store: Any, sweep_id: int, *, width: int | None = None,
                 changes: ReplayChanges | None = None) -> dict[str, Any]:
    """Replay a recorded sweep's proxy widths under another (or the same) scheduler.

    Returns ``{"sweep_id", "widths": [{"width", "replayed", "original", "matches_original"}]}``
    (``matches_original`` None on the simulated clock).

    Raises:
        StoreError: unknown sweep, or no proxy sweep at ``width``.
        SearchError: settings out of range."""
    changes = changes or ReplayChanges()
    changes.check()
    rows = store.sweep_rows(sweep_id)
    proxies = [p for p in rows["proxy_sweeps"] if width is None or p["width"] == width]
    if not proxies:
        have = sorted(p["width"] for p in rows["proxy_sweeps"])
        raise StoreError(f"sweep {sweep_id} has no proxy sweep at width {width} "
                         f"(widths: {have})")
    return {"sweep_id": sweep_id,
            "widths": [_replay_width(rows, p, changes) for p in proxies]}


#: The caption under ``mutune replay``'s table: what ×N and each GPU-hours column mean.
REPLAY_CAPTION = ("×N: N trials at once (concurrency: the simulated workers); GPU-hours: "
                  "productive (training + evaluation) device-hours, the only time a replay "
                  "can price; allocated (original only): what the original sweep held, "
                  "start-up and idle included; a replay with censored trials bills them "
                  "only to their last recorded report, so its hours are a lower bound; best "
                  "value @ rung: the best trial's value at the rung (steps) it was chosen at — "
                  "compare values only at equal rungs")


def render_replay(result: Mapping[str, Any], console: Any) -> None:
    """Print :func:`replay_sweep`'s result as a rich table, replay beside original per width."""
    from rich.table import Table

    def fmt(x: Any, spec: str = ".4g") -> str:
        return "—" if x is None else format(x, spec)

    def cfg(best: Mapping[str, Any] | None) -> str:
        if not best:
            return "—"
        return " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in sorted(best["config"].items()))

    def sched(st: Mapping[str, Any]) -> str:
        return (f"{st['kind']} r={st['grace_period']} η={st['reduction_factor']} "
                f"max_t={st['max_t']} ×{st['concurrency']}")

    table = Table(title=f"Replay of sweep {result['sweep_id']}", caption=REPLAY_CAPTION)
    def best_at(best: Mapping[str, Any] | None) -> str:
        if not best:
            return "—"
        at = best.get("milestone")
        return fmt(best["value"]) + ("" if at is None else f" @ {at}")

    for col in ("width", "run", "scheduler", "best config", "best value @ rung", "decisions",
                "stops", "GPU-hours (productive)", "allocated GPU-hours (original only)",
                "missing data"):
        table.add_column(col, justify="right" if "GPU-hours" in col else "left")
    for w in result["widths"]:
        r, o = w["replayed"], w["original"]
        size = f"{w['width']} × {w['depth']}" if w.get("depth") else str(w["width"])
        table.add_row(size, "original", sched(o["settings"]),
                      cfg(o["best"]), best_at(o["best"]),
                      str(o["decisions"]), str(o["stops"]),
                      fmt(o.get("productive_gpu_hours"), ".6f"),
                      fmt(o.get("allocated_gpu_hours", o.get("gpu_hours")), ".6f"), "")
        md = r["missing_data"]
        match = {True: " ✓ matches", False: " ✗ differs", None: ""}[w["matches_original"]]
        table.add_row("", f"replay ({r['method']}){match}", sched(r["settings"]),
                      cfg(r["best"]), best_at(r["best"]),
                      str(r["decisions"]), str(r["stops"]),
                      fmt(r.get("productive_gpu_hours", r.get("gpu_hours")), ".6f"), "—",
                      f"{md['decisions']} censored" if md["decisions"] else "0")
    console.print(unclipped(table))
    treated = [w["replayed"]["missing_data"] for w in result["widths"]
               if w["replayed"]["missing_data"]["decisions"]]
    if treated:
        console.print(f"missing data: {treated[0]['treatment']}")
