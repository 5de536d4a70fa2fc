"""What ``report.json`` holds (docs/architecture.md §11), built from a sweep's database rows.

``build_report`` turns :meth:`mutune.services.store.Store.sweep_rows` output into the
``report.json`` dict that ``mutune report``, ``mutune report --json``, the main job and the
dashboard all show; ``write_report_json`` writes it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mutune._json import json_safe

__all__ = ["build_report", "write_report_json", "live_proxy_sweeps", "COST_KEYS"]

#: Sweep-scope ledger lines copied into ``report["cost"]`` (GPU-hours, fractions, money,
#: bytes), docs/architecture.md §6.
COST_KEYS = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
             "naive_replicates_gpu_hours", "naive_grid_gpu_hours", "saved_gpu_hours",
             "saved_fraction", "ideal_saved_fraction", "spent_flops", "naive_flops",
             "saved_flops_fraction", "ideal_saved_flops_fraction", "ettr", "trial_ettr",
             "sweep_ettr", "mfu",
             "held_gpu_hours", "useful_gpu_hours", "gpu_hours_per_trial",
             "cost_to_final_metric_gpu_hours", "price_per_hour", "total_money",
             "naive_money", "saved_money", "repeated_steps", "preemptions", "recovery_s",
             "upload_s", "checkpoint_bytes_written",
             "checkpoint_bytes_kept", "target_devices", "target_samples_per_s",
             "target_samples_per_device_s")


def _f(v: Any) -> float | str | None:
    """Floats stay floats; the store's "nan"/"inf" strings come back as floats; None stays;
    any other string is a categorical knob's name (``cosine``) and stays a string."""
    if v is None or (isinstance(v, str) and v not in ("nan", "inf", "-inf")):
        return v
    return float(v)


def live_proxy_sweeps(rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The proxy sweeps a report shows: all but those ``interrupted`` by a dead server (their
    width was swept again under the same sweep id; their rows stay in the database).

    Args:
        rows: ``Store.sweep_rows(sweep_id)``.
    Returns:
        The rows of ``rows["proxy_sweeps"]`` whose status is not ``interrupted``, in order.
    """
    return [p for p in rows["proxy_sweeps"] if p.get("status") != "interrupted"]


def _check(rows: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The data of the sweep's check of ``kind`` (``preflight``, ``gate``, ``importance``,
    ``target_watch``: :class:`~mutune.checks.CheckRecord`), or None."""
    found = [x["data"] for x in rows.get("checks", []) if x["kind"] == kind]
    return found[-1] if found else None


def build_report(rows: dict[str, Any]) -> dict[str, Any]:
    """``report.json`` (docs/architecture.md §11) from ``Store.sweep_rows(sweep_id)``;
    GPU-hours in hours, losses in nats."""
    sweep = rows["sweep"]
    trials = {t["id"]: t for t in rows["trials"]}
    rows = {**rows, "proxy_sweeps": live_proxy_sweeps(rows)}
    law = next((x["data"] for x in rows.get("laws", []) if x["kind"] == "loss_vs_params"),
               None)
    cost = _ledger_cost(rows)
    _add_budget_cost(cost, sweep, trials)
    out = {"sweep_id": sweep["id"], "name": sweep["name"], "status": sweep["status"],
           "reason": sweep.get("reason"), "device_kind": cost["device_kind"],
           "proxies": _proxies(rows, trials), "rules": [_rule(r) for r in rows["rules"]],
           "target": _target(rows, trials, law) if rows.get("target") else None, "cost": cost}
    for kind in ("gate", "importance", "preflight"):
        row = _check(rows, kind)
        if row is not None:
            out[kind] = row
    if law is not None:
        out["loss_law"] = {k: law.get(k) for k in ("form", "identifiable", "intervals",
                                                    "n_params", "losses", "target_params",
                                                    "error", "falls_with_size", "rungs")
                           if k in law}
        for k in ("E", "A", "alpha"):
            if k in law:
                out["loss_law"][k] = _f(law[k])
    return json_safe(out)


def _proxies(rows: dict[str, Any], trials: dict[int, Any]) -> list[dict[str, Any]]:
    """One entry per live proxy sweep, by width, then depth on a depth ladder."""
    proxies = []
    ordered = sorted(rows["proxy_sweeps"],
                     key=lambda p: (p["width"], (p.get("settings") or {}).get("depth") or 0))
    for ps in ordered:
        best = ps.get("best") or {}
        mine = [t for t in trials.values() if t["proxy_sweep_id"] == ps["id"]]
        depth = (ps.get("settings") or {}).get("depth")
        proxies.append({"width": ps["width"], **({"depth": depth} if depth else {}),
                        "best_config": best.get("config"),
                        "best_val_loss": _f(best.get("val_loss")),
                        "chosen_rung": best.get("milestone"),
                        "best_trial_id": best.get("trial_id"),
                        "trials": sum(1 for t in mine if t["kind"] == "proxy"),
                        "confirm_trials": sum(1 for t in mine if t["kind"] == "confirm")})
    for p, ps in zip(proxies, ordered):
        opt = (ps.get("best") or {}).get("optimum")
        if opt:
            p["optimum"] = {"milestone": opt.get("milestone"), "method": opt.get("method"),
                            "values": opt.get("optimum"), "intervals": opt.get("interval"),
                            "on_edge": opt.get("on_edge"), "horizon": opt.get("horizon"),
                            "trial_ids": opt.get("trial_ids"),
                            "fallback_reason": opt.get("fallback_reason")}
            for key in ("optimum_horizon", "n_trials", "n_points", "n_seeds", "edge_side",
                        "clipped", "searched_range", "full_horizon_error", "sweep_best",
                        "stationary", "choices"):
                if key in opt:
                    p["optimum"][key] = opt[key]
            if opt.get("best_test_loss") is not None:
                p["best_test_loss"] = _f(opt["best_test_loss"])
    return proxies


def _rule(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("data") or {}
    rule = {"hyperparameter": r["hyperparameter"], "slope": _f(r["slope"]),
            "intercept": _f(r["intercept"]),
            "transferred_value": _f(d.get("value_after_adjustments",
                                          d.get("transferred_value"))),
            "formula": d.get("formula"), "widths": d.get("widths"),
            "optima": d.get("optima")}
    for key in ("verdict", "reason", "advice", "optimum_source", "published_adjustments",
                "outside_searched_range", "transfer_form", "optimum_horizons",
                "optimum_trials", "optimum_seeds", "optimum_methods", "edge_widths",
                "choice_evidence", "axes", "slopes", "slope_intervals", "verdicts",
                "depths", "target_depth", "edge_depths", "verdict_reasons",
                "horizon_prediction", "horizon_error", "loss_at_stake", "loss_tolerance",
                "pooled_optimum"):
        if key in d:
            rule[key] = d[key]
    for key in ("slope_interval", "transferred_interval"):
        if d.get(key) is not None:
            rule[key] = [_f(v) for v in d[key]]
    if d.get("optima_intervals") is not None:
        rule["optima_intervals"] = [[_f(v) for v in iv] for iv in d["optima_intervals"]]
    if "published_adjustments" in d:
        rule["rule_value"] = _f(d.get("transferred_value"))
    return rule


def _target(rows: dict[str, Any], trials: dict[int, Any],
            law: dict[str, Any] | None) -> dict[str, Any]:
    sweep = rows["sweep"]
    t = rows["target"]
    target = {"width": t["width"], "config": t["config"], "val_loss": _f(t["val_loss"]),
              "status": t["status"], "model_dir": t.get("model_dir")}
    scfg = sweep.get("config") or {}
    if scfg.get("depths") or (scfg.get("target") or {}).get("depth"):
        target["depth"] = ((scfg.get("target") or {}).get("depth")
                           or (scfg.get("model") or {}).get("depth"))
    trow = trials.get(t.get("trial_id"))
    last = ((trow or {}).get("reports") or [{}])[-1].get("metrics", {})
    for key in ("val_loss_se", "test_loss", "test_loss_se"):
        if last.get(key) is not None:
            target[key] = _f(last[key])
    metric = (((rows.get("sweep") or {}).get("config") or {}).get("search") or {}).get(
        "metric", "val_loss")
    if metric != "val_loss":            # a loop plugin's own metric, beside val_loss
        target["metric"] = metric
        target["metric_value"] = _f(last.get(metric))
    watch = _check(rows, "target_watch")
    if watch is not None:
        target["watch"] = watch
    if law and law.get("predicted_val_loss") is not None:
        target["predicted_val_loss"] = _f(law["predicted_val_loss"])
        target["predicted_val_loss_interval"] = [
            _f(v) for v in law["predicted_val_loss_interval"]]
    elif law and law.get("error"):
        target["predicted_val_loss_error"] = law["error"]
    return target


def _ledger_cost(rows: dict[str, Any]) -> dict[str, Any]:
    ledger = {e["name"]: e for e in rows["ledger"] if e["scope"] == "sweep"}
    cost: dict[str, Any] = {}
    for key in COST_KEYS:
        if key in ledger:
            cost[key] = _f(ledger[key]["value"])
    if "naive_gpu_hours" in ledger:
        cost["naive_formula"] = ledger["naive_gpu_hours"]["formula"]
        cost["naive_inputs"] = ledger["naive_gpu_hours"]["inputs"]
    if "naive_grid_gpu_hours" in ledger:
        cost["naive_grid_formula"] = ledger["naive_grid_gpu_hours"]["formula"]
    if "naive_replicates_gpu_hours" in ledger:
        cost["naive_replicates_formula"] = ledger["naive_replicates_gpu_hours"]["formula"]
    for key in ("mfu", "held_gpu_hours", "saved_flops_fraction"):
        if key in ledger and ledger[key].get("formula"):
            cost[f"{key}_formula"] = ledger[key]["formula"]
            cost[f"{key}_inputs"] = ledger[key]["inputs"]
    if "price_per_hour" in ledger:
        cost["currency"] = ledger["price_per_hour"]["unit"].split("/")[0]
    waste = {e["name"]: _f(e["value"]) for e in rows["ledger"] if e["scope"] == "waste"}
    if waste:
        cost["waste_gpu_hours"] = waste
    idle = {e["name"]: _f(e["value"]) for e in rows["ledger"] if e["scope"] == "idle"}
    if idle:
        cost["idle_gpu_hours_by_cause"] = idle
    if "spot_economics" in ledger:
        cost["spot"] = ledger["spot_economics"]["inputs"]
    if "idle_breakdown_check" in ledger:
        cost["idle_breakdown_check"] = ledger["idle_breakdown_check"]["inputs"]
    if "held_gpu_hours" in ledger:
        inputs = ledger["held_gpu_hours"].get("inputs") or {}
        cost["held_devices"] = inputs.get("devices_held")
    return cost


def _add_budget_cost(cost: dict[str, Any], sweep: dict[str, Any],
                     trials: dict[int, Any]) -> None:
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


def write_report_json(report: dict[str, Any], path: Path) -> Path:
    """Write ``report`` as indented JSON (non-finite floats as null); returns ``path``.
    Creates ``path``'s folder. Raises OSError when it cannot be written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(report), indent=2) + "\n", encoding="utf-8")
    return path
