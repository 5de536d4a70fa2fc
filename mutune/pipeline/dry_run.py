"""``mutune run --dry-run``: what a sweep will cost, before anything trains, from a short
warm-up of every proxy and the target on the device a trial gets (docs/architecture.md §6):

    trial seconds = steps × s_step + evals × (s_eval + report_s) + setup_s + overhead_s
    GPU-hours     = Σ trial seconds × devices per trial / 3600"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from typing import Any, NamedTuple

from mutune.config import SweepConfig
from mutune.pipeline.warmup import warmup as _warmup
from mutune.pipeline.depth_tasks import ladder_sizes, task_with_depth
from mutune.search.schedulers.planned_steps import (DEFAULT_REPORT_OVERHEAD_S,
                                                   DEFAULT_TRIAL_OVERHEAD_S)

__all__ = ["plan_sweep", "DEFAULT_TRIAL_OVERHEAD_S", "DEFAULT_REPORT_OVERHEAD_S",
           "TIMED_TARGET_MAX_PARAMS", "TARGET_RUN_OVERHEAD_S"]


def _middle(dist: Any) -> float:
    if hasattr(dist, "low"):
        if dist.low > 0:
            return math.sqrt(dist.low * dist.high)
        return (dist.low + dist.high) / 2
    return sorted(dist.values)[len(dist.values) // 2]


def _evals(steps: int, every: int) -> int:
    return steps // every + (1 if steps % every else 0)


def _time_all(task: Any, ttask: Any, config: SweepConfig, hp: dict[str, float],
              warmup_steps: int, threads: int, timed_max_params: float,
              prefer_cuda: bool, target_threads: int | None = None) -> dict[str, Any]:
    """Every width's warm-up and the target's timing, in this process, on a trial's device."""
    import socket

    import torch

    from mutune.proxies.device import select_device

    dev = select_device(prefer_cuda=prefer_cuda)
    # untimed: first-call costs (lazy imports of the optimizer's compiler, allocator), which a
    # Ray worker pays once, inside its start-up overhead
    _warmup(task, config.widths[0], hp, 2, threads, dev)
    sizes = (ladder_sizes(config) if config.depth_ladder
             else [(w, None) for w in config.widths])
    tasks = {d: task_with_depth(task, d) for d in {d for _, d in sizes}}
    widths = [{"width": w, **({"depth": d} if d is not None else {}),
               **_warmup(tasks[d], w, hp, warmup_steps, threads, dev)} for w, d in sizes]
    target = _target_timing(config, tasks[sizes[-1][1]], ttask, widths[-1], hp, warmup_steps,
                            threads, timed_max_params, dev, target_threads or threads)
    name = torch.cuda.get_device_name(dev.device) if dev.kind == "cuda" else "cpu"
    return {"widths": widths, "target": target,
            "timed_on": {"device": dev.kind, "device_name": name,
                         "host": socket.gethostname()}}


def _time_on_trial_device(config: SweepConfig, task: Any, ttask: Any, hp: dict[str, float],
                          warmup_steps: int, threads: int, timed_max_params: float,
                          on_ray: bool | None, target_threads: int | None = None
                          ) -> dict[str, Any]:
    """:func:`_time_all` where a trial would run: in this process, or as one Ray task with a
    trial's resources.

    Raises:
        ConfigError: the cluster has fewer CPUs or GPUs than one trial asks for."""
    rc = config.ray
    if on_ray is None:
        on_ray = bool(rc.gpus_per_trial) or bool(rc.address)
    args = (task, ttask, config, hp, warmup_steps, threads, timed_max_params,
            bool(rc.gpus_per_trial), target_threads)
    if not on_ray:
        return {**_time_all(*args), "timed_in": "driver"}
    import ray

    from mutune.search.backends.ray_tune.cluster import ray_cluster, shortfall

    with ray_cluster(rc):
        short = shortfall(rc.cpus_per_trial, rc.gpus_per_trial)
        if short is not None:
            from mutune.errors import ConfigError
            kind, need, have = short
            raise ConfigError(
                f"ray.{kind.lower()}s_per_trial = {need:g}: the Ray cluster "
                f"({rc.address or 'local'}) has {have:g} {kind}s, so no trial could start; "
                "lower it or connect to a cluster that has them (ray.address)")
        remote = ray.remote(num_cpus=rc.cpus_per_trial, num_gpus=rc.gpus_per_trial,
                            max_retries=0)(_time_all)
        return {**ray.get(remote.remote(*args)), "timed_in": "ray task"}


def _target_timing(config: SweepConfig, task: Any, ttask: Any, widest: dict[str, Any],
                   hp: dict[str, float], warmup_steps: int, threads: int,
                   timed_max_params: float, dev: Any = None,
                   target_threads: int | None = None) -> dict[str, Any]:
    """The target's seconds per step, per evaluation and to build: timed like a proxy up to
    ``timed_max_params``, above it extrapolated from its FLOPs per step (Kaplan et al. 2020
    §2.1) at the widest proxy's achieved FLOP/s — an upper estimate."""
    t_threads = target_threads or threads
    from mutune.pipeline.ledger_stage import flops_per_sample

    t_params = ttask.n_params(config.target.width, hp)
    if t_params <= timed_max_params:
        return {**_warmup(ttask, config.target.width, hp, warmup_steps, t_threads, dev),
                "n_params": t_params, "timing": "timed"}
    w = widest["width"]
    w_params = task.n_params(w, hp)
    f_w = flops_per_sample(config, w, w_params, depth=widest.get("depth"))
    f_t = flops_per_sample(config, config.target.width, t_params, depth=config.target_depth)
    step_w, step_t = f_w * task.samples_per_step, f_t * ttask.samples_per_step
    achieved = step_w / widest["s_per_step"]
    achieved *= t_threads / threads
    return {"setup_s": widest["setup_s"] * t_params / w_params,
            "s_per_step": step_t / achieved,
            "s_per_eval": widest["s_per_eval"] * f_t / f_w,
            "warmup_s": 0.0, "n_params": t_params, "timing": "extrapolated",
            "achieved_flops_per_s": achieved,
            "formula": (f"s_step = FLOPs/step ÷ FLOP/s of width {w}"
                        f"{f' × {t_threads}/{threads} threads' if t_threads != threads else ''}"
                        f" = {step_t:.4g} ÷ {achieved:.4g}; "
                        f"s_eval = {widest['s_per_eval']:.4g} s × "
                        f"{f_t:.4g}/{f_w:.4g}; build = {widest['setup_s']:.4g} s × "
                        f"{t_params:,}/{w_params:,} parameters")}


def _planned_target_workers(config: SweepConfig, batch: int, on_ray: bool) -> int:
    """The target's data-parallel workers as the run will choose them (1 without Ray)."""
    from mutune.pipeline.target_devices import target_workers

    if not on_ray and config.ray.gpus_per_trial and not config.target.num_workers:
        return 1
    return target_workers(config, batch)


#: the target run's own start-up beyond a proxy trial's, seconds: it is a run of its own (a
#: fresh worker, its final checkpoint kept; benchmarks/results/README.md, "Assumed overheads")
TARGET_RUN_OVERHEAD_S = 3.0

TIMED_TARGET_MAX_PARAMS = 100_000_000


class _TargetShape(NamedTuple):
    """How the target trains: data-parallel workers, devices each, batch per worker, task."""
    workers: int
    devices: float
    batch_per_worker: int
    task: Any


def plan_sweep(config: SweepConfig, *, warmup_steps: int = 5,
               overhead_s: float = DEFAULT_TRIAL_OVERHEAD_S,
               report_s: float = DEFAULT_REPORT_OVERHEAD_S,
               timed_max_params: float = TIMED_TARGET_MAX_PARAMS,
               on_ray: bool | None = None) -> dict[str, Any]:
    """The planned trials, steps and device-hours of ``config``'s sweep, from a warm-up.

    ``overhead_s``: assumed Ray per-trial start-up + teardown, seconds; ``report_s``: assumed
    seconds per report beyond its evaluation; ``on_ray``: time in a Ray task (True), in this
    process (False), or in a Ray task exactly when trials get GPUs or a cluster (None).
    Returns the plan: per-width and target timings, device-hours (``*_gpu_hours``), money,
    budget fit and ``timed_on``; hours are device-hours, seconds wall seconds.

    Raises:
        ValueError: warmup_steps < 2, overhead_s < 0 or report_s < 0.
        ProxyError: a model cannot be built."""
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.search.schedulers.planned_steps import planned_trial_steps

    _check_plan_args(warmup_steps, overhead_s, report_s)
    t_start = time.perf_counter()
    search, sched, ray = config.search, config.search.scheduler, config.ray
    devices = ray.gpus_per_trial or ray.cpus_per_trial
    hp = {**{k: _middle(v) for k, v in search.space.items()}, **search.fixed}
    task = ProxyTask(config.model, config.train, load_task_data(config)).with_base_shapes()
    trial_steps = planned_trial_steps(search.num_samples, kind=sched.kind,
                                      grace_period=sched.grace_period,
                                      reduction_factor=sched.reduction_factor,
                                      max_t=sched.max_t, seed=config.seed)
    evals = [_evals(s, config.train.eval_every) for s in trial_steps]
    price = functools.partial(_price, report_s=report_s, overhead_s=overhead_s, devices=devices)
    if on_ray is None:
        on_ray = bool(ray.gpus_per_trial) or bool(ray.address)
    timed, shape = _time_sweep(config, task, hp, warmup_steps, timed_max_params, on_ray)
    widths = [{**m, "trials": len(trial_steps), "steps": sum(trial_steps),
               "evals": sum(evals), "trial_steps": trial_steps,
               "replicates": search.replicates,
               "gpu_hours": price(m, trial_steps, evals, search.replicates)}
              for m in timed["widths"]]
    target = _target_plan(config, timed["target"], shape, price)
    confirm = _add_confirm(config, hp, widths, price)
    plan = {"name": config.name, "widths": widths, "target": target}
    plan.update(_totals(config, widths, target, timed["target"], trial_steps, evals, price,
                        shape, confirm))
    plan.update({"warmup": {"steps": warmup_steps, "seconds": time.perf_counter() - t_start},
                 "budget_gpu_hours": config.budget.limit_gpu_hours,
                 "fits_budget": None if config.budget.limit_gpu_hours is None
                 else plan["total_gpu_hours"] <= config.budget.limit_gpu_hours,
                 "timed_on": {**timed["timed_on"], "where": timed["timed_in"]}})
    return plan


def _check_plan_args(warmup_steps: int, overhead_s: float, report_s: float) -> None:
    if warmup_steps < 2:
        raise ValueError(f"warmup_steps = {warmup_steps}: must be >= 2 (the first step "
                         "warms caches and is not timed)")
    if not (math.isfinite(overhead_s) and overhead_s >= 0):
        raise ValueError(f"overhead_s = {overhead_s}: must be a finite number >= 0")
    if not (math.isfinite(report_s) and report_s >= 0):
        raise ValueError(f"report_s = {report_s}: must be a finite number >= 0")


def _price(m: dict[str, float], steps: list[int], n_evals: list[int],
           replicates: int = 1, extra_s: float = 0.0, workers: int = 1,
           devs: float | None = None, *, report_s: float, overhead_s: float,
           devices: float) -> float:
    """Device-hours of trials at timings ``m``: R replicate seeds train in lockstep, a target
    on W data-parallel workers holds W trials' devices."""
    seconds = (replicates * (sum(steps) * m["s_per_step"] + sum(n_evals) * m["s_per_eval"])
               + sum(n_evals) * report_s
               + len(steps) * (replicates * m["setup_s"] + overhead_s) + extra_s)
    return seconds * (devs or devices) * workers / 3600.0


def _time_sweep(config: SweepConfig, task: Any, hp: dict[str, float], warmup_steps: int,
                timed_max_params: float, on_ray: bool) -> tuple[dict[str, Any], _TargetShape]:
    """Every proxy's and the target's timings where a trial runs, and the target's shape."""
    import dataclasses

    from mutune.pipeline.target_devices import target_cpus
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    ray = config.ray
    devices = ray.gpus_per_trial or ray.cpus_per_trial
    threads = max(int(ray.cpus_per_trial), 1)
    tb = config.target.batch_size or config.train.batch_size
    with (ray_cluster(ray) if on_ray else contextlib.nullcontext()):
        n_workers = _planned_target_workers(config, tb, on_ray)
        # a one-process CPU target holds target_cpus CPUs, one torch thread each
        t_devices = (target_cpus(config) if n_workers == 1 and not ray.gpus_per_trial
                     else devices)
        wb = tb // n_workers
        ttask = task_with_depth(task, config.target_depth)
        if wb != config.train.batch_size:
            ttask = dataclasses.replace(ttask, train=ttask.train.model_copy(
                update={"batch_size": wb}))
        timed = _time_on_trial_device(config, task, ttask, hp, warmup_steps, threads,
                                      timed_max_params, on_ray,
                                      max(int(t_devices), 1) if t_devices != devices
                                      else threads)
    return timed, _TargetShape(n_workers, t_devices, wb, ttask)


def _target_plan(config: SweepConfig, tm: dict[str, Any], shape: _TargetShape,
                 price: functools.partial[float]) -> dict[str, Any]:
    from mutune.pipeline.target_devices import index_limit_note

    t_steps, every = config.target_steps, config.train.eval_every
    return {"width": config.target.width,
            **({"depth": config.target_depth} if config.depth_ladder else {}),
            "trials": 1, "steps": t_steps,
            "evals": _evals(t_steps, every), **tm,
            "run_overhead_s": TARGET_RUN_OVERHEAD_S,
            "workers": shape.workers, "batch_per_worker": shape.batch_per_worker,
            "devices": shape.devices * shape.workers,
            "index_limit_warning": index_limit_note(config, shape.task, shape.batch_per_worker),
            "gpu_hours": price(tm, [t_steps], [_evals(t_steps, every)],
                               extra_s=TARGET_RUN_OVERHEAD_S, workers=shape.workers,
                               devs=shape.devices)}


def _add_confirm(config: SweepConfig, hp: dict[str, float], widths: list[dict[str, Any]],
                 price: functools.partial[float]) -> dict[str, Any]:
    """Each designed width's confirmation design priced into its line (none at a width moved
    by a designed width's horizon shift); the plan's ``confirm``."""
    from mutune.pipeline.confirm_stage import (design_names, design_points, designed_widths,
                                               trials_per_design)

    tr, max_t = config.transfer, config.search.scheduler.max_t
    names = design_names(config)
    n_points = len(design_points(hp, names, tr.confirm_step)) if names else 0
    n_confirm = trials_per_design(config)
    full = [max_t] * n_confirm
    full_evals = [_evals(max_t, config.train.eval_every)] * n_confirm
    designed = designed_widths(config, [x["width"] for x in widths])
    for x in widths:
        m = {k: x[k] for k in ("s_per_step", "s_per_eval", "setup_s")}
        x["confirm_trials"] = n_confirm if x["width"] in designed else 0
        x["confirm_gpu_hours"] = price(m, full, full_evals) if x["confirm_trials"] else 0.0
        x["gpu_hours"] += x["confirm_gpu_hours"]
    return {"points_per_design": n_points, "replicates": tr.confirm_replicates,
            "center_replicates": max(tr.confirm_replicates, tr.confirm_center_replicates),
            "trials_per_width": n_confirm, "designed_widths": sorted(designed)}


def _totals(config: SweepConfig, widths: list[dict[str, Any]], target: dict[str, Any],
            tm: dict[str, Any], trial_steps: list[int], evals: list[int],
            price: functools.partial[float], shape: _TargetShape,
            confirm: dict[str, Any]) -> dict[str, Any]:
    """The plan's device-hours, money, gate maximum and wall-clock estimate."""
    sched, ray, tr = config.search.scheduler, config.ray, config.transfer
    devices = ray.gpus_per_trial or ray.cpus_per_trial
    every, n_confirm = config.train.eval_every, confirm["trials_per_width"]
    rounds = 0 if tr.gate == "stop" or not n_confirm else tr.gate_rounds
    gate_h = rounds * sum(x["confirm_gpu_hours"] for x in widths)
    proxy_h = sum(x["gpu_hours"] for x in widths)
    naive_h = price(tm, trial_steps, evals, workers=shape.workers, devs=shape.devices)
    grid = [sched.max_t] * len(trial_steps)
    grid_h = price(tm, grid, [_evals(s, every) for s in grid], workers=shape.workers,
                   devs=shape.devices)
    total = proxy_h + target["gpu_hours"]
    slots = ray.max_concurrent_trials or max(int(ray.num_cpus // ray.cpus_per_trial), 1)
    wall = (proxy_h * 3600 / devices) / min(slots, len(trial_steps)) \
        + target["gpu_hours"] * 3600 / (shape.devices * shape.workers)
    pph = config.budget.price_per_hour
    figures = {"proxy_gpu_hours": proxy_h, "target_gpu_hours": target["gpu_hours"],
               "total_gpu_hours": total, "naive_gpu_hours": naive_h,
               "naive_grid_gpu_hours": grid_h}
    return {**figures, "confirm": confirm,
            "gate": {"setting": tr.gate, "max_rounds": rounds,
                     "trials_max": rounds * sum(x["confirm_trials"] for x in widths)},
            "gate_gpu_hours_max": gate_h, "total_gpu_hours_max": total + gate_h,
            "saved_gpu_hours": naive_h - total,
            "price_per_hour": pph,
            "money": {k.replace("gpu_hours", "money"): v * pph for k, v in figures.items()}
            if pph else None,
            "wall_s_estimate": wall, "device_kind": ray.priced_kind or "cuda",
            "devices_per_trial": devices,
            "overhead_s_per_trial": price.keywords["overhead_s"],
            "overhead_s_per_report": price.keywords["report_s"],
            "scheduler": sched.kind}
