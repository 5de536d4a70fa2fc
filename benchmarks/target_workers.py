"""The target on 1 and on N Ray Train workers (DDP, same global batch): same loss, step time.

The MLP example config's target (configs/mlp-digits.yaml; or ``--config``'s) trained with
fixed hyperparameters (the search space's geometric middle, overridable with ``--lr``) through
:func:`mutune.search.backends.ray_train_run.run_target`, once on 1 worker and once on ``--workers``
workers, ``--repeat`` times alternating (1, N, 1, N, …) on a local Ray cluster of
``ray.num_cpus`` CPUs. Each run trains the same global batch per step, split between the
workers, from the same seed; DDP averages the gradients, so the final validation losses agree
up to float summation order.

Prints one JSON line per pair and a summary line:

    {"benchmark": "target_workers", "config", "width", "steps", "workers", "repeat",
     "val_loss_1", "val_loss_n", "relative_difference" (|n − 1| / 1, the largest over pairs),
     "s_per_step_1", "s_per_step_n" (medians: productive seconds / steps),
     "step_time_ratio" (median s_per_step_n / s_per_step_1; < 1 is a speed-up),
     "wall_s_1", "wall_s_n" (medians: fit() start to end, worker start-up included)}

Usage:
    python benchmarks/target_workers.py [--config configs/mlp-digits.yaml] [--workers 2]
        [--steps N] [--repeat 3]
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import tempfile
import time
from pathlib import Path


def _middle(dist) -> float:
    if hasattr(dist, "low"):
        return math.sqrt(dist.low * dist.high) if dist.low > 0 else (dist.low + dist.high) / 2
    return sorted(dist.values)[len(dist.values) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None,
                    help="sweep config (default: the MLP example, configs/mlp-digits.yaml)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=None, help="default: the config's target")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import ray

    from mutune.config import load_config
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.search.backends.base import CheckpointPolicy, RunSettings
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.backends.ray_train_run import run_target
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    cfg = load_config(args.config or "configs/mlp-digits.yaml")
    steps = args.steps or cfg.target_steps
    hp = {**{k: _middle(v) for k, v in cfg.search.space.items()}, **cfg.search.fixed}
    if args.lr is not None:
        hp["lr"] = args.lr
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    runs: dict[int, list[dict]] = {1: [], args.workers: []}
    with ray_cluster(cfg.ray), tempfile.TemporaryDirectory(prefix="mutune-tw-") as tmp:
        for i, workers in itertools.product(range(args.repeat), (1, args.workers)):
            point = {"hparams": hp, "seed": cfg.seed, "index": 0, "key": "target-t0"}
            t0 = time.perf_counter()
            spec = GroupSpec(cfg.target.width, None, "target", points=[point])
            out = run_target(spec, RunSettings(
                task=task, max_t=steps, recorder=MemoryRecorder(), sweep_id=1,
                ray_cfg=cfg.ray, storage=Path(tmp), name=f"r{i}w{workers}",
                seq=itertools.count(1), kind="target",
                checkpoints=CheckpointPolicy(keep_final=True)), workers)
            wall = time.perf_counter() - t0
            (t,) = out.trials
            last = t.reports[-1]
            runs[workers].append({"status": t.status, "val_loss": last["val_loss"],
                                  "s_per_step": last["productive_s"] / t.last_step,
                                  "wall_s": wall})
        ray.shutdown()
    one, many = runs[1], runs[args.workers]
    for a, b in zip(one, many):
        print(json.dumps({"benchmark": "target_workers_pair", "val_loss_1": a["val_loss"],
                          "val_loss_n": b["val_loss"], "s_per_step_1": a["s_per_step"],
                          "s_per_step_n": b["s_per_step"], "status": [a["status"],
                                                                       b["status"]]}))
    med = statistics.median
    print(json.dumps({
        "benchmark": "target_workers", "config": args.config or "mlp-digits",
        "width": cfg.target.width, "steps": steps, "workers": args.workers,
        "repeat": args.repeat, "hparams": hp,
        "val_loss_1": med(r["val_loss"] for r in one),
        "val_loss_n": med(r["val_loss"] for r in many),
        "relative_difference": max(abs(b["val_loss"] - a["val_loss"]) / a["val_loss"]
                                   for a, b in zip(one, many)),
        "s_per_step_1": med(r["s_per_step"] for r in one),
        "s_per_step_n": med(r["s_per_step"] for r in many),
        "step_time_ratio": med(b["s_per_step"] / a["s_per_step"] for a, b in zip(one, many)),
        "wall_s_1": med(r["wall_s"] for r in one), "wall_s_n": med(r["wall_s"] for r in many),
        "date": time.strftime("%Y-%m-%d")}))


if __name__ == "__main__":
    main()
