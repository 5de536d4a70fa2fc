"""The main job (DESIGN.md §2): proxy sweeps → transfer rules → one target run → the ledger.

:func:`run_pipeline` calls the stages in order and hands each the recorder it is given (the
results store, opened by the caller); it never imports the store itself. Every stage's rows reach
the recorder as they happen.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutune.config import SweepConfig
from mutune.errors import SearchError
from mutune.recorder import Recorder

__all__ = ["run_pipeline", "open_sweep", "SweepRun", "sweep_width", "fit_rules", "trial_curves",
           "predict_target_loss", "train_target",
           "PipelineResult", "ProxyResult", "compute_cost"]


@dataclass(frozen=True)
class ProxyResult:
    """One width's sweep: its best trial at rung ``milestone`` (steps) and value there, and
    the smoothed optimum of each hyperparameter (:func:`mutune.transfer.width_optimum`)."""
    width: int
    proxy_sweep_id: int
    best_trial_id: int
    best_config: dict[str, float]
    best_val_loss: float
    milestone: int
    trials: int
    optimum: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineResult:
    """What the main job produced; every figure is also in the recorder."""
    sweep_id: int
    proxies: list[ProxyResult]
    rules: list[dict[str, Any]]
    target: dict[str, Any]
    cost: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[str, int, int], None]


@dataclass
class SweepRun:
    """One sweep in progress: what every stage needs (config, recorder, task, ids, counters).

    Made by :func:`open_sweep`; the stage functions below take it as their first argument, so
    the main job, the benchmarks and the checks drive the same code.
    """
    config: SweepConfig
    recorder: Recorder
    task: Any
    sweep_id: int
    out_dir: Path
    seq: itertools.count
    on_progress: Progress | None = None


@contextlib.contextmanager
def open_sweep(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
               on_progress: Progress | None = None,
               resume: tuple[int, int] | None = None) -> Iterator[SweepRun]:
    """Load the data, compute the μP base shapes once (saved as ``out_dir/base_shapes.bsh``
    and in the sweep's provenance), record the sweep and hold a Ray cluster for the block.

    ``resume`` = (sweep id, last sequence number recorded) continues a recorded sweep instead
    of starting one: no new sweep row, and sequence numbers go on after the last.

    The sweep is recorded ``completed`` when the block ends normally and ``failed`` with the
    reason when it raises (the error propagates; rows recorded before stay).
    """
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.provenance import collect_provenance
    from mutune.search.tuner import ray_cluster

    data = load_task_data(config)
    dataset = {"kind": config.data.kind, "fingerprint": data.fingerprint,
               "size_bytes": data.size_bytes}
    task = ProxyTask(config.model, config.train, data).with_base_shapes()
    provenance = collect_provenance(dataset)
    if task.base_shapes is not None:
        provenance["base_shapes"] = task.base_shapes
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "base_shapes.bsh").write_text(task.base_shapes)
    if resume is None:
        sweep_id = recorder.sweep_started(config.model_dump(mode="json"), config.seed,
                                          provenance)
        first_seq = 1
    else:
        sweep_id, first_seq = resume[0], resume[1] + 1
        recorder.sweep_resumed(sweep_id)
    try:
        run = SweepRun(config, recorder, task, sweep_id, Path(out_dir),
                       itertools.count(first_seq), on_progress)
        with ray_cluster(config.ray):
            yield run
    except BaseException as err:
        recorder.sweep_finished(sweep_id, "failed", f"{type(err).__name__}: {err}"[:2000])
        raise
    recorder.sweep_finished(sweep_id, "completed")


def run_pipeline(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
                 on_progress: Progress | None = None) -> PipelineResult:
    """Run the main job for ``config``, recording into ``recorder``.

    Args:
        config: the validated sweep config.
        recorder: receives every row (see :mod:`mutune.recorder`).
        out_dir: folder for Ray Tune's experiment state (``out_dir/ray``).
        on_progress: called with (stage label, done, total) as trials finish.
    Returns:
        PipelineResult with the sweep id, per-width bests, rules, target and cost figures.
    Raises:
        SearchError, ProxyError, FitError: a stage failed; the sweep is recorded as failed
            with the reason, and everything recorded before stays.
    """
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress) as run:
        swept = [sweep_width(run, width, i) for i, width in enumerate(config.widths)]
        proxies = [p for p, _ in swept]
        rules, target_hp, settings = fit_rules(run, proxies)
        law = predict_target_loss(run, swept, target_hp)
        target, trec = train_target(run, target_hp, settings)
        if law.get("predicted_val_loss") is not None:
            target["predicted_val_loss"] = law["predicted_val_loss"]
            target["predicted_val_loss_interval"] = law["predicted_val_loss_interval"]
        cost, entries = compute_cost(config, {p.width: o for p, o in swept}, trec)
        recorder.ledger_recorded(run.sweep_id, entries)
    return PipelineResult(run.sweep_id, proxies, rules, target, cost)


def sweep_width(run: SweepRun, width: int, index: int) -> tuple[ProxyResult, Any]:
    """One ASHA sweep at ``width`` (proxy number ``index``, which seeds its trials), and its
    best trial at the highest rung with at least 3 trials (DESIGN.md §4).

    Returns:
        (ProxyResult, the run's :class:`~mutune.search.tuner.RunOutcome`).
    Raises:
        SearchError: every trial diverged or failed.
    """
    from mutune.search.best import best_at_rung
    from mutune.search.searchers import make_searcher
    from mutune.search.space import trial_seeds
    from mutune.search.tuner import run_trials

    config, recorder = run.config, run.recorder
    search, sched = config.search, config.search.scheduler
    searcher = make_searcher(search, config.seed, index)
    seeds = trial_seeds(config.seed, index, search.num_samples)
    settings = {"scheduler": {**sched.model_dump(), "seed": config.seed},
                "searcher": search.searcher,
                "num_samples": search.num_samples,
                "metric": search.metric, "mode": search.mode,
                "parametrization": config.model.parametrization}
    ps_id = recorder.proxy_sweep_started(run.sweep_id, width, settings)
    outcome = run_trials(None, task=run.task, width=width, max_t=sched.max_t,
                         recorder=recorder, sweep_id=run.sweep_id, proxy_sweep_id=ps_id,
                         kind="proxy", scheduler=sched, metric=search.metric,
                         mode=search.mode, ray_cfg=config.ray, storage=run.out_dir / "ray",
                         name=f"sweep{run.sweep_id}-w{width}", seq=run.seq,
                         on_progress=_bind(run.on_progress, f"width {width}",
                                           search.num_samples),
                         scheduler_seed=config.seed, searcher=searcher, seeds=seeds,
                         checkpoint_every=config.train.checkpoint_every)
    from mutune.transfer import width_optimum

    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope, curves=trial_curves(outcome.trials))
    rec = next(t for t in outcome.trials if t.key == best.trial)
    optimum = width_optimum(config, outcome, best)
    result = ProxyResult(width, ps_id, rec.trial_id, dict(rec.point["hparams"]), best.value,
                         best.milestone, len(outcome.trials), optimum)
    recorder.proxy_sweep_finished(ps_id, {
        "trial_id": rec.trial_id, "milestone": best.milestone, "config": rec.point["hparams"],
        "val_loss": best.value, "trials": len(outcome.trials), "rung_trials": best.n_trials,
        "optimum": optimum})
    return result, outcome


def fit_rules(run: SweepRun, proxies: list[ProxyResult]
              ) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
    """Fit every searched hyperparameter's transfer rule from the widths' optima
    (:func:`mutune.transfer.transfer_rules`) and record each rule with its verdict.

    Returns:
        (rule rows as recorded, the target's hyperparameters, the target's batch size and
        weight decay with the published-rule adjustments).
    Raises:
        FitError: fewer than 2 widths, or a non-positive optimum.
    """
    from mutune.transfer import transfer_rules

    rules, target_hp, settings = transfer_rules(run.config, [p.width for p in proxies],
                                                [p.optimum for p in proxies])
    for row in rules:
        run.recorder.rule_fitted(run.sweep_id, row)
    return rules, target_hp, settings


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
    from mutune.transfer import loss_law

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


def train_target(run: SweepRun, target_hp: dict[str, float],
                 settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """The one target-size run with ``target_hp``, through Ray, recorded as a target run;
    ``settings`` may change its batch size and weight decay (:func:`fit_rules`).

    Returns:
        (target summary: width, config, val_loss, steps, trial_id; its TrialRecord).
    Raises:
        SearchError: the target run did not complete (diverged or failed).
    """
    from mutune.search.space import trial_seeds
    from mutune.search.tuner import run_trials

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
                         recorder=recorder, sweep_id=run.sweep_id, proxy_sweep_id=None,
                         kind="target", scheduler=None, metric=search.metric,
                         mode=search.mode, ray_cfg=config.ray, storage=run.out_dir / "ray",
                         name=f"sweep{run.sweep_id}-target", seq=run.seq,
                         on_progress=_bind(run.on_progress, f"target {config.target.width}", 1),
                         on_started=open_target)
    trec = outcome.trials[0] if outcome.trials else None
    if trec is None or "target" not in started:
        raise SearchError("the target run never started")
    val = trec.reports[-1]["val_loss"] if trec.reports else None
    recorder.target_finished(started["target"], val, trec.status)
    if trec.status != "completed":
        raise SearchError(f"target run {trec.status}: {trec.reason}")
    return ({"width": config.target.width, "config": target_hp, "val_loss": val,
             "steps": trec.last_step, "trial_id": trec.trial_id}, trec)


def trial_curves(trials: list[Any], metric: str = "val_loss") -> dict[str, list[tuple]]:
    """Trial key → [(step, value), …] of its recorded reports (for ``best-so-far``)."""
    return {t.key: [(int(r["step"]), float(r[metric])) for r in t.reports if metric in r]
            for t in trials}


def _bind(cb: Progress | None, label: str, total: int) -> Callable[[int, int], None] | None:
    if cb is None:
        return None
    return lambda done, started: cb(label, done, total)


def compute_cost(config: SweepConfig, outcomes: dict[int, Any],
                 target: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ledger (DESIGN.md §6) from the recorded trials: GPU-hours of the proxy sweeps and
    the target run, the naive counterfactuals with their formulas, savings and ETTR.

    Returns:
        (cost figures keyed as report.json's ``cost``, ledger entries for the recorder).
    """
    from mutune.scaling.cost import ettr, gpu_hours, naive_sweep_estimate

    proxy_trials = [t for o in outcomes.values() for t in o.trials]
    entries: list[dict[str, Any]] = []
    for t in [*proxy_trials, target]:
        entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "gpu_hours",
                        "value": gpu_hours(t.timing["allocated_s"], t.timing["devices"]),
                        "unit": "GPU-h"})
    proxy_h = sum(e["value"] for e in entries[:-1])
    target_h = entries[-1]["value"]
    tt = target.timing
    s_step = tt["productive_s"] / max(tt["steps"], 1)
    s_eval = tt["eval_s"] / max(tt["evals"], 1)
    largest = outcomes[max(outcomes)].trials
    proxy_overhead = statistics.median(t.timing["overhead_s"] for t in largest)
    proxy_setup = statistics.median(t.reports[0].get("setup_s", 0.0) if t.reports else 0.0
                                    for t in largest)
    target_setup = target.reports[0].get("setup_s", 0.0) if target.reports else 0.0
    overhead = proxy_overhead + max(target_setup - proxy_setup, 0.0)
    naive = naive_sweep_estimate([t.last_step for t in largest], [t.n_evals for t in largest],
                                 s_per_step=s_step, s_per_eval=s_eval,
                                 overhead_s_per_trial=overhead, devices=tt["devices"])
    max_t = config.search.scheduler.max_t
    full_evals = math.ceil(max_t / config.train.eval_every)
    grid = naive_sweep_estimate([max_t] * len(largest), [full_evals] * len(largest),
                                s_per_step=s_step, s_per_eval=s_eval,
                                overhead_s_per_trial=overhead, devices=tt["devices"])
    total_h = proxy_h + target_h
    saved = naive.gpu_hours - total_h
    everything = [*proxy_trials, target]
    e = ettr(sum(t.timing["productive_s"] for t in everything),
             sum(t.timing["allocated_s"] for t in everything))
    cost = {"device_kind": tt["device_kind"], "proxy_gpu_hours": proxy_h,
            "target_gpu_hours": target_h, "total_gpu_hours": total_h,
            "naive_gpu_hours": naive.gpu_hours, "naive_formula": naive.formula,
            "naive_inputs": naive.inputs, "naive_grid_gpu_hours": grid.gpu_hours,
            "naive_grid_formula": grid.formula, "saved_gpu_hours": saved,
            "saved_fraction": saved / naive.gpu_hours if naive.gpu_hours > 0 else None,
            "ettr": e}
    # waste (DESIGN.md §6): device time of trials the scheduler stopped early or that
    # failed, and recovery after failures (restart set-up, checkpoint loading, steps trained
    # again); recovery is inside a trial's allocated time, so it is not added twice.
    def trial_h(t: Any) -> float:
        return gpu_hours(t.timing["allocated_s"], t.timing["devices"])

    recovery_h = sum(gpu_hours(float(t.timing.get("recovery_s") or 0.0), t.timing["devices"])
                     for t in everything)
    waste = {"early_stopped": sum(trial_h(t) for t in everything if t.status == "stopped"),
             "failed": sum(trial_h(t) for t in everything if t.status == "failed"),
             "recovery": recovery_h, "idle": 0.0}
    cost["waste_gpu_hours"] = waste
    cost["repeated_steps"] = sum(int(t.timing.get("repeated_steps") or 0) for t in everything)
    for t in everything:
        if t.timing.get("recovery_s") or t.timing.get("repeated_steps"):
            entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "recovery_s",
                            "value": float(t.timing.get("recovery_s") or 0.0), "unit": "s",
                            "formula": "restart set-up + checkpoint load + repeated_steps × "
                                       "productive s/step",
                            "inputs": {"restarts": t.timing.get("restarts", 0),
                                       "repeated_steps": t.timing.get("repeated_steps", 0)}})
    for name, value in waste.items():
        entries.append({"scope": "sweep", "name": f"waste_{name}_gpu_hours", "value": value,
                        "unit": "GPU-h"})
    entries.append({"scope": "sweep", "name": "repeated_steps",
                    "value": float(cost["repeated_steps"]), "unit": "steps"})
    overhead_inputs = {"median_proxy_overhead_s": proxy_overhead,
                       "median_proxy_setup_s": proxy_setup, "target_setup_s": target_setup}
    for name, unit in (("proxy_gpu_hours", "GPU-h"), ("target_gpu_hours", "GPU-h"),
                       ("total_gpu_hours", "GPU-h"), ("saved_gpu_hours", "GPU-h"),
                       ("saved_fraction", "1"), ("ettr", "1")):
        if cost[name] is not None:
            entries.append({"scope": "sweep", "name": name, "value": cost[name], "unit": unit})
    entries.append({"scope": "sweep", "name": "naive_gpu_hours", "value": naive.gpu_hours,
                    "unit": "GPU-h", "formula": naive.formula,
                    "inputs": {**naive.inputs, **overhead_inputs}})
    entries.append({"scope": "sweep", "name": "naive_grid_gpu_hours", "value": grid.gpu_hours,
                    "unit": "GPU-h", "formula": grid.formula,
                    "inputs": {**grid.inputs, **overhead_inputs}})
    return cost, entries
