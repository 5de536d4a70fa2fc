"""What ran, as terminal tables: ``mutune list``, ``mutune show`` and ``mutune logs``.

Each function takes plain rows read from the store (:meth:`Store.sweep_summaries`,
:meth:`Store.sweep_rows`, :meth:`Store.trial_log`) and prints them on a rich console; nothing
here opens the database.
"""
from __future__ import annotations

from typing import Any

__all__ = ["render_sweep_list", "render_sweep", "render_trial_log"]


def _time(iso: str | None) -> str:
    return "—" if not iso else iso[:19].replace("T", " ")


def _last_loss(trial: dict[str, Any]) -> str:
    reports = trial.get("reports") or []
    if not reports:
        return "—"
    v = reports[-1]["metrics"].get("val_loss")
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return str(v)


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
        t.add_row(str(s["id"]), s["name"], str(s.get("family") or "—"), status,
                  f"{widths} → {s.get('target_width') or '—'}",
                  f"{s['trials']}" + (f" ({counts})" if counts else ""),
                  f"{s['gpu_hours']:.6f}", _time(s["created_at"]), _time(s["finished_at"]))
    console.print(t)


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
                  f"{cfg.get('widths')} → target {(cfg.get('target') or {}).get('width')}, "
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
    for col in ("trial", "kind", "width", "status", "steps", "last val loss", "config",
                "reason"):
        t.add_column(col, justify="right" if col in ("trial", "width", "steps") else "left")
    for tr in rows["trials"]:
        conf = " ".join(f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}={v}"
                        for k, v in sorted((tr.get("config") or {}).items()))
        t.add_row(str(tr["id"]), tr["kind"], str(tr["width"]), tr["status"],
                  str(tr.get("steps") if tr.get("steps") is not None else "—"),
                  _last_loss(tr), conf, tr.get("reason") or "")
    console.print(t)


def render_trial_log(log: dict[str, Any], console: Any) -> None:
    """A trial's status line, then its stdout, stderr and traceback (each only when present)."""
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
            console.rule(name)
            console.print(text.rstrip("\n"), markup=False, highlight=False)
    if not any(log.get(n) for n in ("stdout", "stderr", "traceback")):
        console.print("(the trial wrote nothing to stdout or stderr)")
