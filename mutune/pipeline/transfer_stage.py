"""The transfer stage: per-width optima (:func:`mutune.scaling.estimate_optimum`) → transfer
rules log h*(w) = a + b·log w → the loss law L(N) = E + A·N^-α predicting the target's loss."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from mutune.config import Choice, SweepConfig
from mutune.config.spaces import NOT_TRANSFERRED, as_value, is_categorical
from mutune.pipeline.fitted_rule import fitted_rule, size_label
from mutune.pipeline.optimum_record import WidthOptimum, surface_fields
from mutune.pipeline.unfitted_rules import unfitted_rule
from mutune.errors import FitError

__all__ = ["width_optimum", "common_rung", "transfer_rules", "loss_law",
           "target_train_settings", "log_bounds"]


def log_bounds(config: SweepConfig, names: list[str]) -> np.ndarray | None:
    """The searched range of ``names`` in natural-log units, shape (len(names), 2); None when one
    is not on positive values."""
    rows = []
    for n in names:
        d = config.search.space[n]
        if isinstance(d, Choice) and min(d.values) > 0:
            rows.append((math.log(min(d.values)), math.log(max(d.values))))
        elif getattr(d, "low", 0) > 0:
            rows.append((math.log(d.low), math.log(d.high)))
        else:
            return None
    return np.array(rows)


def _finite(vals: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in vals.items() if math.isfinite(v)}


def _fit_rungs(config: SweepConfig, outcome: Any) -> dict[int, dict[str, float]]:
    return {m: _finite(v) for m, v in outcome.core.rung_values().items()}


def fitted_names(config: SweepConfig) -> list[str]:
    """The searched knobs the local quadratic estimates (all but categorical ones), sorted."""
    return sorted(n for n, d in config.search.space.items() if not is_categorical(d))


def _needed(config: SweepConfig) -> int:
    return 2 * len(fitted_names(config)) + 3


def common_rung(config: SweepConfig, outcomes: list[Any]) -> int | None:
    """The highest rung (steps) with at least 2·k + 3 finite trials at every width, or None;
    optima must compare at equal budget (Wu et al. 2018; microsoft/mup#64)."""
    need = _needed(config)
    common = None
    for o in outcomes:
        ok = {m for m, v in _fit_rungs(config, o).items() if len(v) >= need}
        common = ok if common is None else common & ok
    return max(common) if common else None


def width_optimum(config: SweepConfig, outcome: Any, best: Any, *,
                  milestone: int | None = None) -> WidthOptimum:
    """The optimum of every searched hyperparameter at one proxy width.

    At ``milestone`` when it holds 2·k + 3 finite trials, else the highest rung that does, else
    the fullest; falls back to the best trial's values when the quadratic cannot be fitted. A
    categorical knob takes :func:`mutune.pipeline.choice_optimum.best_choice`'s name. Values are
    in each hyperparameter's unit."""
    from mutune.scaling import Neighbourhood, estimate_optimum

    names = fitted_names(config)
    cats = sorted(set(config.search.space) - set(names))
    hp_of = {t.key: t.point["hparams"] for t in outcome.trials}
    rungs = _fit_rungs(config, outcome)
    need = _needed(config)
    full = sorted((m for m, v in rungs.items() if len(v) >= need), reverse=True)
    if milestone in full:      # the requested rung first; lower rungs still feed the horizon
        full = [milestone] + [m for m in full if m < milestone]
    bounds = log_bounds(config, names)
    seed = config.seed

    def fit(m: int) -> Any:
        keys = sorted(rungs[m])
        log_h = np.array([[math.log(hp_of[k][n]) for n in names] for k in keys])
        return estimate_optimum(log_h, np.array([rungs[m][k] for k in keys]), names=names,
                                mode=config.search.mode, n_boot=config.transfer.n_boot_optimum,
                                seed=seed, region=Neighbourhood(bounds=bounds))

    milestone = full[0] if full else max(rungs, key=lambda m: (len(rungs[m]), m))
    db_id = {t.key: t.trial_id for t in outcome.trials}
    out: dict[str, Any] = {"milestone": milestone, "n_trials": len(rungs[milestone]),
                           "trial_ids": sorted(db_id[k] for k in rungs[milestone]),
                           "optimum_horizon": f"rung {milestone} of max_t "
                                              f"{config.search.scheduler.max_t}",
                           "horizon": None, "fallback_reason": None, "choices": {}}
    chosen = _choose_categoricals(config, cats, names, hp_of, rungs, milestone, best,
                                  out["choices"])
    nofit = {"interval": {c: None for c in cats}, "on_edge": {c: False for c in cats},
             "edge_side": {c: None for c in cats}}
    try:
        opt = fit(milestone)
    except FitError as err:
        hp = hp_of[best.trial]
        out.update(method="best-trial",
                   optimum={**{n: as_value(hp[n]) for n in names}, **chosen},
                   interval={n: None for n in [*names, *cats]},
                   on_edge={n: False for n in [*names, *cats]},
                   edge_side={n: None for n in [*names, *cats]}, fallback_reason=str(err),
                   milestone=best.milestone, n_trials=best.n_trials,
                   trial_ids=[db_id[best.trial]],
                   optimum_horizon=f"rung {best.milestone} of max_t "
                                   f"{config.search.scheduler.max_t}")
        return WidthOptimum(**out)
    out.update(method=opt.method, optimum={**{n: opt.value(n) for n in names}, **chosen},
               interval={**{n: (list(opt.value_interval(n))
                                if all(map(math.isfinite, opt.interval[n])) else None)
                            for n in names}, **nofit["interval"]},
               on_edge={**dict(opt.on_edge), **nofit["on_edge"]},
               edge_side={**dict(opt.edge_side), **nofit["edge_side"]}, **surface_fields(opt))
    if "lr" in names and len(full) >= 2:
        out["horizon"] = _lr_horizon(config, full, fit)
    return WidthOptimum(**out)


def _choose_categoricals(config: SweepConfig, cats: list[str], names: list[str],
                         hp_of: dict[str, Any], rungs: dict[int, dict[str, float]],
                         milestone: int, best: Any, evidence: dict[str, Any]) -> dict[str, Any]:
    """Each categorical knob's best name at ``milestone`` (the best trial's without one);
    its evidence into ``evidence``."""
    from mutune.pipeline.choice_optimum import best_choice, late_disagreement

    seed = config.seed
    chosen = {}
    for c in cats:
        chosen[c], evidence[c] = best_choice(
            c, list(config.search.space[c].values), hp_of, rungs[milestone],
            mode=config.search.mode, numeric=names, n_boot=config.transfer.n_boot_optimum,
            seed=seed)
        if chosen[c] is None:
            chosen[c] = hp_of[best.trial][c]
        evidence[c].update(milestone=milestone, metric=config.search.metric,
                           **late_disagreement(c, chosen[c], rungs, milestone, hp_of,
                                               config.search.mode))
    return chosen


def _lr_horizon(config: SweepConfig, full: list[int], fit: Any) -> dict[str, Any] | None:
    """The short-horizon fit of lr*(steps) across the rungs ``full`` (None: < 2 rungs fit)."""
    from mutune.scaling import fit_horizon

    per_rung = []
    for m in sorted(full):
        try:
            o = fit(m)
        except FitError:
            continue
        per_rung.append((m, o.center["lr"]))
    if len(per_rung) < 2:
        return None
    try:
        h = fit_horizon([m for m, _ in per_rung], [v for _, v in per_rung],
                        target_steps=config.target_steps, n_boot=200, seed=config.seed)
    except FitError as err:
        return {"error": str(err)}
    return {"rungs": [m for m, _ in per_rung],
            "optimum_lr_per_rung": [math.exp(v) for _, v in per_rung],
            "exponent": h.exponent, "highest_rung_lr": h.highest_rung_lr,
            "extrapolated_lr": h.extrapolated_lr, "target_steps": config.target_steps}


def target_train_settings(config: SweepConfig, lr: float,
                          weight_decay: float | None = None) -> dict[str, Any]:
    """Batch size and weight decay of the target run, and the published-rule factors on its lr:
    batch (Malladi et al. 2022 for Adam, Goyal et al. 2017 for SGD), tokens (D_t/D_p)^-β
    (Bjorck et al. 2025) and the AdamW timescale τ = B/(η·λ·D) (Wang & Aitchison 2024)."""
    from mutune.scaling import (adamw_timescale, adamw_weight_decay_for, scale_lr_for_batch,
                                scale_lr_for_tokens)

    t, tr = config.target, config.transfer
    bp = config.train.batch_size
    bt = t.batch_size or bp
    adjustments = []
    new_lr = lr
    if bt != bp and tr.lr_batch_rule != "none":
        kind = ("sgd" if config.train.optimizer == "sgd" else "adam") \
            if tr.lr_batch_rule == "auto" else ("sgd" if tr.lr_batch_rule == "linear"
                                                 else "adam")
        scaled = scale_lr_for_batch(new_lr, bp, bt, kind)
        adjustments.append({"rule": f"batch {bp}→{bt} ({kind})", "factor": scaled / new_lr})
        new_lr = scaled
    d_p = config.search.scheduler.max_t * bp
    d_t = config.target_steps * bt
    if tr.token_beta is not None and d_t != d_p:
        scaled = scale_lr_for_tokens(new_lr, d_p, d_t, beta=tr.token_beta)
        adjustments.append({"rule": f"samples {d_p}→{d_t} (β={tr.token_beta})",
                            "factor": scaled / new_lr})
        new_lr = scaled
    wd = config.train.weight_decay if weight_decay is None else float(weight_decay)
    if wd > 0 and tr.weight_decay_rule == "timescale" and (bt != bp or d_t != d_p
                                                            or new_lr != lr):
        tau = adamw_timescale(lr, wd, d_p, bp)
        wd_t = adamw_weight_decay_for(lr=new_lr, dataset_size=d_t, batch_size=bt,
                                      tau_epochs=tau.tau_epochs)
        adjustments.append({"rule": f"AdamW timescale τ={tau.tau_epochs:.4g} epochs",
                            "weight_decay": wd_t})
        wd = wd_t
    return {"lr": new_lr, "batch_size": bt, "weight_decay": wd, "adjustments": adjustments}


def transfer_rules(config: SweepConfig, widths: list[int],
                   optima: list[WidthOptimum], depths: list[int] | None = None
                   ) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
    """Fit every searched hyperparameter's transfer rule, its verdict and transferred value
    (docs/transfer.md §8; TP V Table 1 and §3; :func:`mutune.pipeline.fitted_rule.fitted_rule`).

    Returns (rule rows, the target's hyperparameters, its training settings).

    Raises:
        FitError: a rule cannot be fitted (fewer than 2 widths, non-positive optima)."""
    target_w = config.target.width
    rows, hp = [], dict(config.search.fixed)
    for name in sorted(config.search.space):
        dist = config.search.space[name]
        if isinstance(dist, Choice) or name in NOT_TRANSFERRED:
            row = unfitted_rule(name, dist, widths, optima, target_w, depths)
            hp[name] = row["transferred_value"]
            rows.append(row)
            continue
        row = fitted_rule(config, name, dist, widths, optima, depths)
        hp[name] = row["transferred_value"]
        rows.append(row)
    settings = target_train_settings(config, hp["lr"], hp.get("weight_decay"))
    if "weight_decay" in config.search.space and settings["weight_decay"] != hp["weight_decay"]:
        for r in rows:
            if r["hyperparameter"] == "weight_decay":
                r["published_adjustments"] = [a for a in settings["adjustments"]
                                              if "weight_decay" in a]
                r["value_after_adjustments"] = settings["weight_decay"]
        hp["weight_decay"] = settings["weight_decay"]
    if settings["lr"] != hp["lr"]:
        for r in rows:
            if r["hyperparameter"] == "lr":
                r["published_adjustments"] = settings["adjustments"]
                r["value_after_adjustments"] = settings["lr"]
        hp["lr"] = settings["lr"]
    return rows, hp, settings


def loss_law(config: SweepConfig, widths: list[int], n_params: list[float],
             losses: list[float], target_params: float,
             depths: list[int] | None = None) -> dict[str, Any]:
    """Fit L(N) = E + A·N^-α on the best loss per proxy size and predict the target's loss with a
    95 % interval (Kaplan et al. 2020 §3; Hoffmann et al. 2022 §3.2); a row with ``error`` when
    fewer than 3 sizes or losses do not fall with size."""
    from mutune.scaling import fit_loss_law

    row: dict[str, Any] = {"kind": "loss_vs_params", "widths": widths, "n_params": n_params,
                           "losses": losses, "target_width": config.target.width,
                           "target_params": target_params}
    order = np.argsort(n_params)
    ls = np.asarray(losses, dtype=float)[order]
    falls = bool(len(ls) >= 2 and np.all(np.diff(ls) < 0))
    row["falls_with_size"] = falls
    if len(ls) >= 2 and not falls:
        row["error"] = ("the proxies' best losses do not fall with size ("
                        + ", ".join(f"{size_label(int(widths[i]), depths[i] if depths else None)}"
                                    f": {v:.4g}" for i, v in zip(order, ls))
                        + "): a loss law through them would predict nothing; no prediction")
        return row
    try:
        law = fit_loss_law(n_params, losses, n_boot=config.transfer.n_boot,
                           seed=config.seed)
    except FitError as err:
        row["error"] = str(err)
        return row
    lo, hi = law.predict_interval(target_params)
    row.update(form=law.form, E=law.E, A=law.A, alpha=law.alpha,
               identifiable=law.identifiable,
               intervals={k: list(v) for k, v in law.intervals.items()},
               predicted_val_loss=law.predict(target_params),
               predicted_val_loss_interval=[lo, hi])
    return row
