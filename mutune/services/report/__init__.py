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

import numpy as np

from mutune._json import json_safe

__all__ = ["build_report", "render_report", "write_report_json", "plot_loss_vs_lr",
           "plot_transfer"]

_COST_KEYS = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
              "naive_grid_gpu_hours", "saved_gpu_hours", "saved_fraction", "ettr", "mfu",
              "held_gpu_hours", "useful_gpu_hours", "gpu_hours_per_trial",
              "cost_to_final_metric_gpu_hours", "price_per_hour", "total_money",
              "naive_money", "saved_money", "repeated_steps", "checkpoint_bytes_written",
              "checkpoint_bytes_kept")


def _f(v: Any) -> float | None:
    """Floats stay floats; the store's "nan"/"inf" strings come back as floats; None stays."""
    return None if v is None else float(v)


def _live_proxy_sweeps(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The proxy sweeps a report shows: all but those ``interrupted`` by a dead server (their
    width was swept again under the same sweep id; their rows stay in the database)."""
    return [p for p in rows["proxy_sweeps"] if p.get("status") != "interrupted"]


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
    rows = {**rows, "proxy_sweeps": _live_proxy_sweeps(rows)}
    proxies = []
    for ps in sorted(rows["proxy_sweeps"], key=lambda p: p["width"]):
        best = ps.get("best") or {}
        n = sum(1 for t in trials.values() if t["proxy_sweep_id"] == ps["id"])
        proxies.append({"width": ps["width"], "best_config": best.get("config"),
                        "best_val_loss": _f(best.get("val_loss")),
                        "chosen_rung": best.get("milestone"),
                        "best_trial_id": best.get("trial_id"), "trials": n})
    for p, ps in zip(proxies, sorted(rows["proxy_sweeps"], key=lambda p: p["width"])):
        opt = (ps.get("best") or {}).get("optimum")
        if opt:
            p["optimum"] = {"milestone": opt.get("milestone"), "method": opt.get("method"),
                            "values": opt.get("optimum"), "intervals": opt.get("interval"),
                            "on_edge": opt.get("on_edge"), "horizon": opt.get("horizon"),
                            "trial_ids": opt.get("trial_ids"),
                            "fallback_reason": opt.get("fallback_reason")}
    rules = []
    for r in rows["rules"]:
        d = r.get("data") or {}
        rule = {"hyperparameter": r["hyperparameter"], "slope": _f(r["slope"]),
                "intercept": _f(r["intercept"]),
                "transferred_value": _f(d.get("value_after_adjustments",
                                              d.get("transferred_value"))),
                "formula": d.get("formula"), "widths": d.get("widths"),
                "optima": d.get("optima")}
        for key in ("verdict", "reason", "advice", "optimum_source", "published_adjustments",
                    "outside_searched_range", "transfer_form"):
            if key in d:
                rule[key] = d[key]
        for key in ("slope_interval", "transferred_interval"):
            if d.get(key) is not None:
                rule[key] = [_f(v) for v in d[key]]
        if d.get("optima_intervals") is not None:
            rule["optima_intervals"] = [[_f(v) for v in iv] for iv in d["optima_intervals"]]
        if "published_adjustments" in d:
            rule["rule_value"] = _f(d.get("transferred_value"))
        rules.append(rule)
    law = next((x["data"] for x in rows.get("laws", []) if x["kind"] == "loss_vs_params"),
               None)
    target = None
    if rows.get("target"):
        t = rows["target"]
        target = {"width": t["width"], "config": t["config"], "val_loss": _f(t["val_loss"]),
                  "status": t["status"]}
        if law and law.get("predicted_val_loss") is not None:
            target["predicted_val_loss"] = _f(law["predicted_val_loss"])
            target["predicted_val_loss_interval"] = [
                _f(v) for v in law["predicted_val_loss_interval"]]
        elif law and law.get("error"):
            target["predicted_val_loss_error"] = law["error"]
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
    for key in ("mfu", "held_gpu_hours"):
        if key in ledger and ledger[key].get("formula"):
            cost[f"{key}_formula"] = ledger[key]["formula"]
            cost[f"{key}_inputs"] = ledger[key]["inputs"]
    if "price_per_hour" in ledger:
        cost["currency"] = ledger["price_per_hour"]["unit"].split("/")[0]
    waste = {e["name"]: _f(e["value"]) for e in rows["ledger"] if e["scope"] == "waste"}
    if waste:
        cost["waste_gpu_hours"] = waste
    cfg = sweep.get("config") or {}
    cost["project"] = sweep.get("project")
    cost["owner"] = (cfg.get("cost") or {}).get("owner")
    cost["pricing"] = (cfg.get("cost") or {}).get("pricing")
    # every recorded trial's allocated device-seconds: what a cancelled or budget-cut sweep
    # spent, too (its ledger lines are never written)
    budget = (sweep.get("config") or {}).get("budget") or {}
    caps = [c for c in (budget.get("gpu_hours"),
                        budget["money"] / budget["price_per_hour"]
                        if budget.get("money") and budget.get("price_per_hour") else None)
            if c is not None]
    if caps:
        cost["budget_gpu_hours"] = min(caps)
    if budget.get("price_per_hour") and cost.get("price_per_hour") is None:
        cost["price_per_hour"] = budget["price_per_hour"]
    cost["spent_gpu_hours"] = sum((t.get("allocated_s") or 0.0) * (t.get("devices") or 1)
                                  for t in trials.values()) / 3600.0
    kinds = sorted({t["device_kind"] for t in trials.values() if t.get("device_kind")})
    device_kind = kinds[0] if len(kinds) == 1 else ",".join(kinds) or None
    cost["device_kind"] = device_kind
    out = {"sweep_id": sweep["id"], "name": sweep["name"], "status": sweep["status"],
           "reason": sweep.get("reason"), "device_kind": device_kind, "proxies": proxies,
           "rules": rules, "target": target, "cost": cost}
    if law is not None:
        out["loss_law"] = {k: law.get(k) for k in ("form", "identifiable", "intervals",
                                                    "n_params", "losses", "target_params",
                                                    "error") if k in law}
        for k in ("E", "A", "alpha"):
            if k in law:
                out["loss_law"][k] = _f(law[k])
    return json_safe(out)


def write_report_json(report: dict[str, Any], path: Path) -> Path:
    """Write ``report`` as indented JSON (non-finite floats as null); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(report), indent=2) + "\n", encoding="utf-8")
    return path


def _num(v: Any, fmt: str = ".4g") -> str:
    return "—" if v is None else format(v, fmt)


def _interval(iv: Any) -> str:
    if not iv or any(v is None or not math.isfinite(float(v)) for v in iv):
        return "—"
    return f"[{float(iv[0]):.4g}, {float(iv[1]):.4g}]"


def render_report(report: dict[str, Any], console: Any) -> None:
    """Print ``report`` on a rich ``console``: per-width best, rules, target, cost lines.
    Free text (reasons, errors) is escaped, so a bracket in it is never taken as markup."""
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]mutune sweep {report['sweep_id']}[/] ({report['name']}, "
                  f"{report['status']}, device kind: {report['device_kind']})")
    if report["status"] in ("cancelled", "budget_exhausted", "failed"):
        console.print(f"[yellow]sweep {report['status']}:[/] {escape(report.get('reason') or '')} — "
                      "the tables show what was recorded before it ended", highlight=False)
    t = Table(title="Proxy sweeps: best trial at the highest rung with ≥ 3 trials")
    for col in ("width", "trials", "rung (steps)", "best val loss (nats)", "best config"):
        t.add_column(col, justify="right" if col != "best config" else "left")
    for p in report["proxies"]:
        cfg = " ".join(f"{k}={v:.4g}" for k, v in sorted((p["best_config"] or {}).items()))
        t.add_row(str(p["width"]), str(p["trials"]), str(p["chosen_rung"]),
                  _num(p["best_val_loss"]), cfg)
    console.print(t)
    o = Table(title="Optimum per width: local quadratic in log space (95 % bootstrap interval)")
    for col in ("width", "rung (steps)", "trials fitted", "method", "optimum", "lr at target "
                "steps (short-horizon fit)"):
        o.add_column(col, justify="right" if col != "optimum" else "left")
    for p in report["proxies"]:
        opt = p.get("optimum")
        if not opt:
            continue
        vals = " ".join(f"{k}={v:.4g} {_interval((opt.get('intervals') or {}).get(k))}"
                        for k, v in sorted((opt.get("values") or {}).items()))
        hz = opt.get("horizon") or {}
        hz_text = (f"{hz['extrapolated_lr']:.4g} (at the rung: {hz['highest_rung_lr']:.4g})"
                   if hz.get("extrapolated_lr") is not None else "—")
        o.add_row(str(p["width"]), str(opt.get("milestone")),
                  str(len(opt.get("trial_ids") or [])), str(opt.get("method")), vals, hz_text)
    console.print(o)
    r = Table(title="Transfer rules: log h*(w) = a + b·log w (95 % intervals)")
    for col in ("hyperparameter", "a", "b (slope)", "b interval", "transferred value",
                "value interval", "verdict"):
        r.add_column(col, justify="right")
    for rule in report["rules"]:
        r.add_row(rule["hyperparameter"], _num(rule["intercept"]), _num(rule["slope"]),
                  _interval(rule.get("slope_interval")), _num(rule["transferred_value"]),
                  _interval(rule.get("transferred_interval")), rule.get("verdict", "—"))
    console.print(r)
    for rule in report["rules"]:
        if rule.get("formula"):
            flat = str(rule.get("transfer_form", "")).startswith("flat")
            console.print(f"fitted: {rule['formula']}"
                          + ("  (slope not resolved: not extrapolated)" if flat else ""),
                          highlight=False)
            console.print(f"  → {rule['hyperparameter']} at the target = "
                          f"{_num(rule['transferred_value'])}"
                          + (f" ({rule['transfer_form']})" if rule.get("transfer_form") else ""),
                          highlight=False)
        if rule.get("verdict"):
            console.print(f"  {rule['verdict']}: {escape(rule.get('reason') or '')}"
                          + (f" — {rule['advice']}" if rule.get("advice") else ""),
                          highlight=False)
        for adj in rule.get("published_adjustments") or []:
            console.print(f"  published rule: {adj['rule']}", highlight=False)
        if rule.get("outside_searched_range"):
            console.print(f"  [yellow]warning:[/] the transferred {rule['hyperparameter']} "
                          "lies outside the searched range", highlight=False)
    tg = report.get("target")
    if tg:
        cfg = " ".join(f"{k}={v:.4g}" for k, v in sorted(tg["config"].items()))
        console.print(f"Target run: width {tg['width']}, {cfg}: final val loss "
                      f"{_num(tg['val_loss'])} nats ({tg['status']})")
        law = report.get("loss_law") or {}
        if tg.get("predicted_val_loss") is not None:
            form = law.get("form", "")
            ident = "" if law.get("identifiable", True) else \
                " — E + A·N^-α not identifiable from these sizes; power-law fallback"
            console.print(f"  predicted before it ran (loss law {form} over the proxies"
                          f"{ident}): {_num(tg['predicted_val_loss'])} nats, 95 % interval "
                          f"{_interval(tg.get('predicted_val_loss_interval'))}",
                          highlight=False)
            iv = tg.get("predicted_val_loss_interval") or [None, None]
            if tg.get("val_loss") is not None and None not in iv and \
                    not iv[0] <= tg["val_loss"] <= iv[1]:
                side = "above" if tg["val_loss"] > iv[1] else "below"
                console.print(f"  [yellow]warning:[/] the actual loss lies {side} the predicted "
                              "interval: the proxies' loss-vs-size trend did not hold at the "
                              "target (few sizes, or a transferred setting that is off)",
                              highlight=False)
        elif tg.get("predicted_val_loss_error"):
            console.print(f"  no loss prediction: {escape(tg['predicted_val_loss_error'])}",
                          highlight=False)
    c = report["cost"]
    ct = Table(title=f"Cost (GPU-hours; device kind {c.get('device_kind')})")
    ct.add_column("line")
    ct.add_column("value", justify="right")
    for key, label in (("proxy_gpu_hours", "proxy sweeps"), ("target_gpu_hours", "target run"),
                       ("total_gpu_hours", "total"),
                       ("naive_gpu_hours", "naive: same search at target size"),
                       ("naive_grid_gpu_hours", "naive: every sample to max_t"),
                       ("saved_gpu_hours", "saved vs naive"),
                       ("saved_fraction", "saved fraction"), ("ettr", "ETTR"),
                       ("mfu", "MFU"), ("gpu_hours_per_trial", "per proxy trial"),
                       ("cost_to_final_metric_gpu_hours", "to reach the final metric"),
                       ("held_gpu_hours", "held by the sweep (wall × devices)"),
                       ("useful_gpu_hours", "useful"),
                       ("spent_gpu_hours", "spent: every recorded trial"),
                       ("budget_gpu_hours", "budget")):
        if key in c:
            fmt = ".1%" if key in ("saved_fraction", "ettr") else \
                ".3%" if key == "mfu" else ".6f"
            ct.add_row(label, _num(c[key], fmt))
    for cat, v in (c.get("waste_gpu_hours") or {}).items():
        ct.add_row(f"waste: {cat.replace('_', ' ')}", _num(v, ".6f"))
    if c.get("checkpoint_bytes_written") is not None:
        ct.add_row("checkpoints written / kept (MB)",
                   f"{c['checkpoint_bytes_written'] / 1e6:.3f} / "
                   f"{(c.get('checkpoint_bytes_kept') or 0) / 1e6:.3f}")
    cur = c.get("currency", "")
    for key, label in (("price_per_hour", f"price per device-hour ({c.get('pricing')})"),
                       ("total_money", "money spent"), ("naive_money", "money, naive"),
                       ("saved_money", "money saved")):
        if c.get(key) is not None:
            ct.add_row(label, f"{c[key]:.4f} {cur}")
    console.print(ct)
    if c.get("naive_formula"):
        console.print(f"naive = {c['naive_formula']}", highlight=False)
    if c.get("mfu_formula"):
        i = c.get("mfu_inputs") or {}
        console.print(f"MFU = {c['mfu_formula']}; peak {_num(i.get('peak_flops_per_device'), '.3g')}"
                      f" FLOP/s ({i.get('peak_source')})", highlight=False)
    if c.get("project") or c.get("owner"):
        console.print(f"billed to project {c.get('project')}, owner {c.get('owner')}",
                      highlight=False)
    if (c.get("price_per_hour") and c.get("spent_gpu_hours") is not None
            and c.get("total_money") is None):
        console.print(f"money spent: {c['spent_gpu_hours'] * c['price_per_hour']:.4f} at "
                      f"{c['price_per_hour']:g} per device-hour", highlight=False)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    for ps in sorted(_live_proxy_sweeps(rows), key=lambda p: p["width"]):
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
    return _save(fig, path)


def plot_transfer(report: dict[str, Any], path: Path) -> Path:
    """PNG: left, each rule's per-width optima with their 95 % intervals, the fitted line and
    the transferred value at the target width (with its interval); right, the loss law over
    the proxies with the target's predicted interval and its actual loss."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = report["rules"]
    fig, axes = plt.subplots(1, len(rules) + 1, figsize=(5 * (len(rules) + 1), 4.2))
    for ax, rule in zip(axes, rules):
        w = rule.get("widths") or []
        y = rule.get("optima") or []
        ivs = rule.get("optima_intervals")
        if ivs and all(v is not None for iv in ivs for v in iv):
            # a weighted-mean optimum can sit outside its percentile interval: clamp at 0
            err = [[max(yy - lo, 0) for yy, (lo, _) in zip(y, ivs)],
                   [max(hi - yy, 0) for yy, (_, hi) in zip(y, ivs)]]
            ax.errorbar(w, y, yerr=err, fmt="o", capsize=3, label="optimum per width")
        else:
            ax.plot(w, y, "o", label="optimum per width")
        tw = report["target"]["width"] if report.get("target") else max(w) * 4
        xs = np.geomspace(min(w), tw, 50)
        ax.plot(xs, np.exp(rule["intercept"] + rule["slope"] * np.log(xs)), "-", lw=1,
                label=f"fitted rule, b = {rule['slope']:.3g}")
        tv = rule.get("transferred_value")
        if tv is not None and str(rule.get("transfer_form", "")).startswith("flat"):
            ax.plot([max(w), tw], [tv, tv], "--", lw=1, label="transferred flat (μP)")
        tiv = rule.get("transferred_interval")
        if tv is not None:
            yerr = None
            if tiv and all(v is not None for v in tiv):
                yerr = [[max(tv - tiv[0], 0)], [max(tiv[1] - tv, 0)]]
            ax.errorbar([tw], [tv], yerr=yerr, fmt="*", ms=10, capsize=3, label="transferred")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("width")
        ax.set_title(f"{rule['hyperparameter']}: {rule.get('verdict', '')}")
        ax.legend(fontsize=7)
    ax = axes[-1]
    law = report.get("loss_law") or {}
    if law.get("n_params"):
        ax.plot(law["n_params"], law["losses"], "o", label="best loss per proxy")
        tg = report.get("target") or {}
        if tg.get("predicted_val_loss") is not None and all(
                v is not None for v in tg["predicted_val_loss_interval"]):
            lo, hi = tg["predicted_val_loss_interval"]
            ax.errorbar([law["target_params"]], [tg["predicted_val_loss"]],
                        yerr=[[max(tg["predicted_val_loss"] - lo, 0)],
                              [max(hi - tg["predicted_val_loss"], 0)]],
                        fmt="s", capsize=3, label="predicted (target)")
        if tg.get("val_loss") is not None:
            ax.plot([law["target_params"]], [tg["val_loss"]], "*", ms=12, label="actual")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("parameters N")
        ax.set_ylabel("validation loss (nats)")
        ax.set_title("loss law: predicted vs actual target loss")
        ax.legend(fontsize=7)
    return _save(fig, path)


#: Ledger figures summed per project by :func:`project_costs` (GPU-hours and money).
_SUMMED = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
           "saved_gpu_hours", "total_money", "naive_money", "saved_money")


def project_costs(sweeps: list[dict[str, Any]],
                  costs: dict[int, dict[str, float | None]]) -> list[dict[str, Any]]:
    """Sum the ledger across sweeps per project (``mutune report --by project``).

    Args:
        sweeps: sweep rows (``id``, ``project``, ``status``), as ``Store.list_sweeps``.
        costs: sweep id → sweep-scope ledger figures, as ``Store.sweep_costs``.
    Returns:
        One row per project (None: sweeps without a project), sorted by name: ``project``,
        ``sweeps``, ``priced_sweeps`` (sweeps with a ledger), the sums of
        :data:`_SUMMED` (GPU-hours; money in the sweeps' currency; a money sum is None
        when no sweep was priced), and ``saved_fraction`` = Σ saved / Σ naive.
    """
    rows: dict[Any, dict[str, Any]] = {}
    for sw in sweeps:
        r = rows.setdefault(sw.get("project"), {"project": sw.get("project"), "sweeps": 0,
                                                "priced_sweeps": 0,
                                                **{k: None for k in _SUMMED}})
        r["sweeps"] += 1
        c = costs.get(sw["id"])
        if not c or c.get("total_gpu_hours") is None:
            continue
        r["priced_sweeps"] += 1
        for k in _SUMMED:
            if c.get(k) is not None:
                r[k] = (r[k] or 0.0) + float(c[k])
    for r in rows.values():
        naive, saved = r["naive_gpu_hours"], r["saved_gpu_hours"]
        r["saved_fraction"] = saved / naive if naive and saved is not None else None
    return sorted(rows.values(), key=lambda r: (r["project"] is None, r["project"] or ""))


def render_project_costs(rows: list[dict[str, Any]], console: Any) -> None:
    """Print :func:`project_costs` as a rich table."""
    from rich.table import Table

    t = Table(title="Cost by project (GPU-hours)")
    for col in ("project", "sweeps", "priced", "proxy", "target", "total", "naive", "saved",
                "saved %", "money", "money saved"):
        t.add_column(col, justify="left" if col == "project" else "right")
    for r in rows:
        t.add_row(r["project"] or "(none)", str(r["sweeps"]), str(r["priced_sweeps"]),
                  *(_num(r[k], ".6f") for k in ("proxy_gpu_hours", "target_gpu_hours",
                                                  "total_gpu_hours", "naive_gpu_hours",
                                                  "saved_gpu_hours")),
                  _num(r["saved_fraction"], ".1%"), _num(r["total_money"], ".4f"),
                  _num(r["saved_money"], ".4f"))
    console.print(t)
