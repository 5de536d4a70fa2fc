"""A target on Ray Train with frequent reports, at Ray Train's poll interval and at mutune's.

Ray Train's controller takes each worker's report out of a one-slot queue only when it polls the
workers, every ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S`` (Ray's default 2.0 s; mutune's workers get
0.1 s, ``mutune.search.backends.ray_tune.cluster.TRAIN_POLL_ENV``): a worker that reports more
often waits at each report. This benchmark trains the MLP example config's
(configs/mlp-digits.yaml) model at ``--width`` on ``--workers`` Ray Train workers (DDP, gloo)
for ``--steps`` steps with a report (an evaluation) every ``--eval-every`` steps and no
checkpoints but the last, through :func:`mutune.search.backends.ray_train_run.run_target`,
``--repeat`` times at each interval, alternating (2.0, 0.1, 2.0, …). Each run is a fresh process
with a fresh local Ray cluster (``ray.num_cpus`` CPUs) whose workers inherit the interval.

Prints one JSON line per run and a summary line:

    {"benchmark": "train_poll", "workers", "width", "steps", "eval_every", "repeat",
     "reports" (per run), "wall_s_default", "wall_s_mutune" (medians: run_target's call to
     its return, worker start-up included), "wall_s_default_range", "wall_s_mutune_range",
     "wall_change" (median mutune / median default − 1), "ettr_default", "ettr_mutune"
     (medians of the run's productive / allocated seconds), "productive_s_default",
     "productive_s_mutune" (medians), "load_avg" (1-minute, at the end)}

Usage:
    python benchmarks/train_poll.py [--workers 2] [--width 256] [--steps 120]
        [--eval-every 3] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

#: Ray Train's own poll interval (``ray.train.v2._internal.constants``), seconds
RAY_DEFAULT_S = "2.0"
POLL_VAR = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"


def one_run(args: argparse.Namespace) -> dict:
    """One target run in this process (its own local cluster); returns its figures."""
    import itertools
    import tempfile
    from pathlib import Path

    from mutune.config import load_config
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.search.backends.base import CheckpointPolicy, RunSettings
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.backends.ray_train_run import run_target
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    cfg = load_config("configs/mlp-digits.yaml")
    train = cfg.train.model_copy(update={"eval_every": args.eval_every})
    task = ProxyTask(cfg.model, train, load_task_data(cfg)).with_base_shapes()
    point = {"hparams": {"lr": 0.02, "output_mult": 1.0}, "seed": cfg.seed, "index": 0,
             "key": "target-t0"}
    rec = MemoryRecorder()
    with ray_cluster(cfg.ray), tempfile.TemporaryDirectory(prefix="mutune-poll-") as tmp:
        t0 = time.perf_counter()
        spec = GroupSpec(args.width, None, "target", points=[point])
        out = run_target(spec, RunSettings(
            task=task, max_t=args.steps, recorder=rec, sweep_id=1, ray_cfg=cfg.ray,
            storage=Path(tmp), name="poll", seq=itertools.count(1), kind="target",
            checkpoints=CheckpointPolicy(keep_final=True)), args.workers)
        wall = time.perf_counter() - t0
    (t,) = out.trials
    return {"interval_s": os.environ[POLL_VAR], "status": t.status, "wall_s": wall,
            "reports": len(rec.of("trial_reported")), "steps": t.last_step,
            "productive_s": t.timing["productive_s"],
            "ettr": t.timing["productive_s"] / t.timing["allocated_s"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--eval-every", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)   # a child run
    args = p.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(one_run(args)), flush=True)
        return
    from mutune.search.backends.ray_tune.cluster import TRAIN_POLL_ENV

    ours = TRAIN_POLL_ENV[POLL_VAR]
    runs: dict[str, list[dict]] = {RAY_DEFAULT_S: [], ours: []}
    child = [sys.executable, __file__, "--one", "--workers", str(args.workers), "--width",
             str(args.width), "--steps", str(args.steps), "--eval-every", str(args.eval_every)]
    for _ in range(max(args.repeat, 1)):
        for interval in (RAY_DEFAULT_S, ours):
            out = subprocess.run(child, env={**os.environ, POLL_VAR: interval}, check=True,
                                 capture_output=True, text=True, timeout=1800)
            line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
            fig = json.loads(line.split(" ", 1)[1])
            runs[interval].append(fig)
            print(json.dumps({"benchmark": "train_poll_run", **fig}), flush=True)
    med = statistics.median
    d, m = runs[RAY_DEFAULT_S], runs[ours]
    print(json.dumps({
        "benchmark": "train_poll", "workers": args.workers, "width": args.width,
        "steps": args.steps, "eval_every": args.eval_every, "repeat": len(d),
        "interval_s_default": float(RAY_DEFAULT_S), "interval_s_mutune": float(ours),
        "reports": med(r["reports"] for r in m),
        "wall_s_default": med(r["wall_s"] for r in d),
        "wall_s_mutune": med(r["wall_s"] for r in m),
        "wall_s_default_range": [min(r["wall_s"] for r in d), max(r["wall_s"] for r in d)],
        "wall_s_mutune_range": [min(r["wall_s"] for r in m), max(r["wall_s"] for r in m)],
        "wall_change": med(r["wall_s"] for r in m) / med(r["wall_s"] for r in d) - 1,
        "ettr_default": med(r["ettr"] for r in d), "ettr_mutune": med(r["ettr"] for r in m),
        "productive_s_default": med(r["productive_s"] for r in d),
        "productive_s_mutune": med(r["productive_s"] for r in m),
        "statuses": sorted({r["status"] for r in d + m}),
        "load_avg": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d")}), flush=True)


if __name__ == "__main__":
    main()
