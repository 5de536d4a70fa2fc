"""The target stage: predict the full-size run's loss, admit it under the budget, train it.

The loss law over the proxies predicts the target's loss before it runs; with a budget, the
target starts only if its estimate fits; then the one target-size run trains with the
transferred hyperparameters through the Ray Tune backend, recorded as a target run.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from mutune.errors import SearchError, SweepStopped
from mutune.pipeline.sweep import ProxyResult, SweepRun, bind_progress

__all__ = ["predict_target_loss", "admit_target", "train_target"]


def predict_target_loss(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
                        target_hp: dict[str, float]) -> dict[str, Any]:
    """Before the target run: fit the loss law on each proxy width's best loss at equal budget
    (its value at the chosen rung, the highest holding at least 3 trials — trials that merely
    completed are not the best, asynchronous ASHA lets early arrivals finish) against the
    width's parameter count, predict the target's loss, and record the law.

    Returns:
        The recorded law row (with ``predicted_val_loss`` and its interval when it fitted).
    """
    from mutune.proxies.parametrization import count_parameters
    from mutune.pipeline.transfer_stage import loss_law

    widths, n_params, losses, rungs = [], [], [], []
    for p, outcome in swept:
        sized = [t for t in outcome.trials if t.reports and "n_params" in t.reports[-1]]
        if not sized or not math.isfinite(p.best_val_loss):
            continue
        widths.append(p.width)
        n_params.append(float(sized[0].reports[-1]["n_params"]))
        losses.append(p.best_val_loss)       # best value at the width's chosen rung
        rungs.append(p.milestone)
    target_params = float(count_parameters(run.task.build(run.config.target.width,
                                                          target_hp)))
    law = loss_law(run.config, widths, n_params, losses, target_params)
    law["rungs"] = rungs
    run.recorder.law_fitted(run.sweep_id, law)
    return law


def admit_target(run: SweepRun, law: dict[str, Any]) -> None:
    """With a budget: the target run starts only if its estimate fits (the widest proxy's
    seconds per step × the parameter ratio × the target's steps, plus the per-trial overhead).

    Raises:
        SweepStopped: ``budget_exhausted``, the target run would exceed the budget.
    """
    gate = run.budget
    if gate is None or not gate.books:
        return
    n_params, target_params = law.get("n_params") or [], law.get("target_params")
    ratio = (float(target_params) / float(n_params[-1]) if n_params and target_params
             else (run.config.target.width / run.config.widths[-1]) ** 2)
    proxy_books = [b for b in gate.books if b.kind == "proxy"]
    est = gate.estimate_gpu_hours(proxy_books[-1], run.config.target_steps, scale=ratio)
    if not gate.admits(est, f"the target run at width {run.config.target.width}"):
        raise SweepStopped("budget_exhausted", gate.exhausted)


def train_target(run: SweepRun, target_hp: dict[str, float],
                 settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """The one target-size run with ``target_hp``, through Ray, recorded as a target run;
    ``settings`` may change its batch size and weight decay (:func:`fit_rules`).

    Returns:
        (target summary: width, config, val_loss, steps, trial_id; its TrialRecord).
    Raises:
        SearchError: the target run did not complete (diverged or failed).
    """
    from mutune.search.searchers.space import trial_seeds
    from mutune.search.backends.ray_tune.run import run_trials

    config, recorder = run.config, run.recorder
    search = config.search
    tseed = trial_seeds(config.seed, len(config.widths), 1)[0]
    started: dict[str, int] = {}

    def open_target(trial_id: int) -> None:
        started["target"] = recorder.target_started(run.sweep_id, trial_id,
                                                    config.target.width, target_hp)

    task = run.task
    if settings and (settings["batch_size"] != config.train.batch_size
                     or settings["weight_decay"] != config.train.weight_decay):
        task = dataclasses.replace(task, train=task.train.model_copy(update={
            "batch_size": settings["batch_size"], "weight_decay": settings["weight_decay"]}))
    outcome = run_trials([{"hparams": target_hp, "seed": tseed, "index": 0}], task=task,
                         width=config.target.width, max_t=config.target_steps,
                         recorder=recorder, control=run.control, sweep_id=run.sweep_id,
                         proxy_sweep_id=None,
                         kind="target", scheduler=None, metric=search.metric,
                         mode=search.mode, ray_cfg=config.ray, storage=run.out_dir / "ray",
                         name=f"sweep{run.sweep_id}-target", seq=run.seq,
                         on_progress=bind_progress(run.on_progress,
                                                   f"target {config.target.width}", 1),
                         on_started=open_target, tracking=config.tracking, group="target",
                         checkpoint_every=config.train.checkpoint_every,
                         checkpoint_keep=config.train.checkpoint_keep)
    trec = outcome.trials[0] if outcome.trials else None
    if outcome.stopped is not None:
        if trec is not None and "target" in started:
            recorder.target_finished(started["target"], None, trec.status)
        raise SweepStopped("cancelled", outcome.stopped)
    if trec is None or "target" not in started:
        raise SearchError("the target run never started")
    val = trec.reports[-1]["val_loss"] if trec.reports else None
    recorder.target_finished(started["target"], val, trec.status)
    if trec.status != "completed":
        raise SearchError(f"target run {trec.status}: {trec.reason}")
    return ({"width": config.target.width, "config": target_hp, "val_loss": val,
             "steps": trec.last_step, "trial_id": trec.trial_id}, trec)
