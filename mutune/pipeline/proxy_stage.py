"""The proxy stage: one sweep per proxy width, each width's best trial and optimum.

:func:`sweep_width` runs one width's ASHA/Hyperband sweep on the Ray Tune backend and picks its
best trial at equal budget (the highest rung holding at least 3 trials, docs/architecture.md §4);
:func:`align_optima` then re-estimates every width's optimum at one common rung.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mutune.errors import SweepStopped
from mutune.pipeline.sweep import ProxyResult, SweepRun, bind_progress

__all__ = ["sweep_width", "run_width", "width_result", "align_optima", "record_best",
           "trial_curves", "proxy_settings", "width_seeds"]


def proxy_settings(run: SweepRun) -> dict[str, Any]:
    """What a proxy sweep row records of its settings (scheduler with the sweep seed,
    searcher, samples, replicates, metric, mode, parametrization)."""
    config = run.config
    search, sched = config.search, config.search.scheduler
    return {"scheduler": {**sched.model_dump(), "seed": config.seed},
            "searcher": search.searcher, "num_samples": search.num_samples,
            "replicates": search.replicates, "metric": search.metric, "mode": search.mode,
            "parametrization": config.model.parametrization}


def width_seeds(run: SweepRun, index: int) -> list[int]:
    """The training seeds of proxy width number ``index``: ``replicates`` per trial."""
    from mutune.search.searchers.space import trial_seeds

    search = run.config.search
    return trial_seeds(run.config.seed, index, search.num_samples * search.replicates)


def run_width(run: SweepRun, width: int, index: int, proxy_sweep_id: int, searcher: Any, *,
              core: Any = None, resume: Any = None, name: str | None = None) -> Any:
    """The Ray Tune run of one proxy width (a fresh one, or an interrupted one continued with
    its restored ``core``, ``searcher`` and :class:`~mutune.search.backends.ray_tune.run.
    ResumeState`); returns its RunOutcome.

    Raises:
        SweepStopped: ``mutune cancel`` stopped it.
    """
    from mutune.search.backends.ray_tune.run import run_trials

    config = run.config
    search, sched = config.search, config.search.scheduler
    outcome = run_trials(None, task=run.task, width=width, max_t=sched.max_t,
                         recorder=run.recorder, control=run.control, sweep_id=run.sweep_id,
                         proxy_sweep_id=proxy_sweep_id, kind="proxy", scheduler=sched,
                         metric=search.metric, mode=search.mode, ray_cfg=config.ray,
                         storage=run.out_dir / "ray",
                         name=name or f"sweep{run.sweep_id}-w{width}", seq=run.seq,
                         on_progress=bind_progress(run.on_progress, f"width {width}",
                                                   search.num_samples),
                         scheduler_seed=config.seed, searcher=searcher,
                         seeds=width_seeds(run, index),
                         checkpoint_every=config.train.checkpoint_every,
                         spot=config.cost.spot.model_dump(),
                         checkpoint_keep=config.train.checkpoint_keep, core=core,
                         resume=resume, budget=run.budget, tracking=config.tracking,
                         replicates=search.replicates)
    if outcome.stopped is not None:
        raise SweepStopped("cancelled", outcome.stopped)
    return outcome


def width_result(run: SweepRun, width: int, proxy_sweep_id: int, outcome: Any, *,
                 record: bool = True) -> ProxyResult:
    """The width's best trial at equal budget (the highest rung holding at least 3 trials,
    docs/architecture.md §4) and its optimum per hyperparameter; recorded unless ``record``
    is False (a width that had already finished).

    Raises:
        SearchError: no rung holds a finite value (every trial diverged or failed).
    """
    from mutune.pipeline.transfer_stage import width_optimum
    from mutune.search.best import best_at_rung

    search = run.config.search
    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope, curves=trial_curves(outcome.trials))
    rec = next(t for t in outcome.trials if t.key == best.trial)
    result = ProxyResult(width, proxy_sweep_id, rec.trial_id, dict(rec.point["hparams"]),
                         best.value, best.milestone, len(outcome.trials),
                         width_optimum(run.config, outcome, best))
    if record:
        record_best(run, result, best.n_trials)
    return result


def sweep_width(run: SweepRun, width: int, index: int) -> tuple[ProxyResult, Any]:
    """One ASHA/Hyperband sweep at ``width`` (proxy number ``index``, which seeds its trials),
    and its best trial at the highest rung with at least 3 trials (docs/architecture.md §4).

    Returns:
        (ProxyResult, the run's :class:`~mutune.search.backends.ray_tune.run.RunOutcome`).
    Raises:
        SearchError: every trial diverged or failed.
        SweepStopped: cancelled, or the budget ran out (``budget_exhausted``).
    """
    from mutune.search.searchers import make_searcher

    config = run.config
    searcher = make_searcher(config.search, config.seed, index)
    ps_id = run.recorder.proxy_sweep_started(run.sweep_id, width, proxy_settings(run))
    outcome = run_width(run, width, index, ps_id, searcher)
    return _after_budget(run, width, ps_id, outcome)


def _after_budget(run: SweepRun, width: int, ps_id: int, outcome: Any
                  ) -> tuple[ProxyResult, Any]:
    cut = run.budget.exhausted if run.budget is not None else None
    if cut is not None and not any(t.reports for t in outcome.trials):
        raise SweepStopped("budget_exhausted", f"{cut}; width {width} got no trial")
    result = width_result(run, width, ps_id, outcome)
    if cut is not None:
        raise SweepStopped("budget_exhausted", f"{cut}; width {width} kept "
                                               f"{len(outcome.trials)} of "
                                               f"{run.config.search.num_samples} trials")
    return result, outcome


def record_best(run: SweepRun, p: ProxyResult, rung_trials: int) -> None:
    """Record the width's best trial and optimum on its proxy sweep row."""
    run.recorder.proxy_sweep_finished(p.proxy_sweep_id, {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "config": p.best_config,
        "val_loss": p.best_val_loss, "trials": p.trials, "rung_trials": rung_trials,
        "optimum": p.optimum})


def align_optima(run: SweepRun, swept: list[tuple[ProxyResult, Any]]
                 ) -> list[tuple[ProxyResult, Any]]:
    """Re-estimate every width's optimum at one common rung
    (:func:`mutune.pipeline.transfer_stage.common_rung`)
    so the transfer rule compares the widths at equal budget (docs/architecture.md §4). Widths
    already
    estimated at that rung are kept as they are; with no common rung nothing changes.

    Args:
        swept: (ProxyResult, RunOutcome) per width, as :func:`sweep_width` returns them.
    Returns:
        The same list with ``ProxyResult.optimum`` replaced where the rung differed.
    """
    from mutune.search.best import best_at_rung
    from mutune.pipeline.transfer_stage import common_rung, width_optimum

    config = run.config
    m = common_rung(config, [o for _, o in swept])
    if m is None:
        return swept
    out = []
    for p, o in swept:
        if p.optimum.get("milestone") != m:
            best = best_at_rung(o.core.rung_values(), mode=config.search.mode, min_trials=3,
                                scope=config.search.best_scope, curves=trial_curves(o.trials))
            p = dataclasses.replace(p, optimum={**width_optimum(config, o, best, milestone=m),
                                                "aligned_from": p.optimum.get("milestone")})
            record_best(run, p, best.n_trials)
        out.append((p, o))
    return out


def trial_curves(trials: list[Any], metric: str = "val_loss") -> dict[str, list[tuple]]:
    """Trial key → [(step, value), …] of its recorded reports (for ``best-so-far``)."""
    return {t.key: [(int(r["step"]), float(r[metric])) for r in t.reports if metric in r]
            for t in trials}
