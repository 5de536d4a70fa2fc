"""ETTR of the reference sweep on Ray Tune: how much of the held CPU time trains (issue 4).

The reference sweep: 24 trials of a μP MLP at width 256 on scikit-learn's digits, Adam, batch 64,
ASHA (grace 20, η 3, max_t 200 steps), validation every 10 steps, 2 CPUs (one per trial),
random search — run by :func:`mutune.search.backends.ray_tune.run.run_groups`, i.e. Ray Tune
executes every
trial. Prints one JSON object per run and a final one, the median run (by overhead per trial)
of ``--repeat`` runs:

    {"benchmark": "ettr", "trials": 24, "wall_s": …, "productive_s": …,
     "ettr": productive_s / Σ trials' allocated seconds (the trial ETTR, as report.json's
             cost.ettr and cost.trial_ettr),
     "sweep_ettr": productive_s / (wall_s × cpus) (what the sweep held),
     "overhead_s_per_trial": (wall_s × cpus − productive_s) / trials,
     "load_avg": the 1-minute load average when the run ended, "where": {…}}

``wall_s`` is the run from call to return (the one-time Ray cluster start is excluded:
the cluster is started before the first run and reused, as a server keeps Ray up). Each run
starts once the cluster's CPUs are all free again: Ray frees a run's actors a little after
the run returns, and that teardown (``teardown_wait_s`` before the next run, ≈ 0.05–0.1
s) belongs to neither span. ``productive_s`` sums the trials'
seconds inside training steps. ``where`` splits ``overhead_s_per_trial`` (CPU-seconds per
trial; the parts sum to it), measured on the workers — every report carries the worker's PID
and when the trial function began there, so the trials each actor ran are laid end to end:

    run_start     from the call until each actor's first trial function began: Ray Tune's
                  set-up, the actor's process start, its imports
                  (Ray Tune, torch) and the task fetched from the object store
    first_setup   the first trial's model and optimizer build on each actor (torch.optim's
                  first use imported ``torch._dynamo`` there, ≈ 0.7–2 s a process, until the
                  optimizers were built without it: mutune/_internals.optimizer_class)
    setup         every other trial's model and optimizer build
    eval          validation passes
    checkpoint    rung checkpoints
    reports_and_batches  the rest of the function's time (handing each report to Ray and
                  waiting for the driver to take it, making batches)
    between_trials  on each actor, from a trial's last report to the next trial's function
                  start (Ray stopping the one, resetting the reused actor, starting the other)
    run_end       from each actor's last report until the call returned (the other slot's
                  tail, Ray stopping the run)
    unused_slots  CPUs no actor ever held during the run
``where_total_s`` gives the same parts in CPU-seconds.

Run: ``python benchmarks/ettr.py --repeat 3``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path


def reference_config(num_cpus: int = 2):
    """The reference sweep's config: the MLP example config (configs/mlp-digits.yaml) with
    the issue's settings."""
    from mutune.config import load_config, parse_config

    d = load_config("configs/mlp-digits.yaml").model_dump(mode="json")
    d["model"].update(family="mlp", base_width=64)
    d["widths"] = [256, 512]
    d["target"]["width"] = 1024
    d["train"].update(optimizer="adam", batch_size=64, eval_every=10, weight_decay=0.0)
    d["search"].update(num_samples=24, searcher="random")
    d["search"]["scheduler"].update(kind="asha", variant="stopping", grace_period=20,
                                    reduction_factor=3, max_t=200)
    d["ray"].update(num_cpus=num_cpus, cpus_per_trial=1, max_concurrent_trials=None)
    return parse_config(d)


def run_once(cfg, task, storage: Path) -> dict:
    """One reference sweep; returns its figures."""
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds
    from mutune.search.backends.base import RunSettings, run_group
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.backends.ray_tune.backend import RayBackend

    search, cpus = cfg.search, cfg.ray.num_cpus
    rec = MemoryRecorder()
    called_at, t0 = time.time(), time.perf_counter()
    spec = GroupSpec(256, 1, "w256", searcher=make_searcher(search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, search.num_samples))
    out = run_group(RayBackend(), spec, RunSettings(
        task=task, max_t=search.scheduler.max_t, recorder=rec, sweep_id=1,
        ray_cfg=cfg.ray, storage=storage, name=f"ettr-{time.time_ns()}",
        seq=itertools.count(1), kind="proxy", scheduler=search.scheduler))
    wall = time.perf_counter() - t0
    trials = out.trials
    n = len(trials)
    productive = sum(t.timing["productive_s"] for t in trials)
    held = sum(t.timing["allocated_s"] for t in trials)
    return {"benchmark": "ettr", "trials": n, "wall_s": wall, "productive_s": productive,
            "ettr": productive / held, "sweep_ettr": productive / (wall * cpus),
            "load_avg": os.getloadavg()[0],
            "overhead_s_per_trial": (wall * cpus - productive) / n,
            "steps": sum(t.last_step for t in trials), "cpus": cpus,
            "statuses": {s: sum(t.status == s for t in trials)
                         for s in sorted({t.status for t in trials})},
            **where(trials, called_at=called_at, wall=wall, cpus=cpus)}


def where(trials: list, *, called_at: float, wall: float, cpus: int) -> dict:
    """``where`` (CPU-seconds per trial) and ``where_total_s``: the module docstring's split
    of the held CPU-seconds that did not train, from the workers' own clocks."""
    total = dict.fromkeys(("run_start", "first_setup", "setup", "eval", "checkpoint",
                           "reports_and_batches", "between_trials", "run_end",
                           "unused_slots"), 0.0)
    by_worker: dict[float, list] = {}
    for t in trials:
        if t.reports:
            by_worker.setdefault(t.reports[-1]["worker_pid"], []).append(t)
    ended_at = called_at + wall
    for runs in by_worker.values():
        runs.sort(key=lambda t: t.reports[-1]["began_at"])
        last_report_at = None
        for i, t in enumerate(runs):
            last = t.reports[-1]
            began, setup = last["began_at"], t.reports[0].get("setup_s", 0.0)
            if last_report_at is None:
                total["run_start"] += began - called_at
            else:
                total["between_trials"] += began - last_report_at
            total["first_setup" if i == 0 else "setup"] += setup
            total["eval"] += t.timing["eval_s"]
            total["checkpoint"] += t.timing.get("checkpoint_s", 0.0)
            total["reports_and_batches"] += (last["wall_s"] - t.timing["productive_s"]
                                             - t.timing["eval_s"] - setup
                                             - t.timing.get("checkpoint_s", 0.0))
            last_report_at = began + last["wall_s"]
        total["run_end"] += ended_at - last_report_at
    total["unused_slots"] = max(cpus - len(by_worker), 0) * wall
    n = max(len(trials), 1)
    return {"where": {k: v / n for k, v in total.items()}, "where_total_s": total,
            "actors": len(by_worker)}


def wait_for_free_cpus(cpus: int, timeout_s: float = 60.0) -> float:
    """Wait until ``cpus`` CPUs of the connected cluster are free (the previous run's
    actors ended); returns the seconds waited. Raises TimeoutError after ``timeout_s``."""
    import ray

    t0 = time.perf_counter()
    while ray.available_resources().get("CPU", 0.0) < cpus:
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError(f"the cluster's {cpus} CPUs were not free after {timeout_s} s")
        time.sleep(0.02)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="runs; the median is printed last")
    args = p.parse_args(argv)
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    cfg = reference_config()
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    runs = []
    with ray_cluster(cfg.ray), tempfile.TemporaryDirectory(prefix="mutune-ettr-") as tmp:
        for _ in range(max(args.repeat, 1)):
            waited = wait_for_free_cpus(cfg.ray.num_cpus)
            fig = {**run_once(cfg, task, Path(tmp)), "teardown_wait_s": waited}
            runs.append(fig)
            print(json.dumps({**fig, "run": len(runs)}), flush=True)
    # the median run (by overhead per trial), so its figures belong together
    med = sorted(runs, key=lambda r: r["overhead_s_per_trial"])[len(runs) // 2]
    print(json.dumps({**med, "run": "median", "median_of": len(runs),
                      "overhead_s_per_trial_runs": [r["overhead_s_per_trial"] for r in runs]}),
          flush=True)


if __name__ == "__main__":
    main()
