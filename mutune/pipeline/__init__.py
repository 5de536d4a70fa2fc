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
from mutune.errors import SearchError, SweepStopped
from mutune.recording import Recorder

__all__ = ["run_pipeline", "open_sweep", "SweepRun", "sweep_width", "align_optima", "fit_rules",
           "finish_sweep", "trial_curves", "predict_target_loss", "train_target",
           "PipelineResult", "ProxyResult", "compute_cost"]


@dataclass(frozen=True)
class ProxyResult:
    """One width's sweep: its best trial at rung ``milestone`` (steps) and value there, and
    the smoothed optimum of each hyperparameter (:func:`mutune.pipeline.transfer_stage.width_optimum`)."""
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
    #: the sweep's :class:`~mutune.search.budget.BudgetGate` when the config sets a budget
    budget: Any = None


@contextlib.contextmanager
def open_sweep(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
               on_progress: Progress | None = None,
               resume: tuple[int, int] | None = None) -> Iterator[SweepRun]:
    """Load the data, compute the μP base shapes once (saved as ``out_dir/base_shapes.bsh``
    and in the sweep's provenance), record the sweep and hold a Ray cluster for the block.

    ``resume`` = (sweep id, last sequence number recorded) continues a recorded sweep instead
    of starting one: no new sweep row, and sequence numbers go on after the last.

    The sweep is recorded ``completed`` when the block ends normally, with the status of a
    :class:`~mutune.errors.SweepStopped` (``cancelled``, ``budget_exhausted``) when the block
    raises one (re-raised with the sweep id), and ``failed`` with the reason when it raises
    anything else (the error propagates; rows recorded before stay).
    """
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.provenance import collect_provenance
    from mutune.search.backends.ray_tune.run import ray_cluster

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
        limit = config.budget.limit_gpu_hours
        gate = None
        if limit is not None:
            from mutune.search.budget import BudgetGate
            gate = BudgetGate(limit)
        run = SweepRun(config, recorder, task, sweep_id, Path(out_dir),
                       itertools.count(first_seq), on_progress, gate)
        with ray_cluster(config.ray):
            yield run
    except SweepStopped as stop:
        recorder.sweep_finished(sweep_id, stop.status, stop.reason)
        raise SweepStopped(stop.status, stop.reason, sweep_id) from None
    except BaseException as err:
        recorder.sweep_finished(sweep_id, "failed", f"{type(err).__name__}: {err}"[:2000])
        raise
    recorder.sweep_finished(sweep_id, "completed")


def run_pipeline(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
                 on_progress: Progress | None = None,
                 reuse: dict[int, tuple[ProxyResult, Any]] | None = None,
                 seq_start: int = 1) -> PipelineResult:
    """Run the main job for ``config``, recording into ``recorder``.

    Args:
        config: the validated sweep config.
        recorder: receives every row (see :mod:`mutune.recording`).
        out_dir: folder for Ray Tune's experiment state (``out_dir/ray``).
        on_progress: called with (stage label, done, total) as trials finish.
        reuse: width → (ProxyResult, RunOutcome) of widths already swept and recorded (a
            restarted sweep); those widths are not swept again.
        seq_start: first report/decision sequence number (a restart continues after the
            largest one recorded).
    Returns:
        PipelineResult with the sweep id, per-width bests, rules, target and cost figures.
    Raises:
        SearchError, ProxyError, FitError: a stage failed; the sweep is recorded as failed
            with the reason, and everything recorded before stays.
        SweepStopped: ``mutune cancel`` (or the budget) ended the sweep early; recorded with
            that status, the error carries the sweep id.
    """
    reuse = reuse or {}
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress) as run:
        run.seq = itertools.count(seq_start)
        return finish_sweep(run, [reuse[width] if width in reuse else
                                  sweep_width(run, width, i)
                                  for i, width in enumerate(config.widths)])


def finish_sweep(run: SweepRun, swept: list[tuple[ProxyResult, Any]]) -> PipelineResult:
    """The stages after the proxy sweeps, for a new sweep and a resumed one alike: optima at
    one common rung (:func:`align_optima`), the transfer rules, the loss law's prediction, the
    target run (if the budget admits it) and the ledger.

    Args:
        swept: (ProxyResult, RunOutcome) per proxy width, in width order.
    Raises:
        FitError, SearchError: a stage failed. SweepStopped: the budget refused the target.
    """
    swept = align_optima(run, swept)
    proxies = [p for p, _ in swept]
    rules, target_hp, settings = fit_rules(run, proxies)
    law = predict_target_loss(run, swept, target_hp)
    _admit_target(run, law)
    target, trec = train_target(run, target_hp, settings)
    if law.get("predicted_val_loss") is not None:
        target["predicted_val_loss"] = law["predicted_val_loss"]
        target["predicted_val_loss_interval"] = law["predicted_val_loss_interval"]
    cost, entries = compute_cost(run.config, {p.width: o for p, o in swept}, trec)
    run.recorder.ledger_recorded(run.sweep_id, entries)
    return PipelineResult(run.sweep_id, proxies, rules, target, cost)


def sweep_width(run: SweepRun, width: int, index: int) -> tuple[ProxyResult, Any]:
    """One ASHA sweep at ``width`` (proxy number ``index``, which seeds its trials), and its
    best trial at the highest rung with at least 3 trials (DESIGN.md §4).

    Returns:
        (ProxyResult, the run's :class:`~mutune.search.backends.ray_tune.run.RunOutcome`).
    Raises:
        SearchError: every trial diverged or failed.
    """
    from mutune.search.best import best_at_rung
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds
    from mutune.search.backends.ray_tune.run import run_trials

    config, recorder = run.config, run.recorder
    search, sched = config.search, config.search.scheduler
    searcher = make_searcher(search, config.seed, index)
    reps = search.replicates
    seeds = trial_seeds(config.seed, index, search.num_samples * reps)
    settings = {"scheduler": {**sched.model_dump(), "seed": config.seed},
                "searcher": search.searcher,
                "num_samples": search.num_samples, "replicates": reps,
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
                         checkpoint_every=config.train.checkpoint_every,
                         checkpoint_keep=config.train.checkpoint_keep,
                         budget=run.budget, tracking=config.tracking, replicates=reps)
    if outcome.stopped is not None:
        raise SweepStopped("cancelled", outcome.stopped)
    cut = run.budget.exhausted if run.budget is not None else None
    if cut is not None and not any(t.reports for t in outcome.trials):
        raise SweepStopped("budget_exhausted", f"{cut}; width {width} got no trial")
    from mutune.pipeline.transfer_stage import width_optimum

    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope, curves=trial_curves(outcome.trials))
    rec = next(t for t in outcome.trials if t.key == best.trial)
    optimum = width_optimum(config, outcome, best)
    result = ProxyResult(width, ps_id, rec.trial_id, dict(rec.point["hparams"]), best.value,
                         best.milestone, len(outcome.trials), optimum)
    _record_best(run, result, best.n_trials)
    if cut is not None:
        raise SweepStopped("budget_exhausted", f"{cut}; width {width} kept "
                                               f"{len(outcome.trials)} of "
                                               f"{search.num_samples} trials")
    return result, outcome


def _admit_target(run: SweepRun, law: dict[str, Any]) -> None:
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


def _record_best(run: SweepRun, p: ProxyResult, rung_trials: int) -> None:
    run.recorder.proxy_sweep_finished(p.proxy_sweep_id, {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "config": p.best_config,
        "val_loss": p.best_val_loss, "trials": p.trials, "rung_trials": rung_trials,
        "optimum": p.optimum})


def align_optima(run: SweepRun, swept: list[tuple[ProxyResult, Any]]
                 ) -> list[tuple[ProxyResult, Any]]:
    """Re-estimate every width's optimum at one common rung (:func:`mutune.pipeline.transfer_stage.common_rung`)
    so the transfer rule compares the widths at equal budget (DESIGN.md §4). Widths already
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
            _record_best(run, p, best.n_trials)
        out.append((p, o))
    return out


def fit_rules(run: SweepRun, proxies: list[ProxyResult]
              ) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
    """Fit every searched hyperparameter's transfer rule from the widths' optima
    (:func:`mutune.pipeline.transfer_stage.transfer_rules`) and record each rule with its verdict.

    Returns:
        (rule rows as recorded, the target's hyperparameters, the target's batch size and
        weight decay with the published-rule adjustments).
    Raises:
        FitError: fewer than 2 widths, or a non-positive optimum.
    """
    from mutune.pipeline.transfer_stage import transfer_rules

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
                         recorder=recorder, sweep_id=run.sweep_id, proxy_sweep_id=None,
                         kind="target", scheduler=None, metric=search.metric,
                         mode=search.mode, ray_cfg=config.ray, storage=run.out_dir / "ray",
                         name=f"sweep{run.sweep_id}-target", seq=run.seq,
                         on_progress=_bind(run.on_progress, f"target {config.target.width}", 1),
                         on_started=open_target, tracking=config.tracking,
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


def trial_curves(trials: list[Any], metric: str = "val_loss") -> dict[str, list[tuple]]:
    """Trial key → [(step, value), …] of its recorded reports (for ``best-so-far``)."""
    return {t.key: [(int(r["step"]), float(r[metric])) for r in t.reports if metric in r]
            for t in trials}


def _bind(cb: Progress | None, label: str, total: int) -> Callable[[int, int], None] | None:
    if cb is None:
        return None
    return lambda done, started: cb(label, done, total)


def _flops_per_sample(config: SweepConfig, width: int, n_params: float) -> float:
    """Model training FLOPs per sample (MLP) or token (GPT), Kaplan et al. 2020 §2.1, or the
    model plugin's own ``flops_per_sample``."""
    from mutune.config import GPTModel
    from mutune.proxies.plugins import load_family
    from mutune.scaling.ledger import model_flops_per_step

    m = config.model
    family = load_family(m.family)
    if family.flops_per_sample is not None:
        return float(family.flops_per_sample(width, n_params, m))
    if isinstance(m, GPTModel):
        return model_flops_per_step(n_params, 1, n_layer=m.depth, n_ctx=m.seq_len,
                                    d_model=width)
    return model_flops_per_step(n_params, 1)


def _peak_flops(config: SweepConfig, kind: str) -> tuple[float | None, str]:
    """Peak FLOP/s per device of ``kind`` and where it came from (config table or measured)."""
    peak = config.cost.device(kind).peak_flops
    if peak is not None:
        return peak, f"device table ({kind})"
    if kind == "cpu":
        from mutune.proxies.device import measure_cpu_peak_flops
        return measure_cpu_peak_flops(), "measured: one thread's float32 matmul rate"
    return None, f"no peak FLOP/s for device kind {kind!r} in cost.devices"


def compute_cost(config: SweepConfig, outcomes: dict[int, Any],
                 target: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ledger (DESIGN.md §6) from the recorded trials: GPU-hours of the proxy sweeps and
    the target run, the naive counterfactuals with their formulas, savings, money, ETTR, MFU,
    each trial's time by category and the sweep's waste by category.

    The sweep held ``concurrency × devices per trial`` devices from its first trial's start to
    its last trial's end (concurrency = ``ray.max_concurrent_trials``, else the CPUs granted
    over the CPUs per trial); what no trial used in that span is ``idle`` waste
    (:func:`mutune.scaling.ledger.sweep_waste`).

    Returns:
        (cost figures keyed as report.json's ``cost``, ledger entries for the recorder).
    """
    from mutune.scaling.cost import ettr, gpu_hours, naive_sweep_estimate
    from mutune.scaling.ledger import TIME_CATEGORIES, money, sweep_waste, trial_time

    proxy_trials = [t for o in outcomes.values() for t in o.trials]
    everything = [*proxy_trials, target]
    entries: list[dict[str, Any]] = []
    widths = {t.trial_id: w for w, o in outcomes.items() for t in o.trials}
    widths[target.trial_id] = config.target.width
    kind = target.timing["device_kind"]
    peak, peak_source = _peak_flops(config, kind)
    price = config.cost.price_per_hour(kind)
    flops_total = flops_device_s = 0.0
    for t in everything:
        tm = t.timing
        entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "gpu_hours",
                        "value": gpu_hours(tm["allocated_s"], tm["devices"]),
                        "unit": "GPU-h"})
        split = trial_time(tm)
        for cat in TIME_CATEGORIES:
            entries.append({"scope": "trial", "trial_id": t.trial_id, "name": f"{cat}_s",
                            "value": split.seconds[cat], "unit": "s"})
        if tm.get("recovery_s") or tm.get("repeated_steps"):
            entries[-2].update(   # the recovery_s line (TIME_CATEGORIES ends recovery, other)
                formula="restart set-up + checkpoint load + repeated_steps × productive s/step",
                inputs={"restarts": tm.get("restarts", 0),
                        "repeated_steps": tm.get("repeated_steps", 0)})
        per_sample = _flops_per_sample(config, widths[t.trial_id], tm["n_params"])
        steps = max(tm["steps"], 1)
        entries.append({"scope": "trial", "trial_id": t.trial_id, "name": "flops_per_step",
                        "value": per_sample * tm["samples"] / steps, "unit": "FLOP",
                        "formula": "samples/step × (6·N [+ 6·n_layer·n_ctx·d_model]) "
                                   "(Kaplan et al. 2020 §2.1)",
                        "inputs": {"n_params": tm["n_params"],
                                   "samples_per_step": tm["samples"] / steps}})
        flops_total += per_sample * tm["samples"]
        flops_device_s += tm["productive_s"] * tm["devices"]
    proxy_h = sum(e["value"] for e in entries
                  if e["name"] == "gpu_hours" and e["trial_id"] != target.trial_id)
    target_h = gpu_hours(target.timing["allocated_s"], target.timing["devices"])
    tt = target.timing
    s_step = tt["productive_s"] / max(tt["steps"], 1)
    s_eval = tt["eval_s"] / max(tt["evals"], 1)
    largest = outcomes[max(outcomes)].trials
    proxy_overhead = statistics.median(t.timing["overhead_s"] for t in largest)
    proxy_setup = statistics.median(t.reports[0].get("setup_s", 0.0) if t.reports else 0.0
                                    for t in largest)
    target_setup = target.reports[0].get("setup_s", 0.0) if target.reports else 0.0
    overhead = proxy_overhead + max(target_setup - proxy_setup, 0.0)
    # each trial trains search.replicates seeds in lockstep; the target run trains one model
    reps = config.search.replicates
    naive = naive_sweep_estimate([t.last_step * reps for t in largest],
                                 [t.n_evals * reps for t in largest],
                                 s_per_step=s_step, s_per_eval=s_eval,
                                 overhead_s_per_trial=overhead, devices=tt["devices"])
    max_t = config.search.scheduler.max_t
    full_evals = math.ceil(max_t / config.train.eval_every)
    grid = naive_sweep_estimate([max_t * reps] * len(largest),
                                [full_evals * reps] * len(largest),
                                s_per_step=s_step, s_per_eval=s_eval,
                                overhead_s_per_trial=overhead, devices=tt["devices"])
    total_h = proxy_h + target_h
    saved = naive.gpu_hours - total_h
    e = ettr(sum(t.timing["productive_s"] for t in everything),
             sum(t.timing["allocated_s"] for t in everything))
    # the sweep's hold on devices: first trial start → last trial end, × devices held
    r = config.ray
    per_trial = r.gpus_per_trial or r.cpus_per_trial
    concurrency = r.max_concurrent_trials or max(int(r.num_cpus // r.cpus_per_trial), 1)
    held_devices = concurrency * per_trial
    trial_device_s = sum(trial_time(t.timing).allocated_s * t.timing["devices"]
                         for t in everything)
    # the span needs this process's clock for every trial: a resumed sweep's earlier trials
    # ran under another driver, so there the sweep is taken as the sum of its trials
    timed = all(t.started > 0 and t.ended is not None for t in everything)
    span = (max(t.ended for t in everything) - min(t.started for t in everything)
            if timed else None)
    waste = sweep_waste([(t.status, t.timing, t.timing["devices"]) for t in everything],
                        held_device_s=None if span is None else
                        max(span * held_devices, trial_device_s))
    mfu_value = (flops_total / flops_device_s / peak
                 if peak and flops_device_s > 0 else None)
    n_trials = len(proxy_trials)
    cost = {"device_kind": kind, "proxy_gpu_hours": proxy_h,
            "target_gpu_hours": target_h, "total_gpu_hours": total_h,
            "naive_gpu_hours": naive.gpu_hours, "naive_formula": naive.formula,
            "naive_inputs": naive.inputs, "naive_grid_gpu_hours": grid.gpu_hours,
            "naive_grid_formula": grid.formula, "saved_gpu_hours": saved,
            "saved_fraction": saved / naive.gpu_hours if naive.gpu_hours > 0 else None,
            "price_per_hour": price, "currency": config.cost.currency,
            "pricing": config.cost.pricing,
            "total_money": money(total_h, price), "naive_money": money(naive.gpu_hours, price),
            "saved_money": None if price is None else saved * price,
            "ettr": e, "mfu": mfu_value, "peak_flops_per_device": peak,
            "peak_flops_source": peak_source,
            "held_gpu_hours": waste.allocated_s / 3600.0,
            "useful_gpu_hours": waste.useful_s / 3600.0,
            "waste_gpu_hours": waste.waste_gpu_hours,
            "gpu_hours_per_trial": proxy_h / n_trials if n_trials else None,
            "cost_to_final_metric_gpu_hours": total_h,
            "repeated_steps": sum(int(t.timing.get("repeated_steps") or 0)
                                  for t in everything),
            "checkpoint_bytes_written": sum(float(t.timing.get("checkpoint_bytes") or 0.0)
                                            for t in everything),
            "checkpoint_bytes_kept": sum(float(t.timing.get("checkpoint_bytes_kept") or 0.0)
                                         for t in everything),
            "project": config.cost.project, "owner": config.cost.owner}
    entries.append({"scope": "sweep", "name": "repeated_steps",
                    "value": float(cost["repeated_steps"]), "unit": "steps"})
    for name in ("checkpoint_bytes_written", "checkpoint_bytes_kept"):
        entries.append({"scope": "sweep", "name": name, "value": cost[name], "unit": "bytes"})
    overhead_inputs = {"replicates_per_trial": reps, "median_proxy_overhead_s": proxy_overhead,
                       "median_proxy_setup_s": proxy_setup, "target_setup_s": target_setup}
    units = {"saved_fraction": "1", "ettr": "1", "mfu": "1", "price_per_hour":
             f"{config.cost.currency}/device-h", "total_money": config.cost.currency,
             "naive_money": config.cost.currency, "saved_money": config.cost.currency,
             "peak_flops_per_device": "FLOP/s"}
    for name in ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "saved_gpu_hours",
                 "saved_fraction", "ettr", "useful_gpu_hours",
                 "gpu_hours_per_trial", "cost_to_final_metric_gpu_hours", "price_per_hour",
                 "total_money", "naive_money", "saved_money"):
        if cost[name] is not None:
            entries.append({"scope": "sweep", "name": name, "value": cost[name],
                            "unit": units.get(name, "GPU-h")})
    entries.append({"scope": "sweep", "name": "mfu", "value": mfu_value, "unit": "1",
                    "formula": "Σ model FLOPs / Σ (productive s × devices) / peak FLOP/s "
                               "(Chowdhery et al. 2022, App. B)",
                    "inputs": {"model_flops": flops_total, "productive_device_s":
                               flops_device_s, "peak_flops_per_device": peak,
                               "peak_source": peak_source}})
    for cat, v in waste.waste_gpu_hours.items():
        entries.append({"scope": "waste", "name": cat, "value": v, "unit": "GPU-h"})
    entries.append({"scope": "sweep", "name": "held_gpu_hours",
                    "value": waste.allocated_s / 3600.0, "unit": "GPU-h",
                    "formula": "span first trial start → last trial end × devices held",
                    "inputs": {"span_s": span, "devices_held": held_devices,
                               "concurrency": concurrency}})
    entries.append({"scope": "sweep", "name": "naive_gpu_hours", "value": naive.gpu_hours,
                    "unit": "GPU-h", "formula": naive.formula,
                    "inputs": {**naive.inputs, **overhead_inputs}})
    entries.append({"scope": "sweep", "name": "naive_grid_gpu_hours", "value": grid.gpu_hours,
                    "unit": "GPU-h", "formula": grid.formula,
                    "inputs": {**grid.inputs, **overhead_inputs}})
    return cost, entries
