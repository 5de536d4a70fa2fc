"""Which hyperparameters matter at the proxies: fANOVA importance on the recorded trials.

Each searched hyperparameter's share of the variance of the validation loss over the searched
space, from a random forest fitted to the trials (Hutter, Hoos & Leyton-Brown 2014, "An
Efficient Approach for Assessing Hyperparameter Importance", ICML, §3; Optuna's
``FanovaImportanceEvaluator``). The widest proxy's first-round sweep is used, at the highest
rung holding enough trials (every trial there was trained the same number of steps), so the
figure describes the whole searched range, not the confirmation design's neighbourhood.
"""
from __future__ import annotations

import math
from typing import Any

from mutune.config import Choice, LogUniform, SweepConfig

__all__ = ["proxy_importance", "MIN_TRIALS"]

#: fewest trials at one rung for an importance estimate
MIN_TRIALS = 8


def _distributions(config: SweepConfig) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    out = {}
    for name, d in config.search.space.items():
        if isinstance(d, Choice):
            out[name] = CategoricalDistribution(list(d.values))
        else:
            out[name] = FloatDistribution(d.low, d.high, log=isinstance(d, LogUniform))
    return out


def proxy_importance(config: SweepConfig, width: int, outcome: Any) -> dict[str, Any]:
    """fANOVA importance of every searched hyperparameter at one proxy width.

    Args:
        width: the proxy width; outcome: its first-round sweep (``core.rung_values()``:
            milestone → {trial key: value}; ``trials`` with their points).
    Returns:
        JSON-able {"kind": "importance", "width", "step" (the rung), "n_trials",
        "importances": {name: share, summing to 1}, "method"}, or with ``error`` when no
        rung holds :data:`MIN_TRIALS` finite values or one hyperparameter is searched.
    References:
        Hutter et al. 2014, ICML, §3 (functional ANOVA on a random forest).
    """
    import optuna

    row: dict[str, Any] = {"kind": "importance", "width": width,
                           "method": "fANOVA (Hutter et al. 2014; optuna)"}
    names = sorted(config.search.space)
    if len(names) < 2:
        row["error"] = f"one hyperparameter searched ({names[0]}): its share is 1 by definition"
        return row
    rungs = {m: {k: v for k, v in vals.items() if math.isfinite(v)}
             for m, vals in outcome.core.rung_values().items()}
    full = [m for m, v in rungs.items() if len(v) >= MIN_TRIALS]
    if not full:
        row["error"] = (f"no rung holds {MIN_TRIALS} finite values "
                        f"({ {m: len(v) for m, v in rungs.items()} })")
        return row
    step = max(full)
    hp = {t.key: t.point["hparams"] for t in outcome.trials}
    dists = _distributions(config)
    trials = [optuna.trial.create_trial(params={n: hp[k][n] for n in names},
                                        distributions=dists, value=v)
              for k, v in sorted(rungs[step].items())]
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(
            direction="minimize" if config.search.mode == "min" else "maximize")
        study.add_trials(trials)
        imp = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=config.seed))
    finally:
        optuna.logging.set_verbosity(before)
    row.update(step=step, n_trials=len(trials),
               importances={k: float(v) for k, v in imp.items()})
    return row
