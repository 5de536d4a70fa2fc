"""The ledger's arithmetic: GPU-hours, the naive counterfactual, savings, ETTR, MFU, waste.

MFU: Chowdhery et al. 2022, App. B; model FLOPs 6·N per sample or token, Kaplan et al. 2020 §2.1."""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mutune.config import SweepConfig
from mutune.scaling.ledger_lines import (Hold, NaiveLines, hold_entries, naive_entries,
                                         sweep_entries, throughput_entries)

__all__ = ["compute_cost", "FlopsModel"]


@dataclass(frozen=True)
class FlopsModel:
    """What the ledger's MFU is computed from."""
    per_sample: Callable[[Any, float], float]
    peak_flops: float | None
    peak_source: str
    target_size: Any = None


def compute_cost(config: SweepConfig, outcomes: dict[Any, Any], target: Any, *,
                 flops: FlopsModel, extra_trials: Sequence[tuple[Any, Any]] = (),
                 resources: dict[str, float] | None = None,
                 sweep_start: float | None = None
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ledger from the recorded trials: GPU-hours, naive lines, savings, ETTR, MFU, waste.

    Returns:
        (cost figures keyed as report.json's ``cost``, ledger entries for the recorder)."""
    from mutune.scaling.cost import ettr, gpu_hours

    proxy_trials = [t for o in outcomes.values() for t in o.trials]
    proxy_trials += [t for _, t in extra_trials]
    everything = [*proxy_trials, target]
    widths = {t.trial_id: w for w, o in outcomes.items() for t in o.trials}
    widths.update({t.trial_id: w for w, t in extra_trials})
    widths[target.trial_id] = (config.target.width if flops.target_size is None
                               else flops.target_size)
    peak_flops, peak_source = flops.peak_flops, flops.peak_source
    entries, used = _trial_entries(everything, widths, flops.per_sample)
    proxy_h = sum(e["value"] for e in entries
                  if e["name"] == "gpu_hours" and e["trial_id"] != target.trial_id)
    target_h = gpu_hours(target.timing["allocated_s"], target.timing["devices"])
    naive = _naive_lines(config, outcomes[max(outcomes)].trials, target)
    hold = _hold(config, everything, target, {t.trial_id for _, t in extra_trials},
                 resources, sweep_start)
    e = ettr(sum(t.timing["productive_s"] for t in everything),
             sum(t.timing["allocated_s"] for t in everything))
    mfu = (used.total / used.device_s / peak_flops
           if peak_flops and used.device_s > 0 else None)
    cost = {**_cost_figures(config, target, proxy_h, target_h, naive, hold, ettr_value=e),
            "mfu": mfu, "peak_flops_per_device": peak_flops, "peak_flops_source": peak_source,
            "gpu_hours_per_trial": proxy_h / len(proxy_trials) if proxy_trials else None,
            **_totals(everything),
            "spot": _spot(config, proxy_trials, target.timing["device_kind"]),
            "project": config.cost.project, "owner": config.cost.owner}
    entries += sweep_entries(config, cost)
    entries.append({"scope": "sweep", "name": "mfu", "value": mfu, "unit": "1",
                    "formula": "Σ model FLOPs / Σ (productive s × devices) / peak FLOP/s "
                               "(Chowdhery et al. 2022, App. B)",
                    "inputs": {"model_flops": used.total, "productive_device_s":
                               used.device_s, "peak_flops_per_device": peak_flops,
                               "peak_source": peak_source}})
    flop_saving = _flop_saving(target, widths[target.trial_id], flops.per_sample, used.total,
                               int(naive.one_seed.inputs["steps"]))
    cost.update({k: v for k, v in flop_saving.items() if k != "inputs"})
    entries += _flop_entries(flop_saving)
    entries += throughput_entries(cost, target) + hold_entries(hold) + naive_entries(naive, cost)
    return cost, entries


def _flop_saving(target: Any, target_size: Any, per_sample: Callable[[Any, float], float],
                 spent_flops: float, naive_steps: int) -> dict[str, Any]:
    """The saving in model FLOPs of the trained steps, device- and load-independent: every
    trial's (proxies, designs, gate rounds, target; all seeds) against the naive sweep's steps
    at the target's FLOPs per step (one seed). ``ideal``: the proxies free."""
    tt = target.timing
    per_step = per_sample(target_size, tt["n_params"]) * tt["samples"] / max(tt["steps"], 1)
    naive_flops = per_step * naive_steps
    target_flops = per_step * tt["steps"]
    ok = naive_flops > 0
    return {"spent_flops": spent_flops, "naive_flops": naive_flops,
            "saved_flops_fraction": 1 - spent_flops / naive_flops if ok else None,
            "ideal_saved_flops_fraction": 1 - target_flops / naive_flops if ok else None,
            "inputs": {"target_flops_per_step": per_step, "naive_steps": naive_steps,
                       "target_steps": tt["steps"], "target_flops": target_flops}}


def _flop_entries(fs: dict[str, Any]) -> list[dict[str, Any]]:
    """The FLOP-based saving's ledger lines, its formula shown."""
    formula = ("1 − Σ model FLOPs of every trained step (proxies, designs, gate rounds, "
               "target) / (naive steps × the target's FLOPs per step); model FLOPs per sample "
               "or token 6·N [+ 6·n_layer·n_ctx·d_model] (Kaplan et al. 2020 §2.1)")
    return [{"scope": "sweep", "name": "spent_flops", "value": fs["spent_flops"],
             "unit": "FLOP"},
            {"scope": "sweep", "name": "naive_flops", "value": fs["naive_flops"],
             "unit": "FLOP", "inputs": fs["inputs"]},
            {"scope": "sweep", "name": "saved_flops_fraction",
             "value": fs["saved_flops_fraction"], "unit": "1", "formula": formula,
             "inputs": fs["inputs"]},
            {"scope": "sweep", "name": "ideal_saved_flops_fraction",
             "value": fs["ideal_saved_flops_fraction"], "unit": "1",
             "formula": "1 − target FLOPs / naive FLOPs (the proxies free)"}]


@dataclass(frozen=True)
class _Flops:
    """Σ model FLOPs of every trial and Σ productive device-seconds they took."""
    total: float
    device_s: float


def _trial_entries(trials: list[Any], widths: dict[int, Any],
                   flops_per_sample: Callable[[Any, float], float]
                   ) -> tuple[list[dict[str, Any]], _Flops]:
    """Each trial's ledger lines (GPU-hours, seconds by category, FLOPs per step) and the
    sweep's FLOP totals."""
    from mutune.scaling.cost import gpu_hours
    from mutune.scaling.time_split import TIME_CATEGORIES, trial_time

    entries: list[dict[str, Any]] = []
    total = device_s = 0.0
    for t in trials:
        tm = t.timing

        def line(name: str, value: float, unit: str, trial_id: int = t.trial_id,
                 **more: Any) -> dict[str, Any]:
            return {"scope": "trial", "trial_id": trial_id, "name": name, "value": value,
                    "unit": unit, **more}
        entries.append(line("gpu_hours", gpu_hours(tm["allocated_s"], tm["devices"]), "GPU-h"))
        split = trial_time(tm)
        entries += [line(f"{cat}_s", split.seconds[cat], "s") for cat in TIME_CATEGORIES]
        if tm.get("recovery_s") or tm.get("repeated_steps"):
            entries[-2].update(   # the recovery_s line (TIME_CATEGORIES ends recovery, other)
                formula="restart set-up + checkpoint load + repeated_steps × productive s/step",
                inputs={"restarts": tm.get("restarts", 0),
                        "preemptions": tm.get("preemptions", 0),
                        "repeated_steps": tm.get("repeated_steps", 0)})
        if tm.get("preemptions"):
            entries.append(line("preemptions", float(tm["preemptions"]), "preemptions"))
        if tm.get("upload_s"):     # a background thread's seconds: not held time lost
            entries.append(line("upload_s", float(tm["upload_s"]), "s"))
        per_sample = flops_per_sample(widths[t.trial_id], tm["n_params"])
        steps = max(tm["steps"], 1)
        entries.append(line("flops_per_step", per_sample * tm["samples"] / steps, "FLOP",
                            formula="samples/step × (6·N [+ 6·n_layer·n_ctx·d_model]) "
                                    "(Kaplan et al. 2020 §2.1)",
                            inputs={"n_params": tm["n_params"],
                                    "samples_per_step": tm["samples"] / steps}))
        total += per_sample * tm["samples"]
        device_s += tm["productive_s"] * tm["devices"]
    return entries, _Flops(total, device_s)


def _naive_lines(config: SweepConfig, largest: list[Any], target: Any) -> NaiveLines:
    """The widest proxy's first-round sweep priced at the target's measured step and
    evaluation seconds plus the measured per-trial overhead (scaling.cost)."""
    from mutune.scaling.cost import naive_sweep_estimate

    tt = target.timing
    proxy_overhead = statistics.median(t.timing["overhead_s"] for t in largest)
    proxy_setup = statistics.median(t.reports[0].get("setup_s", 0.0) if t.reports else 0.0
                                    for t in largest)
    target_setup = target.reports[0].get("setup_s", 0.0) if target.reports else 0.0
    price = dict(s_per_step=tt["productive_s"] / max(tt["steps"], 1),
                 s_per_eval=tt["eval_s"] / max(tt["evals"], 1),
                 overhead_s_per_trial=proxy_overhead + max(target_setup - proxy_setup, 0.0),
                 devices=tt["devices"])
    # each proxy trial trains search.replicates seeds in lockstep; a naive full-size sweep
    # (like the target run) trains one seed per trial: that is the line savings use
    reps = config.search.replicates
    max_t = config.search.scheduler.max_t
    full_evals = math.ceil(max_t / config.train.eval_every)
    return NaiveLines(
        naive_sweep_estimate([t.last_step for t in largest], [t.n_evals for t in largest],
                             **price),
        naive_sweep_estimate([t.last_step * reps for t in largest],
                             [t.n_evals * reps for t in largest], **price),
        naive_sweep_estimate([max_t] * len(largest), [full_evals] * len(largest), **price),
        f"; the widest proxy's first-round sweep only ({len(largest)} trials; "
        "confirmation designs and gate rounds excluded), one seed per trial",
        {"replicates_per_trial": reps, "median_proxy_overhead_s": proxy_overhead,
         "median_proxy_setup_s": proxy_setup, "target_setup_s": target_setup})


def _hold(config: SweepConfig, everything: list[Any], target: Any, extra_ids: set[int],
          resources: dict[str, float] | None, sweep_start: float | None) -> Hold:
    """The sweep's hold on devices (its submission → last trial end, × devices held), its
    waste and its idle seconds by cause."""
    from mutune.scaling.idle import held_devices
    from mutune.scaling.time_split import sweep_waste, trial_time

    r = config.ray
    held = held_devices(resources, cpus_per_trial=r.cpus_per_trial,
                        gpus_per_trial=r.gpus_per_trial, max_concurrent=r.max_concurrent_trials,
                        num_cpus=r.num_cpus)
    splits = [(t, trial_time(t.timing)) for t in everything]
    trial_device_s = sum(sp.allocated_s * t.timing["devices"] for t, sp in splits)
    # the span needs this process's clock for every trial: a resumed sweep's earlier trials
    # ran under another driver, so there the sweep is taken as the sum of its trials
    t0: float | None = None
    span: float | None = None
    if all(t.started > 0 and t.ended is not None for t in everything):
        first = float(min(t.started for t in everything))
        t0 = first if sweep_start is None else min(sweep_start, first)
        span = float(max(t.ended for t in everything)) - t0
    held_device_s = None if span is None else max(span * held.devices, trial_device_s)
    waste = sweep_waste([(t.status, t.timing, t.timing["devices"]) for t in everything],
                        held_device_s=held_device_s)
    productive = sum(sp.seconds["productive"] * t.timing["devices"] for t, sp in splits)
    causes = check = None
    if held_device_s is not None and t0 is not None:
        causes, check = _idle(splits, target, extra_ids, t0, held.devices, held_device_s)
    return Hold(held, span, held_device_s, productive, waste, causes, check)


def _idle(splits: list[tuple[Any, Any]], target: Any, extra_ids: set[int], t0: float,
          devices: float, held_device_s: float
          ) -> tuple[dict[str, float], dict[str, float]]:
    """Idle GPU-hours by cause (:func:`mutune.scaling.idle.idle_breakdown`) and the check
    that they add up to what the trials did not use of the hold."""
    from mutune.scaling.idle import Interval, idle_breakdown

    intervals = [Interval(t.started, t.ended, t.timing["devices"],
                          "target" if t is target else
                          "design" if t.trial_id in extra_ids else "width")
                 for t, _ in splits]
    # a trial's ``other`` seconds: its worker's start (start_s), the rest Ray's
    started = [min(float(t.timing.get("start_s", 0.0)), sp.seconds["other"])
               for t, sp in splits]
    inside = {"worker_start": sum(s * t.timing["devices"]
                                  for s, (t, _) in zip(started, splits)),
              "trial_overhead": sum((sp.seconds["other"] - s) * t.timing["devices"]
                                    for s, (t, sp) in zip(started, splits)),
              "recovery": sum(sp.seconds["recovery"] * t.timing["devices"]
                              for t, sp in splits)}
    work_device_s = sum((sp.seconds["productive"] + sp.seconds["eval"]
                         + sp.seconds["checkpoint"] + sp.seconds["setup"]) * t.timing["devices"]
                        for t, sp in splits)
    causes = {k: v / 3600.0 for k, v in
              idle_breakdown(intervals, start=t0, held=devices, inside=inside).items()}
    not_work_h = (held_device_s - work_device_s) / 3600.0
    got = sum(causes.values())
    return causes, {"held_minus_work_gpu_hours": not_work_h, "causes_sum_gpu_hours": got,
                    "relative_gap": (abs(got - not_work_h) / not_work_h
                                     if not_work_h > 0 else 0.0)}


def _cost_figures(config: SweepConfig, target: Any, proxy_h: float, target_h: float,
                  naive: NaiveLines, hold: Hold, *, ettr_value: float | None) -> dict[str, Any]:
    """report.json's GPU-hour, money, ETTR, hold and throughput figures."""
    from mutune.scaling.time_split import money

    tt = target.timing
    price = config.cost.price_per_hour(tt["device_kind"])
    total_h = proxy_h + target_h
    n = naive.one_seed.gpu_hours
    saved = n - total_h
    sps = tt["samples"] / tt["productive_s"] if tt["productive_s"] > 0 else None
    return {"device_kind": tt["device_kind"], "proxy_gpu_hours": proxy_h,
            "target_gpu_hours": target_h, "total_gpu_hours": total_h,
            "naive_gpu_hours": n, "naive_formula": naive.one_seed.formula + naive.scope_note,
            "naive_inputs": naive.one_seed.inputs,
            "naive_replicates_gpu_hours": naive.replicates.gpu_hours,
            "naive_replicates_formula": (f"{naive.replicates.formula}; with the proxies' "
                                         f"{config.search.replicates} seed(s) per trial (not "
                                         "used for savings)"),
            "naive_grid_gpu_hours": naive.grid.gpu_hours,
            "naive_grid_formula": naive.grid.formula, "saved_gpu_hours": saved,
            "saved_fraction": saved / n if n > 0 else None,
            "ideal_saved_fraction": (n - target_h) / n if n > 0 else None,
            "price_per_hour": price, "currency": config.cost.currency,
            "pricing": config.cost.pricing,
            "total_money": money(total_h, price), "naive_money": money(n, price),
            "saved_money": None if price is None else saved * price,
            "ettr": ettr_value, "trial_ettr": ettr_value,
            "sweep_ettr": (hold.productive_device_s / hold.held_device_s
                           if hold.held_device_s else None),
            "held_devices": hold.held.devices, "held_slots": hold.held.slots,
            "held_source": hold.held.source,
            "idle_gpu_hours_by_cause": hold.idle_causes, "idle_breakdown_check": hold.idle_check,
            # the target's throughput across its workers: step time includes the gradient
            # synchronisation; per device = over workers × devices per worker
            "target_devices": tt["devices"], "target_samples_per_s": sps,
            "target_samples_per_device_s": (sps / tt["devices"]
                                            if sps is not None and tt["devices"] else None),
            "held_gpu_hours": hold.waste.allocated_s / 3600.0,
            "useful_gpu_hours": hold.waste.useful_s / 3600.0,
            "waste_gpu_hours": hold.waste.waste_gpu_hours,
            "cost_to_final_metric_gpu_hours": total_h}


def _totals(trials: list[Any]) -> dict[str, Any]:
    """Sums over every trial of its restarts' and checkpoints' figures."""
    def total(key: str) -> float:
        return sum(float(t.timing.get(key) or 0.0) for t in trials)
    return {"repeated_steps": int(total("repeated_steps")),
            "preemptions": int(total("preemptions")), "recovery_s": total("recovery_s"),
            "upload_s": total("upload_s"), "checkpoint_bytes_written": total("checkpoint_bytes"),
            "checkpoint_bytes_kept": total("checkpoint_bytes_kept")}


def _spot(config: SweepConfig, trials: list[Any], kind: str) -> dict[str, Any] | None:
    """Spot economics of this sweep's trials (:func:`mutune.scaling.spot.spot_economics`) when
    ``cost.spot.mtbp_s`` is set: T the proxy trials' median allocated seconds, C their measured
    seconds per checkpoint, the restore their median measured checkpoint load (C when no trial
    restored one)."""
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
