"""ETTR of the reference sweep on Ray Tune: how much of the held CPU time trains (issue 4).

The reference sweep: 24 trials of a μP MLP at width 256 on scikit-learn's digits, Adam, batch 64,
ASHA (grace 20, η 3, max_t 200 steps), validation every 10 steps, 2 CPUs (one per trial),
random search — run by :func:`mutune.search.backends.ray_tune.run.run_trials`, i.e. Ray Tune
executes every
trial. Prints one JSON object per run and a final one, the median run (by overhead per trial)
of ``--repeat`` runs:

    {"benchmark": "ettr", "trials": 24, "wall_s": …, "productive_s": …,
     "ettr": productive_s / Σ trials' allocated seconds (the trial ETTR, as report.json's
             cost.ettr and cost.trial_ettr),
     "sweep_ettr": productive_s / (wall_s × cpus) (what the sweep held),
     "overhead_s_per_trial": (wall_s × cpus − productive_s) / trials,
     "load_avg": the 1-minute load average when the run ended, "where": {…}}

``wall_s`` is ``run_trials`` from call to return (the one-time Ray cluster start is excluded:
the cluster is started before the first run and reused). ``productive_s`` sums the trials'
seconds inside training steps. ``where`` splits the overhead per trial (seconds):

    eval          validation passes (inside the trial)
    setup         model and optimizer build (inside the trial)
    checkpoint    rung checkpoints (inside the trial)
    reports_and_batches  the rest of the training function's time (handing each report to
                  Ray and waiting for the driver to take it, making batches)
    ray_trial_start_stop  held time outside the training function (Ray resetting the reused
                  actor, fetching the task, stopping the trial after its last report)
    between_trials  CPU-seconds no trial held (Ray choosing and starting the next trial)
    actor_start_s_total  held-but-not-productive seconds of the first trial on each actor
                  (one per CPU): process start, imports, torch's first optimizer import
    steady_in_trial_overhead_s  held-but-not-productive seconds of every other trial

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
    """The reference sweep's config (the quickstart config with the issue's settings)."""
    from mutune.config import load_config, parse_config

    d = load_config().model_dump(mode="json")
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
    from mutune.search.backends.ray_tune.run import run_trials

    search, cpus = cfg.search, cfg.ray.num_cpus
    rec = MemoryRecorder()
    t0 = time.perf_counter()
    out = run_trials(None, task=task, width=256, max_t=search.scheduler.max_t, recorder=rec,
                     sweep_id=1, proxy_sweep_id=1, kind="proxy", scheduler=search.scheduler,
                     metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=storage,
                     name=f"ettr-{time.time_ns()}", seq=itertools.count(1),
                     searcher=make_searcher(search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, search.num_samples))
    wall = time.perf_counter() - t0
    trials = out.trials
    n = len(trials)
    productive = sum(t.timing["productive_s"] for t in trials)
    held = sum(t.timing["allocated_s"] for t in trials)
    evals = sum(t.timing["eval_s"] for t in trials)
    setup = sum(t.reports[0].get("setup_s", 0.0) for t in trials if t.reports)
    ckpt = sum(t.timing.get("checkpoint_s", 0.0) for t in trials)
    inside = sum(t.reports[-1].get("wall_s", 0.0) for t in trials if t.reports)
    where = {"eval": evals / n, "setup": setup / n, "checkpoint": ckpt / n,
             "reports_and_batches": (inside - productive - evals - setup - ckpt) / n,
             "ray_trial_start_stop": (held - inside) / n,
             "between_trials": (wall * cpus - held) / n}
    # the first trial on each reused actor pays the actor's start: a new worker process, its
    # imports (torch, Ray Tune) and torch.optim's first-use import of torch._dynamo (~3 s)
    firsts = sorted(trials, key=lambda t: -(t.timing["allocated_s"] - t.timing["productive_s"]))
    firsts = firsts[:cpus]
    first_over = sum(t.timing["allocated_s"] - t.timing["productive_s"] for t in firsts)
    rest = [t for t in trials if t not in firsts]
    steady = (sum(t.timing["allocated_s"] - t.timing["productive_s"] for t in rest)
              / max(len(rest), 1))
    where["actor_start_s_total"] = first_over
    where["steady_in_trial_overhead_s"] = steady
    return {"benchmark": "ettr", "trials": n, "wall_s": wall, "productive_s": productive,
            "ettr": productive / held, "sweep_ettr": productive / (wall * cpus),
            "load_avg": os.getloadavg()[0],
            "overhead_s_per_trial": (wall * cpus - productive) / n,
            "steps": sum(t.last_step for t in trials), "cpus": cpus,
            "statuses": {s: sum(t.status == s for t in trials)
                         for s in sorted({t.status for t in trials})},
            "where": where}


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
            fig = run_once(cfg, task, Path(tmp))
            runs.append(fig)
            print(json.dumps({**fig, "run": len(runs)}), flush=True)
    # the median run (by overhead per trial), so its figures belong together
    med = sorted(runs, key=lambda r: r["overhead_s_per_trial"])[len(runs) // 2]
    print(json.dumps({**med, "run": "median", "median_of": len(runs),
                      "overhead_s_per_trial_runs": [r["overhead_s_per_trial"] for r in runs]}),
          flush=True)


if __name__ == "__main__":
    main()
