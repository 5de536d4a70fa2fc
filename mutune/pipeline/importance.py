"""fANOVA importance of the searched hyperparameters at the widest proxy (Hutter, Hoos &
Leyton-Brown 2014, ICML, §3; Optuna's ``FanovaImportanceEvaluator``)."""
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
    """fANOVA importance of every searched hyperparameter at one proxy width, at the highest rung
    with :data:`MIN_TRIALS` finite values (else with ``error``)."""
    row: dict[str, Any] = {"width": width, "method": "fANOVA (Hutter et al. 2014; optuna)"}
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
    params = [{n: hp[k][n] for n in names} for k in sorted(rungs[step])]
    values = [rungs[step][k] for k in sorted(rungs[step])]
    args = (params, values, _distributions(config),
            "minimize" if config.search.mode == "min" else "maximize", config.seed)
    imp = _in_child_process(_fanova, *args)
    row.update(step=step, n_trials=len(values), importances=imp)
    return row


def _fanova(params: list[dict[str, Any]], values: list[float], distributions: dict[str, Any],
            direction: str, seed: int) -> dict[str, float]:
    import optuna

    trials = [optuna.trial.create_trial(params=p, distributions=distributions, value=v)
              for p, v in zip(params, values)]
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction=direction)
        study.add_trials(trials)
        imp = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed))
    finally:
        optuna.logging.set_verbosity(before)
    return {k: float(v) for k, v in imp.items()}


def _in_child_process(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a short-lived child interpreter, keeping scikit-learn out of the driver
    (benchmarks/driver_memory.py); in this process where no child can run."""
    import pickle
    import subprocess
    import sys

    code = ("import pickle, sys, importlib; m, n, a = pickle.load(sys.stdin.buffer); "
            "r = getattr(importlib.import_module(m), n)(*a); "
            "sys.stdout.buffer.write(pickle.dumps(r))")
    try:
        out = subprocess.run([sys.executable, "-c", code],
                             input=pickle.dumps((fn.__module__, fn.__qualname__, args)),
                             capture_output=True, check=True, timeout=600)
        return pickle.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, pickle.UnpicklingError, EOFError):
        return fn(*args)
