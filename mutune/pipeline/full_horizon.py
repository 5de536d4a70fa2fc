"""Each width's optimum from the values at the full horizon (``max_t``), not at a rung
(docs/transfer.md §2)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from mutune.config import SweepConfig
from mutune.errors import FitError
from mutune.pipeline.transfer_stage import log_bounds
from mutune.pipeline.optimum_record import WidthOptimum, surface_fields

__all__ = ["full_horizon_trials", "full_horizon_optimum"]


def full_horizon_trials(config: SweepConfig, outcomes: list[Any]) -> list[dict[str, Any]]:
    """Every trial of ``outcomes`` with a finite value at ``max_t``: completed ASHA trials and every
    confirmation trial."""
    max_t = config.search.scheduler.max_t
    metric = config.search.metric
    out = []
    for o in outcomes:
        for t in o.trials:
            last = t.reports[-1] if t.reports else None
            if last is None or int(last["step"]) != max_t:
                continue
            v = float(last.get(metric, math.nan))
            if not math.isfinite(v):
                continue
            test = last.get("test_loss")
            out.append({"key": t.key, "trial_id": t.trial_id,
                        "hparams": dict(t.point["hparams"]), "seed": t.point.get("seed"),
                        "value": v, "test": None if test is None else float(test)})
    return out


def full_horizon_optimum(config: SweepConfig, outcomes: list[Any], center: dict[str, float],
                         ) -> WidthOptimum:
    """The optimum at one width from the values at ``max_t``: the local quadratic of
    :func:`mutune.scaling.estimate_optimum` with a bootstrap over trials; ``choice``
    hyperparameters keep ``center``'s values. Falls back to the best configuration (seed mean),
    saying why, when the quadratic cannot be fitted."""
    from mutune.pipeline.confirm_stage import design_names
    from mutune.scaling import Neighbourhood, estimate_optimum

    names = design_names(config)
    fixed_choice = {n: center[n] for n in config.search.space if n not in names}
    rows = [r for r in full_horizon_trials(config, outcomes)
            if all(r["hparams"].get(n) == v for n, v in fixed_choice.items())]
    max_t = config.search.scheduler.max_t
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r["hparams"][n] for n in names), []).append(r)
    out: dict[str, Any] = {"milestone": max_t, "optimum_horizon": "max_t", "horizon": None,
                           "n_trials": len(rows),
                           "n_points": len(groups),
                           "n_seeds": len({r["seed"] for r in rows}),
                           "trial_ids": sorted(r["trial_id"] for r in rows),
                           "fallback_reason": None}
    if not groups:
        raise FitError(f"no trial reached max_t = {max_t} with a finite value")
    best_rows, best = _best_config(config, groups)
    out.update(best)
    log_h = np.array([[math.log(r["hparams"][n]) for n in names] for r in rows])
    vals = np.array([r["value"] for r in rows])
    bounds, ok = _fit_bounds(config, names, log_h)
    try:
        opt = estimate_optimum(log_h, vals, names=names, mode=config.search.mode,
                               n_boot=config.transfer.n_boot_optimum, seed=config.seed,
                               region=Neighbourhood(bounds=bounds if ok else None,
                                                    extreme_is_edge=False))
    except FitError as err:
        hp = best_rows[0]["hparams"]
        out.update(method="best-trial", optimum={**fixed_choice,
                                                 **{n: float(hp[n]) for n in names}},
                   interval={n: None for n in config.search.space},
                   on_edge={n: False for n in config.search.space},
                   edge_side={n: None for n in config.search.space},
                   clipped={n: False for n in config.search.space},
                   fallback_reason=str(err))
        return WidthOptimum(**out)
    out.update(method=opt.method,
               optimum={**fixed_choice, **{n: opt.value(n) for n in names}},
               interval={**{n: None for n in fixed_choice},
                         **{n: (list(opt.value_interval(n))
                                if all(map(math.isfinite, opt.interval[n])) else None)
                            for n in names}},
               on_edge={**{n: False for n in fixed_choice}, **dict(opt.on_edge)},
               edge_side={**{n: None for n in fixed_choice}, **dict(opt.edge_side)},
               clipped={**{n: False for n in fixed_choice}, **dict(opt.clipped)},
               stationary={n: math.exp(opt.stationary[n]) for n in names},
               searched_range={n: [math.exp(bounds[j, 0]), math.exp(bounds[j, 1])]
                               for j, n in enumerate(names)}, **surface_fields(opt))
    return WidthOptimum(**out)


def _best_config(config: SweepConfig, groups: dict[tuple, list[dict[str, Any]]]
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The configuration with the best seed-mean value (the fallback), and its figures."""
    means = {k: sum(r["value"] for r in g) / len(g) for k, g in groups.items()}
    best_key = min(means, key=means.get) if config.search.mode == "min" else \
        max(means, key=means.get)
    best_rows = groups[best_key]
    tests = [r["test"] for r in best_rows if r["test"] is not None]
    return best_rows, dict(best_val_loss=means[best_key],
                           best_test_loss=sum(tests) / len(tests) if tests else None,
                           best_config={**best_rows[0]["hparams"]}, best_seeds=len(best_rows),
                           best_trial_id=best_rows[0]["trial_id"])


def _fit_bounds(config: SweepConfig, names: list[str], log_h: np.ndarray
                ) -> tuple[np.ndarray, bool]:
    """The region searched so far (the trials' and the sweep's range, log units), and whether
    it is wide along every axis."""
    searched = log_bounds(config, names)
    bounds = np.column_stack([log_h.min(axis=0), log_h.max(axis=0)])
    if searched is not None:
        bounds = np.column_stack([np.minimum(bounds[:, 0], searched[:, 0]),
                                  np.maximum(bounds[:, 1], searched[:, 1])])
    return bounds, bool(np.all(bounds[:, 0] < bounds[:, 1]))
