"""What ran, as terminal tables: ``mutune list``, ``mutune show`` and ``mutune logs``.

Each function takes plain rows read from the store (:meth:`Store.sweep_summaries`,
:meth:`Store.sweep_rows`, :meth:`Store.trial_log`) and prints them on a rich console
(:func:`sweep_overview` returns ``mutune show --json``'s data instead); nothing here opens the
database.
"""
from __future__ import annotations

from typing import Any

from mutune.services.report.formatting import unclipped

__all__ = ["render_sweep_list", "render_sweep", "sweep_overview", "trial_depths",
           "render_trial_log", "RULE_WIDTH"]

#: Widest a section rule of ``mutune logs`` is drawn (characters): a console that is not a
#: terminal is very wide so that no table is cut, and a rule must not span all of it.
RULE_WIDTH = 100


def _time(iso: str | None) -> str:
    return "—" if not iso else iso[:19].replace("T", " ")


def _last_value(trial: dict[str, Any]) -> float | str | None:
    """The last report's validation loss: a float (NaN included), the stored value when it is
    not a number, None without reports."""
    reports = trial.get("reports") or []
    if not reports:
        return None
    v = reports[-1]["metrics"].get("val_loss")
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _last_loss(trial: dict[str, Any]) -> str:
    v = _last_value(trial)
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def render_sweep_list(sweeps: list[dict[str, Any]], console: Any) -> None:
    """One row per sweep (newest first): id, name, model family, status, widths → target,
    trials (by status), GPU-hours, start and end (UTC)."""
    from rich.table import Table

    if not sweeps:
        console.print("no sweeps in this database")
        return
    t = Table(title="Sweeps")
    for col in ("id", "name", "model", "status", "widths → target", "trials", "GPU-hours",
                "started (UTC)", "finished (UTC)"):
        t.add_column(col, justify="right" if col in ("id", "GPU-hours") else "left")
    for s in sweeps:
        status = s["status"] + (" (cancel requested)" if s.get("cancel_requested")
                                and s["status"] == "running" else "")
        counts = ", ".join(f"{n} {k}" for k, n in sorted(s["trials_by_status"].items()))
        widths = "/".join(str(w) for w in s.get("widths") or []) or "—"
        target = str(s.get("target_width") or "—")
        if s.get("depths") and len(s["depths"]) > 1:     # a depth ladder: width × depth
            widths += " × depth " + "/".join(str(d) for d in s["depths"])
            target += f" × {s.get('target_depth')}"
        t.add_row(str(s["id"]), s["name"], str(s.get("family") or "—"), status,
                  f"{widths} → {target}",
                  f"{s['trials']}" + (f" ({counts})" if counts else ""),
                  f"{s['gpu_hours']:.6f}", _time(s["created_at"]), _time(s["finished_at"]))
    console.print(unclipped(t))


def render_sweep(rows: dict[str, Any], console: Any) -> None:
    """A sweep's status, reason, model, provenance summary and every trial (id, kind, width,
    status, steps, last validation loss, hyperparameters, reason)."""
    from rich.table import Table

    sw = rows["sweep"]
    cfg = sw.get("config") or {}
    console.print(f"[bold]sweep {sw['id']}[/] {sw['name']}: {sw['status']}"
                  + (f" — {sw['reason']}" if sw.get("reason") else ""), highlight=False)
    model = cfg.get("model") or {}
    console.print(f"model {model.get('family')} ({model.get('parametrization', '—')}), widths "
                  f"{cfg.get('widths')}"
                  + (f" × depths {cfg['depths']}" if cfg.get("depths") else "")
                  + f" → target {(cfg.get('target') or {}).get('width')}"
                  + (f" × depth {cfg['target']['depth']}"
                     if (cfg.get("target") or {}).get("depth") else "") + ", "
                  f"seed {sw['seed']}; started {_time(sw['created_at'])}, finished "
                  f"{_time(sw['finished_at'])} (UTC)", highlight=False)
    prov = rows.get("provenance") or {}
    if prov:
        pk = prov.get("packages") or {}
        pkgs = ", ".join(f"{k} {v}" for k, v in sorted(pk.items()) if v)
        console.print(f"provenance: {pkgs}; git {prov.get('git_revision') or '—'}; "
                      f"dataset {(prov.get('dataset') or {}).get('fingerprint', '—')}",
                      highlight=False)
    t = Table(title="Trials (mutune logs TRIAL_ID for a trial's output)")
    depth_of = trial_depths(rows)
    size_col = "width × depth" if depth_of else "width"
    for col in ("trial", "kind", size_col, "status", "steps", "last val loss", "config",
                "reason"):
        t.add_column(col, justify="right" if col in ("trial", size_col, "steps") else "left")
    for tr in rows["trials"]:
        conf = " ".join(f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}={v}"
                        for k, v in sorted((tr.get("config") or {}).items()))
        size = str(tr["width"]) + (f" × {depth_of[tr['id']]}" if tr["id"] in depth_of else "")
        t.add_row(str(tr["id"]), tr["kind"], size, tr["status"],
                  str(tr.get("steps") if tr.get("steps") is not None else "—"),
                  _last_loss(tr), conf, tr.get("reason") or "")
    console.print(unclipped(t))


def trial_depths(rows: dict[str, Any]) -> dict[int, int]:
    """Trial id → its model's depth on a depth ladder (its proxy sweep's depth; the target's
    ``target.depth``); empty for a sweep at one depth."""
    cfg = rows["sweep"].get("config") or {}
    if not cfg.get("depths") or len(cfg["depths"]) < 2:
        return {}
    ps_depth = {p["id"]: (p.get("settings") or {}).get("depth") for p in rows["proxy_sweeps"]}
    out = {}
    for tr in rows["trials"]:
        d = (ps_depth.get(tr.get("proxy_sweep_id")) if tr["kind"] != "target"
             else (cfg.get("target") or {}).get("depth"))
        if d is not None:
            out[tr["id"]] = int(d)
    return out


def sweep_overview(rows: dict[str, Any]) -> dict[str, Any]:
    """What :func:`render_sweep` shows, as data (``mutune show --json``).

    Args:
        rows: :meth:`Store.sweep_rows` of one sweep.
    Returns:
        {"sweep": {"id", "name", "project", "status", "reason", "seed", "created_at",
        "finished_at", "cancel_requested_at", "family", "parametrization", "widths",
        "target_width"}, "provenance": {…}, "gpu_hours": Σ allocated_s × devices / 3600 over
        the trials, "trials": [{"id", "key", "kind", "width", ("depth" on a depth ladder),
        "status", "reason", "steps",
        "last_val_loss" (nats; None without reports), "config", "seed", "allocated_s",
        "productive_s", "eval_s", "devices", "device_kind", "started_at", "finished_at"}]};
        times are ISO-8601 strings (UTC), seconds are wall-clock seconds.
    """
    sw = rows["sweep"]
    cfg = sw.get("config") or {}
    model = cfg.get("model") or {}
    sweep = {k: sw.get(k) for k in ("id", "name", "project", "status", "reason", "seed",
                                    "created_at", "finished_at", "cancel_requested_at")}
    sweep.update(family=model.get("family"), parametrization=model.get("parametrization"),
                 widths=cfg.get("widths"), target_width=(cfg.get("target") or {}).get("width"))
    depth_of = trial_depths(rows)
    trials = [{**{k: tr.get(k) for k in ("id", "key", "kind", "width", "status", "reason",
                                          "steps")},
               **({"depth": depth_of[tr["id"]]} if tr["id"] in depth_of else {}),
               "last_val_loss": _last_value(tr),
               **{k: tr.get(k) for k in ("config", "seed", "allocated_s", "productive_s",
                                         "eval_s", "devices", "device_kind", "started_at",
                                         "finished_at")}}
              for tr in rows["trials"]]
    gpu_hours = sum((t.get("allocated_s") or 0.0) * (t.get("devices") or 1)
                    for t in rows["trials"]) / 3600.0
    return {"sweep": sweep, "provenance": rows.get("provenance") or {}, "gpu_hours": gpu_hours,
            "trials": trials}


def render_trial_log(log: dict[str, Any], console: Any) -> None:
    """A trial's status line, then its stdout, stderr and traceback (each only when present,
    under a rule at most :data:`RULE_WIDTH` wide)."""
    from rich.rule import Rule

    console.print(f"[bold]trial {log['id']}[/] of sweep {log['sweep_id']} ({log['kind']}, "
                  f"width {log['width']}): {log['status']}"
                  + (f" — {log['reason']}" if log.get("reason") else ""), highlight=False)
    if not log.get("logged"):
        console.print("no output recorded for this trial (still running, or it never "
                      "started)")
        return
    for name in ("stdout", "stderr", "traceback"):
        text = log.get(name)
        if text:
            console.print(Rule(name), width=min(console.width, RULE_WIDTH))
            console.print(text.rstrip("\n"), markup=False, highlight=False)
    if not any(log.get(n) for n in ("stdout", "stderr", "traceback")):
        console.print("(the trial wrote nothing to stdout or stderr)")
