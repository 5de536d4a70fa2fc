"""The target stage: predict the full-size run's loss, admit it under the budget, train it."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from mutune.errors import SearchError, SweepStopped
from mutune.search.driver.types import DIVERGE_SE
from mutune.pipeline.depth_tasks import target_task
from mutune.pipeline.fitted_rule import size_label
from mutune.pipeline.sweep import ProxyResult, SweepRun, bind_progress
from mutune.pipeline.target_devices import target_cpus, target_workers, warn_index_limit

__all__ = ["predict_target_loss", "admit_target", "train_target", "proxy_curve",
           "watch_target", "divergence_limits"]


def proxy_curve(config: Any, swept: list[tuple[ProxyResult, Any]],
                designs: list[Any]) -> dict[str, Any] | None:
    """The best proxy's seed-mean curve of the sweep's loss metric (kept as ``val_loss``/
    ``val_loss_se``) to watch the target against; None for a score metric or without one."""
    if config.search.mode != "min" or config.search.kind_of_metric != "loss":
        return None
    metric = config.search.metric
    max_t = config.search.scheduler.max_t
    best = None
    for p, o in swept:
        trials = [t for out in (o, *designs) for t in out.trials
                  if t.point["hparams"] == p.best_config and t.reports
                  and int(t.reports[-1]["step"]) == max_t and t.status == "completed"
                  and _width_of(t, p)]
        if trials and (best is None or p.best_val_loss < best[0].best_val_loss):
            best = (p, trials)
    if best is None:
        return None
    p, trials = best
    per_step: dict[int, list[tuple[float, float]]] = {}
    for t in trials:
        for r in t.reports:
            v = r.get(metric)
            if v is not None and math.isfinite(v):
                per_step.setdefault(int(r["step"]), []).append(
                    (float(v), float(r.get(f"{metric}_se") or 0.0)))
    steps = sorted(s for s, vs in per_step.items() if len(vs) == len(trials))
    mean = [sum(v for v, _ in per_step[s]) / len(trials) for s in steps]
    se = [math.sqrt(sum(e * e for _, e in per_step[s])) / len(trials) for s in steps]
    return {"width": p.width, "config": p.best_config, "seeds": len(trials), "steps": steps,
            "val_loss": mean, "val_loss_se": se, "metric": metric,
            **({"depth": p.depth} if p.depth is not None else {})}


def divergence_limits(watch: dict[str, Any] | None) -> dict[int, float] | None:
    """Per watched step, the limit a target's validation loss is held to:

        limit(s) = 2 · (L_p(s) + 3 · se_p(s))

    (L_p, se_p the best proxy's seed-mean loss and standard error, nats; 2 · L_p without a
    finite se). The target diverged when its loss − 3 se is above it, or is non-finite."""
    if not watch:
        return None
    ses = watch.get("val_loss_se") or [None] * len(watch["steps"])
    out = {}
    for s, v, se in zip(watch["steps"], watch["val_loss"], ses):
        band = DIVERGE_SE * float(se) if se is not None and math.isfinite(float(se)) else 0.0
        out[int(s)] = 2.0 * (float(v) + band)
    return out


def _width_of(trial: Any, p: ProxyResult) -> bool:
    """Whether ``trial``'s key names proxy ``p`` (``w64-t3``, ``c0w64-t3``, ``w64d4-t3``)."""
    group = f"w{p.width}" if p.depth is None else f"w{p.width}d{p.depth}"
    return trial.key.split("-")[0].endswith(group)


def watch_target(watch: dict[str, Any] | None, reports: list[dict[str, Any]],
                 target_width: int) -> dict[str, Any] | None:
    """Compare the target's validation curve with the best proxy's at the same steps; a step is
    behind when the gap exceeds 2 √(se_target² + se_proxy²). None without a proxy curve."""
    if not watch:
        return None
    metric = watch.get("metric", "val_loss")
    ref = {s: (v, e) for s, v, e in zip(watch["steps"], watch["val_loss"],
                                         watch["val_loss_se"])}
    compared, behind = [], []
    for r in reports:
        s, v = int(r["step"]), r.get(metric)
        if s not in ref or v is None or not math.isfinite(v):
            continue
        pv, pe = ref[s]
        gap = float(v) - pv
        se = math.sqrt(float(r.get(f"{metric}_se") or 0.0) ** 2 + pe ** 2)
        compared.append(s)
        if gap > 2 * se:
            behind.append({"step": s, "target": float(v), "proxy": pv, "gap": gap,
                           "two_se": 2 * se})
    note = None
    if behind:
        b = behind[-1]
        note = (f"the target (width {target_width}) is behind the best proxy ("
                f"{size_label(watch['width'], watch.get('depth'))}) at {len(behind)} of "
                f"{len(compared)} compared steps; at "
                f"step {b['step']}: {b['target']:.4g} vs {b['proxy']:.4g} nats (gap "
                f"{b['gap']:.3g} > 2·se {b['two_se']:.3g}): a transferred setting may be off")
    return {"proxy_width": watch["width"],
            **({"proxy_depth": watch["depth"]} if watch.get("depth") else {}),
            "proxy_seeds": watch["seeds"],
            "compared_steps": len(compared), "behind_steps": behind,
            "first_behind": behind[0]["step"] if behind else None, "note": note}


def predict_target_loss(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
                        target_hp: dict[str, float]) -> dict[str, Any]:
    """Fit the loss law on each proxy's best loss at equal budget against its parameter count,
    predict the target's loss, and record the law row."""
    from mutune.pipeline.transfer_stage import loss_law

    if run.config.search.kind_of_metric != "loss":
        law = {"kind": "loss_vs_params", "target_width": run.config.target.width,
               "error": f"skipped: the sweep's metric {run.config.search.metric!r} is a score "
                        "(higher is better); the loss law is fitted on losses only"}
        run.recorder.law_fitted(run.sweep_id, law)
        return law
    widths, n_params, losses, rungs, depths = [], [], [], [], []
    # one horizon: max_t where any proxy's best was trained to it (a moved width whose sweep
    # completed no trial has only its rung's best), else the common rung
    max_t = run.config.search.scheduler.max_t
    at_max_t = any(p.milestone == max_t for p, _ in swept)
    for p, outcome in swept:
        sized = [t for t in outcome.trials if t.reports and "n_params" in t.reports[-1]]
        if (not sized or not math.isfinite(p.best_val_loss)
                or (at_max_t and p.milestone != max_t)):
            continue
        widths.append(p.width)
        depths.append(p.depth)
        n_params.append(float(sized[0].reports[-1]["n_params"]))
        losses.append(p.best_val_loss)
        rungs.append(p.milestone)
    # counted on the meta device: the driver never materialises the target's weights
    target_params = float(target_task(run).n_params(run.config.target.width, target_hp))
    law = loss_law(run.config, widths, n_params, losses, target_params,
                   depths if run.config.depth_ladder else None)
    law["rungs"] = rungs
    if run.config.depth_ladder:
        law["depths"], law["target_depth"] = depths, run.config.target_depth
    run.recorder.law_fitted(run.sweep_id, law)
    return law


def admit_target(run: SweepRun, law: dict[str, Any]) -> None:
    """With a budget: the target run starts only if its estimate fits.

    Raises:
        SweepStopped: ``budget_exhausted``, the target run would exceed the budget."""
    gate = run.budget
    if gate is None or not gate.books:
        return
    n_params, target_params = law.get("n_params") or [], law.get("target_params")
    ratio = (float(target_params) / float(n_params[-1]) if n_params and target_params
             else (run.config.target.width / run.config.widths[-1]) ** 2)
    book = [b for b in gate.books if b.kind == "proxy"][-1]
    widest = f"w{run.config.widths[-1]}"
    if run.config.depth_ladder:
        widest += f"d{run.config.proxy_depths[-1]}"
    est = gate.estimate_gpu_hours(book, run.config.target_steps, scale=ratio,
                                  group=widest if widest in book.groups else None)
    if not gate.admits(est, f"the target run at width {run.config.target.width}"):
        raise SweepStopped("budget_exhausted", gate.exhausted)


def train_target(run: SweepRun, target_hp: dict[str, float],
                 settings: dict[str, Any] | None = None,
                 watch: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """The one target-size run with ``target_hp``, on the sweep's backend, recorded as a target
    run; with ``watch`` it stops as ``diverged`` past :func:`divergence_limits`.

    Returns (target summary, its TrialRecord).

    Raises:
        SearchError: the target run failed (a diverged one is returned, so the ledger bills it)."""
    from mutune.pipeline.recorded import recorded_trials
    from mutune.search.searchers.space import trial_seeds

    config, recorder = run.config, run.recorder
    tseed = trial_seeds(config.seed, len(config.widths), 1)[0]
    started: dict[str, int] = {}

    def open_target(trial_id: int) -> None:
        if "target" not in started:
            started["target"] = recorder.target_started(run.sweep_id, trial_id,
                                                        config.target.width, target_hp)

    point = {"hparams": target_hp, "seed": tseed, "index": 0, "key": "target-t0"}
    new, resume = recorded_trials(run, [point], [tseed])
    old = [*resume.finished, *resume.records.values()]
    row = run.recorded_target
    if old and row is not None and row.get("trial_id") == old[0].trial_id:
        started["target"] = int(row["id"])
    task = _target_task(run, settings)
    workers = target_workers(config, task.train.batch_size)
    warn_index_limit(config, task, workers)
    spec, run_settings = _target_run(run, task, workers, new, resume, watch, open_target)
    outcome = run.backend.run_target(spec, run_settings, workers)
    trec = outcome.trials[0] if outcome.trials else None
    if outcome.stopped is not None:
        if trec is not None and "target" in started:
            recorder.target_finished(started["target"], None, trec.status)
        raise SweepStopped("cancelled", outcome.stopped)
    if trec is None or "target" not in started:
        raise SearchError("the target run never started")
    last = trec.reports[-1] if trec.reports else {}
    model_dir = _kept_model(run, trec, target_hp, tseed)
    recorder.target_finished(started["target"], last.get("val_loss"), trec.status, model_dir)
    if model_dir is not None:
        from mutune.pipeline.target_model import release_checkpoints
        release_checkpoints(trec, Path(model_dir))
    if trec.status not in ("completed", "diverged"):
        raise SearchError(f"target run {trec.status}: {trec.reason}")
    return ({**_target_summary(run, trec, target_hp, watch),
             "model_dir": model_dir, "num_workers": workers}, trec)


def _kept_model(run: SweepRun, trec: Any, target_hp: dict[str, float],
                seed: int) -> str | None:
    """The folder of the completed target's kept model: written now, or the one a resumed
    sweep had recorded for this trial (its checkpoints released since); None when the run did
    not complete or the backend keeps no models."""
    if trec.status != "completed" or not run.backend.keeps_models:
        return None
    from mutune.pipeline.target_model import MODEL_FILE, keep_target_model

    row = run.recorded_target
    kept = row.get("model_dir") if row and row.get("trial_id") == trec.trial_id else None
    if kept and (Path(kept) / MODEL_FILE).is_file():
        return str(kept)
    return str(keep_target_model(run, trec, target_hp, seed=seed))


def _target_task(run: SweepRun, settings: dict[str, Any] | None) -> Any:
    """The target's task, with the gate's batch size and weight decay."""
    config = run.config
    task = target_task(run)
    if settings and (settings["batch_size"] != config.train.batch_size
                     or settings["weight_decay"] != config.train.weight_decay):
        task = dataclasses.replace(task, train=task.train.model_copy(update={
            "batch_size": settings["batch_size"], "weight_decay": settings["weight_decay"]}))
    return task


def _target_run(run: SweepRun, task: Any, workers: int, new: list[dict[str, Any]],
                resume: Any, watch: dict[str, Any] | None,
                on_started: Any) -> tuple[Any, Any]:
    from mutune.pipeline.sweep import stage_settings
    from mutune.search.backends.base import CheckpointPolicy
    from mutune.search.backends.groups import GroupSpec

    config = run.config
    ray_cfg = config.ray
    if workers == 1 and not ray_cfg.gpus_per_trial:    # one process: every CPU held
        ray_cfg = ray_cfg.model_copy(update={"cpus_per_trial": target_cpus(config)})
    label = (f"target {config.target.width}"
             + (f" × {config.target_depth}" if config.depth_ladder else ""))
    spec = GroupSpec(config.target.width, None, "target", points=new, resume=resume,
                     on_progress=bind_progress(run.on_progress, label, 1),
                     diverge_above=divergence_limits(watch))
    settings = stage_settings(
        run, name=f"sweep{run.sweep_id}-target", max_t=config.target_steps, task=task,
        kind="target", ray_cfg=ray_cfg, on_started=on_started, tracking=config.tracking,
        checkpoints=CheckpointPolicy(every=config.target_checkpoint_every,
                                     keep=config.train.checkpoint_keep,
                                     max_share=config.target_checkpoint_max_share,
                                     keep_final=True))
    return spec, settings


def _target_summary(run: SweepRun, trec: Any, target_hp: dict[str, float],
                    watch: dict[str, Any] | None) -> dict[str, Any]:
    config, search = run.config, run.config.search
    last = trec.reports[-1] if trec.reports else {}
    metric = {"metric": search.metric, "metric_value": last.get(search.metric)} \
        if search.metric != "val_loss" else {}
    return {"width": config.target.width, "depth": config.target_depth, "config": target_hp,
            "val_loss": last.get("val_loss"), **metric,
            "status": trec.status, "reason": trec.reason,
            "val_loss_se": last.get("val_loss_se"), "test_loss": last.get("test_loss"),
            "test_loss_se": last.get("test_loss_se"), "steps": trec.last_step,
            "trial_id": trec.trial_id,
            "watch": watch_target(watch, trec.reports, config.target.width)}
