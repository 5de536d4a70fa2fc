"""A proxy sweep's best trial at equal budget, as a :class:`~mutune.pipeline.sweep.ProxyResult`
(docs/architecture.md §4), and the trials' learning curves the choice reads."""
from __future__ import annotations

from typing import Any

from mutune.pipeline.sweep import ProxyResult, SweepRun, record_best

__all__ = ["width_result", "trial_curves"]


def width_result(run: SweepRun, width: int, proxy_sweep_id: int, outcome: Any, *,
                 record: bool = True, depth: int | None = None) -> ProxyResult:
    """The width's best trial at equal budget (docs/architecture.md §4) and its optimum.

    Raises:
        SearchError: no rung holds a finite value (every trial diverged or failed)."""
    from mutune.pipeline.transfer_stage import width_optimum
    from mutune.search.best import best_at_rung

    search = run.config.search
    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope,
                        curves=trial_curves(outcome.trials, search.metric))
    rec = next(t for t in outcome.trials if t.key == best.trial)
    result = ProxyResult(width, proxy_sweep_id, rec.trial_id, dict(rec.point["hparams"]),
                         best.value, best.milestone, len(outcome.trials),
                         width_optimum(run.config, outcome, best), depth=depth)
    if record:
        record_best(run, result, best.n_trials)
    return result


def trial_curves(trials: list[Any], metric: str) -> dict[str, list[tuple]]:
    """Trial key → [(step, value of ``metric``), …] of its recorded reports."""
    return {t.key: [(int(r["step"]), float(r[metric])) for r in t.reports if metric in r]
            for t in trials}
