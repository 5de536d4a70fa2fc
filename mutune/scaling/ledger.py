"""The ledger's arithmetic: GPU-hours, the naive counterfactual, savings, ETTR, MFU, waste.

:func:`compute_cost` turns the recorded trials of a sweep into the figures of report.json's
``cost`` section and the ledger entries (docs/architecture.md §6). It takes measured numbers as
inputs — each width's model FLOPs per sample and the device's peak FLOP/s — so this module
needs no torch and no model: the pipeline's ledger stage measures them.

    GPU-hours            = allocated seconds × devices / 3600
    naive                = ONE sweep of the same search at target size: the largest proxy
                           width's first-round sweep (steps and evaluations as its scheduler
                           decided them; confirmation designs and gate rounds excluded), ONE
                           seed per trial (what a naive full-size sweep runs), priced at the
                           target's measured seconds per step and evaluation, plus the measured
                           per-trial overhead (scaling.cost); a second line prices it with the
                           proxies' search.replicates seeds per trial
    saved                = naive − (proxy sweeps + target run)
    trial ETTR (ettr)    = Σ productive step seconds / Σ allocated seconds of the trials
    sweep ETTR           = Σ productive device-seconds / held device-seconds
    MFU                  = Σ model FLOPs / Σ (productive s × devices) / peak FLOP/s
                           (Chowdhery et al. 2022, App. B; model FLOPs 6·N per sample or
                           token, Kaplan et al. 2020 §2.1)
    held                 = span (the sweep's submission → last trial end) × devices held
                           (scaling.idle.held_devices, from the cluster's resources); what no
                           trial used in it is idle waste (scaling.time_split.sweep_waste),
                           broken down by cause (scaling.idle.idle_breakdown)
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from mutune.config import SweepConfig

__all__ = ["compute_cost"]


def compute_cost(config: SweepConfig, outcomes: dict[int, Any], target: Any, *,
                 flops_per_sample: Callable[[int, float], float],
                 peak_flops: float | None, peak_source: str,
                 extra_trials: Sequence[tuple[int, Any]] = (),
                 resources: dict[str, float] | None = None,
                 sweep_start: float | None = None,
                 target_size: Any = None
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ledger (docs/architecture.md §6) from the recorded trials: GPU-hours of the proxy sweeps
    and
    the target run, the naive counterfactuals with their formulas, savings, money, ETTR, MFU,
    each trial's time by category and the sweep's waste by category.

    The sweep held ``slots × devices per trial`` devices (:func:`mutune.scaling.idle.
    held_devices`, from the cluster's resources) from its submission (``sweep_start``, else
    its first trial's start) to its last trial's end; what no trial used in that span is
    ``idle`` waste (:func:`mutune.scaling.time_split.sweep_waste`), broken down by cause with
    the trials' own overhead and recovery (:func:`mutune.scaling.idle.idle_breakdown`).

    Args:
        config: the sweep config (its ``cost``, ``ray``, ``search`` and ``target`` sections).
        outcomes: proxy width (or any sortable size key, e.g. (width, depth)) → that
            proxy's first-round sweep (``.trials``: records with
            ``timing``, ``reports``, ``started``/``ended`` on the driver's monotonic clock,
            seconds).
        extra_trials: (width, record) of further proxy-side trials — confirmation designs and
            gate rounds — billed to the proxies but not to the naive line.
        target: the target run's record.
        flops_per_sample: (width, parameter count) → model training FLOPs per sample (MLP)
            or token (GPT).
        peak_flops, peak_source: peak FLOP/s per device (None: MFU is not computed) and
            where it came from.
        resources: the cluster's total resources (``ray.cluster_resources()``); None: the
            config's ``ray.num_cpus`` CPUs.
        sweep_start: when the sweep was submitted, on the trials' clock (driver monotonic
            seconds); None: its first trial's start.
        target_size: the target's key for ``flops_per_sample`` when the proxies are keyed by
            (width, depth) on a depth ladder; None: ``target.width``.
    Returns:
        (cost figures keyed as report.json's ``cost``, ledger entries for the recorder).
    """
    from mutune.scaling.cost import ettr, gpu_hours, naive_sweep_estimate
    from mutune.scaling.idle import Interval, held_devices, idle_breakdown
    from mutune.scaling.time_split import TIME_CATEGORIES, money, sweep_waste, trial_time

    proxy_trials = [t for o in outcomes.values() for t in o.trials]
    proxy_trials += [t for _, t in extra_trials]
    everything = [*proxy_trials, target]
    entries: list[dict[str, Any]] = []
    widths = {t.trial_id: w for w, o in outcomes.items() for t in o.trials}
    widths.update({t.trial_id: w for w, t in extra_trials})
    widths[target.trial_id] = config.target.width if target_size is None else target_size
    kind = target.timing["device_kind"]
    peak = peak_flops
    price = config.cost.price_per_hour(kind)
    flops_total = flops_device_s = 0.0
    for t in everything:
        tm = t.timing
        entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "gpu_hours",
                        "value": gpu_hours(tm["allocated_s"], tm["devices"]),
                        "unit": "GPU-h"})
        split = trial_time(tm)
        for cat in TIME_CATEGORIES:
            entries.append({"scope": "trial", "trial_id": t.trial_id, "name": f"{cat}_s",
                            "value": split.seconds[cat], "unit": "s"})
        if tm.get("recovery_s") or tm.get("repeated_steps"):
            entries[-2].update(   # the recovery_s line (TIME_CATEGORIES ends recovery, other)
                formula="restart set-up + checkpoint load + repeated_steps × productive s/step",
                inputs={"restarts": tm.get("restarts", 0),
                        "preemptions": tm.get("preemptions", 0),
                        "repeated_steps": tm.get("repeated_steps", 0)})
        if tm.get("preemptions"):
            entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "preemptions",
                            "value": float(tm["preemptions"]), "unit": "preemptions"})
        if tm.get("upload_s"):     # a background thread's seconds: not held time lost
            entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "upload_s",
                            "value": float(tm["upload_s"]), "unit": "s"})
        per_sample = flops_per_sample(widths[t.trial_id], tm["n_params"])
        steps = max(tm["steps"], 1)
        entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "flops_per_step",
                        "value": per_sample * tm["samples"] / steps, "unit": "FLOP",
                        "formula": "samples/step × (6·N [+ 6·n_layer·n_ctx·d_model]) "
                                   "(Kaplan et al. 2020 §2.1)",
                        "inputs": {"n_params": tm["n_params"],
                                   "samples_per_step": tm["samples"] / steps}})
        flops_total += per_sample * tm["samples"]
        flops_device_s += tm["productive_s"] * tm["devices"]
    proxy_h = sum(e["value"] for e in entries
                  if e["name"] == "gpu_hours" and e["trial_id"] != target.trial_id)
    target_h = gpu_hours(target.timing["allocated_s"], target.timing["devices"])
    tt = target.timing
    s_step = tt["productive_s"] / max(tt["steps"], 1)
    s_eval = tt["eval_s"] / max(tt["evals"], 1)
    largest = outcomes[max(outcomes)].trials
    proxy_overhead = statistics.median(t.timing["overhead_s"] for t in largest)
    proxy_setup = statistics.median(t.reports[0].get("setup_s", 0.0) if t.reports else 0.0
                                    for t in largest)
    target_setup = target.reports[0].get("setup_s", 0.0) if target.reports else 0.0
    overhead = proxy_overhead + max(target_setup - proxy_setup, 0.0)
    # each proxy trial trains search.replicates seeds in lockstep; a naive full-size sweep
    # (like the target run) trains one seed per trial: that is the line savings use
    reps = config.search.replicates
    naive = naive_sweep_estimate([t.last_step for t in largest],
                                 [t.n_evals for t in largest],
                                 s_per_step=s_step, s_per_eval=s_eval,
                                 overhead_s_per_trial=overhead, devices=tt["devices"])
    naive_reps = naive_sweep_estimate([t.last_step * reps for t in largest],
                                      [t.n_evals * reps for t in largest],
                                      s_per_step=s_step, s_per_eval=s_eval,
                                      overhead_s_per_trial=overhead, devices=tt["devices"])
    scope_note = (f"; the widest proxy's first-round sweep only ({len(largest)} trials; "
                  "confirmation designs and gate rounds excluded), one seed per trial")
    max_t = config.search.scheduler.max_t
    full_evals = math.ceil(max_t / config.train.eval_every)
    grid = naive_sweep_estimate([max_t] * len(largest),
                                [full_evals] * len(largest),
                                s_per_step=s_step, s_per_eval=s_eval,
                                overhead_s_per_trial=overhead, devices=tt["devices"])
    total_h = proxy_h + target_h
    saved = naive.gpu_hours - total_h
    e = ettr(sum(t.timing["productive_s"] for t in everything),
             sum(t.timing["allocated_s"] for t in everything))
    # the sweep's hold on devices: its submission → last trial end, × devices held
    r = config.ray
    held = held_devices(resources, cpus_per_trial=r.cpus_per_trial,
                        gpus_per_trial=r.gpus_per_trial, max_concurrent=r.max_concurrent_trials,
                        num_cpus=r.num_cpus)
    splits = [(t, trial_time(t.timing)) for t in everything]
    trial_device_s = sum(sp.allocated_s * t.timing["devices"] for t, sp in splits)
    # the span needs this process's clock for every trial: a resumed sweep's earlier trials
    # ran under another driver, so there the sweep is taken as the sum of its trials
    timed = all(t.started > 0 and t.ended is not None for t in everything)
    t0: float | None = None
    span: float | None = None
    if timed:
        first = float(min(t.started for t in everything))
        t0 = first if sweep_start is None else min(sweep_start, first)
        span = float(max(t.ended for t in everything)) - t0
    held_device_s = None if span is None else max(span * held.devices, trial_device_s)
    waste = sweep_waste([(t.status, t.timing, t.timing["devices"]) for t in everything],
                        held_device_s=held_device_s)
    productive_device_s = sum(sp.seconds["productive"] * t.timing["devices"]
                              for t, sp in splits)
    work_device_s = sum((sp.seconds["productive"] + sp.seconds["eval"]
                         + sp.seconds["checkpoint"] + sp.seconds["setup"]) * t.timing["devices"]
                        for t, sp in splits)
    idle_causes = idle_check = None
    if held_device_s is not None and t0 is not None:
        extra_ids = {t.trial_id for _, t in extra_trials}
        intervals = [Interval(t.started, t.ended, t.timing["devices"],
                              "target" if t is target else
                              "design" if t.trial_id in extra_ids else "width")
                     for t in everything]
        # a trial's ``other`` seconds: its worker's start (start_s), the rest Ray's
        started = [min(float(t.timing.get("start_s", 0.0)), sp.seconds["other"])
                   for t, sp in splits]
        inside = {"worker_start": sum(s * t.timing["devices"]
                                      for s, (t, _) in zip(started, splits)),
                  "trial_overhead": sum((sp.seconds["other"] - s) * t.timing["devices"]
                                        for s, (t, sp) in zip(started, splits)),
                  "recovery": sum(sp.seconds["recovery"] * t.timing["devices"]
                                  for t, sp in splits)}
        causes = idle_breakdown(intervals, start=t0, held=held.devices, inside=inside)
        idle_causes = {k: v / 3600.0 for k, v in causes.items()}
        not_work_h = (held_device_s - work_device_s) / 3600.0
        got = sum(idle_causes.values())
        idle_check = {"held_minus_work_gpu_hours": not_work_h, "causes_sum_gpu_hours": got,
                      "relative_gap": (abs(got - not_work_h) / not_work_h
                                       if not_work_h > 0 else 0.0)}
    mfu_value = (flops_total / flops_device_s / peak
                 if peak and flops_device_s > 0 else None)
    n_trials = len(proxy_trials)
    cost = {"device_kind": kind, "proxy_gpu_hours": proxy_h,
            "target_gpu_hours": target_h, "total_gpu_hours": total_h,
            "naive_gpu_hours": naive.gpu_hours, "naive_formula": naive.formula + scope_note,
            "naive_inputs": naive.inputs,
            "naive_replicates_gpu_hours": naive_reps.gpu_hours,
            "naive_replicates_formula": (f"{naive_reps.formula}; with the proxies' "
                                         f"{reps} seed(s) per trial (not used for savings)"),
            "naive_grid_gpu_hours": grid.gpu_hours,
            "naive_grid_formula": grid.formula, "saved_gpu_hours": saved,
            "saved_fraction": saved / naive.gpu_hours if naive.gpu_hours > 0 else None,
            "price_per_hour": price, "currency": config.cost.currency,
            "pricing": config.cost.pricing,
            "total_money": money(total_h, price), "naive_money": money(naive.gpu_hours, price),
            "saved_money": None if price is None else saved * price,
            "ettr": e, "trial_ettr": e,
            "sweep_ettr": (productive_device_s / held_device_s
                           if held_device_s else None),
            "held_devices": held.devices, "held_slots": held.slots,
            "held_source": held.source,
            "idle_gpu_hours_by_cause": idle_causes, "idle_breakdown_check": idle_check,
            "mfu": mfu_value, "peak_flops_per_device": peak,
            # the target's throughput across its workers: step time includes the gradient
            # synchronisation; per device = over workers × devices per worker
            "target_devices": tt["devices"],
            "target_samples_per_s": (tt["samples"] / tt["productive_s"]
                                     if tt["productive_s"] > 0 else None),
            "target_samples_per_device_s": (tt["samples"] / tt["productive_s"] / tt["devices"]
                                            if tt["productive_s"] > 0 and tt["devices"]
                                            else None),
            "peak_flops_source": peak_source,
            "held_gpu_hours": waste.allocated_s / 3600.0,
            "useful_gpu_hours": waste.useful_s / 3600.0,
            "waste_gpu_hours": waste.waste_gpu_hours,
            "gpu_hours_per_trial": proxy_h / n_trials if n_trials else None,
            "cost_to_final_metric_gpu_hours": total_h,
            "repeated_steps": sum(int(t.timing.get("repeated_steps") or 0)
                                  for t in everything),
            "preemptions": sum(int(t.timing.get("preemptions") or 0) for t in everything),
            "recovery_s": sum(float(t.timing.get("recovery_s") or 0.0) for t in everything),
            "upload_s": sum(float(t.timing.get("upload_s") or 0.0) for t in everything),
            "spot": _spot(config, proxy_trials, kind),
            "checkpoint_bytes_written": sum(float(t.timing.get("checkpoint_bytes") or 0.0)
                                            for t in everything),
            "checkpoint_bytes_kept": sum(float(t.timing.get("checkpoint_bytes_kept") or 0.0)
                                         for t in everything),
            "project": config.cost.project, "owner": config.cost.owner}
    entries.append({"scope": "sweep", "name": "repeated_steps",
                    "value": float(cost["repeated_steps"]), "unit": "steps"})
    for name, unit in (("preemptions", "preemptions"), ("recovery_s", "s"), ("upload_s", "s")):
        entries.append({"scope": "sweep", "name": name, "value": float(cost[name]),
                        "unit": unit})
    if cost["spot"] is not None:
        entries.append({"scope": "sweep", "name": "spot_economics",
                        "value": cost["spot"].get("overhead_fraction"), "unit": "1",
                        "formula": cost["spot"].get("formula"), "inputs": cost["spot"]})
    for name in ("checkpoint_bytes_written", "checkpoint_bytes_kept"):
        entries.append({"scope": "sweep", "name": name, "value": cost[name], "unit": "bytes"})
    overhead_inputs = {"replicates_per_trial": reps, "median_proxy_overhead_s": proxy_overhead,
                       "median_proxy_setup_s": proxy_setup, "target_setup_s": target_setup}
    units = {"saved_fraction": "1", "ettr": "1", "trial_ettr": "1", "sweep_ettr": "1",
             "mfu": "1", "price_per_hour":
             f"{config.cost.currency}/device-h", "total_money": config.cost.currency,
             "naive_money": config.cost.currency, "saved_money": config.cost.currency,
             "peak_flops_per_device": "FLOP/s"}
    for name in ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "saved_gpu_hours",
                 "saved_fraction", "ettr", "trial_ettr", "sweep_ettr", "useful_gpu_hours",
                 "gpu_hours_per_trial", "cost_to_final_metric_gpu_hours", "price_per_hour",
                 "total_money", "naive_money", "saved_money"):
        if cost[name] is not None:
            entries.append({"scope": "sweep", "name": name, "value": cost[name],
                            "unit": units.get(name, "GPU-h")})
    entries.append({"scope": "sweep", "name": "mfu", "value": mfu_value, "unit": "1",
                    "formula": "Σ model FLOPs / Σ (productive s × devices) / peak FLOP/s "
                               "(Chowdhery et al. 2022, App. B)",
                    "inputs": {"model_flops": flops_total, "productive_device_s":
                               flops_device_s, "peak_flops_per_device": peak,
                               "peak_source": peak_source}})
    entries.append({"scope": "sweep", "name": "target_devices",
                    "value": float(tt["devices"]), "unit": "devices"})
    for name in ("target_samples_per_s", "target_samples_per_device_s"):
        if cost[name] is not None:
            entries.append({"scope": "sweep", "name": name, "value": cost[name],
                            "unit": "samples/s",
                            "formula": "samples (global batch × steps) / productive s"
                                       + (" / devices" if "device" in name else ""),
                            "inputs": {"samples": tt["samples"],
                                       "productive_s": tt["productive_s"],
                                       "devices": tt["devices"]}})
    for cat, v in waste.waste_gpu_hours.items():
        entries.append({"scope": "waste", "name": cat, "value": v, "unit": "GPU-h"})
    entries.append({"scope": "sweep", "name": "held_gpu_hours",
                    "value": waste.allocated_s / 3600.0, "unit": "GPU-h",
                    "formula": "span (sweep submitted → last trial end) × devices held",
                    "inputs": {"span_s": span, "devices_held": held.devices,
                               "slots": held.slots, "source": held.source}})
    for cause, v in (idle_causes or {}).items():
        entries.append({"scope": "idle", "name": cause, "value": v, "unit": "GPU-h"})
    if idle_check is not None:
        entries.append({"scope": "sweep", "name": "idle_breakdown_check",
                        "value": idle_check["relative_gap"], "unit": "1",
                        "formula": "|Σ idle causes − (held − productive − eval − checkpoint − "
                                   "set-up)| / (held − productive − eval − checkpoint − set-up)",
                        "inputs": idle_check})
    entries.append({"scope": "sweep", "name": "naive_gpu_hours", "value": naive.gpu_hours,
                    "unit": "GPU-h", "formula": naive.formula + scope_note,
                    "inputs": {**naive.inputs, **overhead_inputs, "seeds_per_trial": 1}})
    entries.append({"scope": "sweep", "name": "naive_replicates_gpu_hours",
                    "value": naive_reps.gpu_hours, "unit": "GPU-h",
                    "formula": cost["naive_replicates_formula"],
                    "inputs": {**naive_reps.inputs, **overhead_inputs,
                               "seeds_per_trial": reps}})
    entries.append({"scope": "sweep", "name": "naive_grid_gpu_hours", "value": grid.gpu_hours,
                    "unit": "GPU-h", "formula": grid.formula,
                    "inputs": {**grid.inputs, **overhead_inputs}})
    return cost, entries


def _spot(config: SweepConfig, trials: list[Any], kind: str) -> dict[str, Any] | None:
    """Spot economics of this sweep's trials (:func:`mutune.scaling.spot.spot_economics`)
    when ``cost.spot.mtbp_s`` is set: T the proxy trials' median allocated seconds, C their
    measured seconds per checkpoint, the restore their median measured checkpoint load (C
    when no trial restored one). None without ``mtbp_s``; ``{"error"}`` when no checkpoint
    was written to measure C."""
    from mutune.scaling.spot import spot_economics

    sp = config.cost.spot
    if sp.mtbp_s is None or not trials:
        return None
    lasts = [t.reports[-1] for t in trials if t.reports]
    n = sum(float(r.get("checkpoints") or 0.0) for r in lasts)
    if n <= 0:
        return {"mtbp_s": sp.mtbp_s, "error": "no checkpoint was written to measure its "
                "seconds: set train.checkpoint_every (steps, or auto)"}
    c = sum(float(r.get("checkpoint_s") or 0.0) for r in lasts
            if r.get("checkpoints")) / n
    restores = [float(r["restore_s"]) for t in trials for r in t.reports
                if r.get("restored_step") and r.get("restore_s") is not None]
    dev = config.cost.device(kind)
    out = spot_economics(statistics.median(t.timing["allocated_s"] for t in trials),
                         checkpoint_s=c, restore_s=statistics.median(restores) if restores
                         else c, mtbp_s=sp.mtbp_s, restart_s=sp.restart_s,
                         min_interval_s=sp.checkpoint_min_interval_s, spot_price=dev.spot,
                         on_demand_price=dev.on_demand)
    out["restore_measured"] = bool(restores)
    return out
