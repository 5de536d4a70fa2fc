"""A trial's evaluation at a report: each model's validation (and at max_t test) loss."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["evaluate_models", "replicate_mean", "replicate_se"]

_NAN = (float("nan"), float("nan"))


def evaluate_models(task: Any, models: list[Any], dev: Any, parallel: Any = None, *,
                    test: bool = False) -> tuple[list[tuple[float, float]],
                                                 list[tuple[float, float]]]:
    """Each model's (val loss, se) and, with ``test``, (test loss, se), in nats."""
    splits = ["val", "test"] if test else ["val"]
    if parallel is not None and parallel.world > 1 and task.eval_splits_into_parts:
        from mutune.proxies.task import loss_summary

        with dev.compute():
            moments = [v for s in splits for m in models
                       for v in task.eval_moments(m, s, rank=parallel.rank,
                                                  world=parallel.world)]
        summed = parallel.sum(moments)
        figs = [loss_summary(*summed[i:i + 3]) for i in range(0, len(summed), 3)]
        return figs[:len(models)], figs[len(models):]
    vals, tests = [_NAN], []
    if parallel is None or parallel.lead:
        with dev.compute():
            vals = [task.evaluate(m, "val") for m in models]
            tests = [task.evaluate(m, "test") for m in models] if test else []
    if parallel is not None:     # the leading worker's figures, on every worker
        vals, tests = parallel.share((vals, tests))
    return vals, tests


def replicate_mean(evals: list[tuple[float, float]]) -> float:
    """Mean over replicates of (mean, standard error) evaluations."""
    return sum(m for m, _ in evals) / len(evals)


def replicate_se(evals: list[tuple[float, float]]) -> float:
    """Standard error of the replicates' mean: √(Σ se_i²) / R (independent evaluations)."""
    return math.sqrt(sum(se * se for _, se in evals)) / len(evals)
