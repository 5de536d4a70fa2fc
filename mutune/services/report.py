"""The one report renderer: report.json, the terminal table and the plot, all from DB rows.

``build_report`` turns :meth:`mutune.services.store.Store.sweep_rows` output into the
``report.json`` contract of DESIGN.md §11; ``render_report`` prints it as rich tables;
``plot_loss_vs_lr`` draws validation loss at each width's chosen rung against log2 learning rate.
The main job, ``mutune report`` and any later dashboard call these same functions.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["build_report", "render_report", "write_report_json", "plot_loss_vs_lr"]

_COST_KEYS = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
              "naive_grid_gpu_hours", "saved_gpu_hours", "saved_fraction", "ettr")


def _f(v: Any) -> float | None:
    """Floats stay floats; the store's "nan"/"inf" strings come back as floats; None stays."""
    return None if v is None else float(v)


def build_report(rows: dict[str, Any]) -> dict[str, Any]:
    """``report.json`` (DESIGN.md §11) from a sweep's rows.

    Args:
        rows: ``Store.sweep_rows(sweep_id)``.
    Returns:
        {"sweep_id", "name", "status", "device_kind", "proxies": [...], "rules": [...],
         "target": {...} or None, "cost": {...}}; GPU-hours in hours, losses in nats.
    """
    sweep = rows["sweep"]
    trials = {t["id"]: t for t in rows["trials"]}
    proxies = []
    for ps in sorted(rows["proxy_sweeps"], key=lambda p: p["width"]):
        best = ps.get("best") or {}
        n = sum(1 for t in trials.values() if t["proxy_sweep_id"] == ps["id"])
        proxies.append({"width": ps["width"], "best_config": best.get("config"),
                        "best_val_loss": _f(best.get("val_loss")),
                        "chosen_rung": best.get("milestone"),
                        "best_trial_id": best.get("trial_id"), "trials": n})
    rules = []
    for r in rows["rules"]:
        d = r.get("data") or {}
        rules.append({"hyperparameter": r["hyperparameter"], "slope": _f(r["slope"]),
                      "intercept": _f(r["intercept"]),
                      "transferred_value": _f(d.get("transferred_value")),
                      "formula": d.get("formula"), "widths": d.get("widths"),
                      "optima": d.get("optima")})
    target = None
    if rows.get("target"):
        t = rows["target"]
        target = {"width": t["width"], "config": t["config"], "val_loss": _f(t["val_loss"]),
                  "status": t["status"]}
    ledger = {e["name"]: e for e in rows["ledger"] if e["scope"] == "sweep"}
    cost: dict[str, Any] = {}
    for key in _COST_KEYS:
        if key in ledger:
            cost[key] = _f(ledger[key]["value"])
    if "naive_gpu_hours" in ledger:
        cost["naive_formula"] = ledger["naive_gpu_hours"]["formula"]
        cost["naive_inputs"] = ledger["naive_gpu_hours"]["inputs"]
    if "naive_grid_gpu_hours" in ledger:
        cost["naive_grid_formula"] = ledger["naive_grid_gpu_hours"]["formula"]
    kinds = sorted({t["device_kind"] for t in trials.values() if t.get("device_kind")})
    device_kind = kinds[0] if len(kinds) == 1 else ",".join(kinds) or None
    cost["device_kind"] = device_kind
    return {"sweep_id": sweep["id"], "name": sweep["name"], "status": sweep["status"],
            "device_kind": device_kind, "proxies": proxies, "rules": rules,
            "target": target, "cost": cost}


def write_report_json(report: dict[str, Any], path: Path) -> Path:
    """Write ``report`` as indented JSON (non-finite floats as null); returns ``path``."""
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(report), indent=2, sort_keys=False) + "\n",
                    encoding="utf-8")
    return path


def _num(v: Any, fmt: str = ".4g") -> str:
    return "—" if v is None else format(v, fmt)


def render_report(report: dict[str, Any], console: Any) -> None:
    """Print ``report`` on a rich ``console``: per-width best, rules, target, cost lines."""
    from rich.table import Table

    console.print(f"[bold]mutune sweep {report['sweep_id']}[/] ({report['name']}, "
                  f"{report['status']}, device kind: {report['device_kind']})")
    t = Table(title="Proxy sweeps: best trial at the highest rung with ≥ 3 trials")
    for col in ("width", "trials", "rung (steps)", "best val loss (nats)", "best config"):
        t.add_column(col, justify="right" if col != "best config" else "left")
    for p in report["proxies"]:
        cfg = " ".join(f"{k}={v:.4g}" for k, v in sorted((p["best_config"] or {}).items()))
        t.add_row(str(p["width"]), str(p["trials"]), str(p["chosen_rung"]),
                  _num(p["best_val_loss"]), cfg)
    console.print(t)
    r = Table(title="Transfer rules: log h*(w) = a + b·log w")
    for col in ("hyperparameter", "a", "b (slope)", "transferred value"):
        r.add_column(col, justify="right")
    for rule in report["rules"]:
        r.add_row(rule["hyperparameter"], _num(rule["intercept"]), _num(rule["slope"]),
                  _num(rule["transferred_value"]))
    console.print(r)
    for rule in report["rules"]:
        if rule.get("formula"):
            console.print(f"rule: {rule['formula']}  →  {rule['hyperparameter']} at the target "
                          f"= {_num(rule['transferred_value'])}", highlight=False)
    tg = report.get("target")
    if tg:
        cfg = " ".join(f"{k}={v:.4g}" for k, v in sorted(tg["config"].items()))
        console.print(f"Target run: width {tg['width']}, {cfg}: final val loss "
                      f"{_num(tg['val_loss'])} nats ({tg['status']})")
    c = report["cost"]
    ct = Table(title=f"Cost (GPU-hours; device kind {c.get('device_kind')})")
    ct.add_column("line")
    ct.add_column("value", justify="right")
    for key, label in (("proxy_gpu_hours", "proxy sweeps"), ("target_gpu_hours", "target run"),
                       ("total_gpu_hours", "total"),
                       ("naive_gpu_hours", "naive: same search at target size"),
                       ("naive_grid_gpu_hours", "naive: every sample to max_t"),
                       ("saved_gpu_hours", "saved vs naive"),
                       ("saved_fraction", "saved fraction"), ("ettr", "ETTR")):
        if key in c:
            fmt = ".1%" if key in ("saved_fraction", "ettr") else ".6f"
            ct.add_row(label, _num(c[key], fmt))
    console.print(ct)
    if c.get("naive_formula"):
        console.print(f"naive = {c['naive_formula']}")


def plot_loss_vs_lr(rows: dict[str, Any], path: Path) -> Path:
    """PNG of validation loss against log2 learning rate, one colour per width: left, at the
    first rung (every trial that reported); right, at each width's chosen rung (the one its best
    configuration was picked at). Values are the ones the scheduler judged there (scheduler
    events); diverged trials are left out. Log-scale loss axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = {t["id"]: t for t in rows["trials"]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ps in sorted(rows["proxy_sweeps"], key=lambda p: p["width"]):
        events = [e for e in rows["events"]
                  if trials.get(e["trial_id"], {}).get("proxy_sweep_id") == ps["id"]
                  and e["value"] is not None and math.isfinite(float(e["value"]))]
        if not events:
            continue
        first = min(e["milestone"] for e in events)
        chosen = (ps.get("best") or {}).get("milestone", first)
        for ax, m in ((axes[0], first), (axes[1], chosen)):
            pts = sorted((math.log2(float(trials[e["trial_id"]]["config"]["lr"])),
                          float(e["value"])) for e in events if e["milestone"] == m)
            ax.plot(*zip(*pts), "o", ms=5, alpha=0.8,
                    label=f"width {ps['width']} (rung {m})")
    for ax, title in ((axes[0], "first rung: every trial"),
                      (axes[1], "chosen rung (highest with ≥ 3 trials)")):
        ax.set_xlabel("log2 learning rate")
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("validation loss (nats)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
