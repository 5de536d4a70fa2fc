"""How many devices the target run takes, and the index-limit warning for its batch."""
from __future__ import annotations

import warnings
from typing import Any

__all__ = ["target_workers", "target_cpus", "index_limit_note", "warn_index_limit"]


def target_workers(config: Any, batch: int | None = None) -> int:
    """Data-parallel workers of the target run: ``target.num_workers``; by default on GPUs every
    slot the sweep holds, lowered to a divisor of ``batch``; on CPUs 1
    (benchmarks/target_workers.py)."""
    if config.target.num_workers:
        return int(config.target.num_workers)
    if not config.ray.gpus_per_trial:
        return 1
    from mutune.search.backends.ray_tune.cluster import slots

    batch = batch or config.target.batch_size or config.train.batch_size
    n = max(int(slots(config.ray)), 1)
    while batch % n:
        n -= 1
    return n


def target_cpus(config: Any) -> float:
    """CPUs of a one-process CPU target: ``target.cpus``; by default every CPU the sweep holds on
    a local cluster, else ``ray.cpus_per_trial``."""
    from mutune.scaling.idle import held_devices

    r = config.ray
    if config.target.cpus is not None:
        return float(config.target.cpus)
    if r.gpus_per_trial or r.address:
        return float(r.cpus_per_trial)
    return float(held_devices(None, cpus_per_trial=r.cpus_per_trial, gpus_per_trial=0.0,
                              max_concurrent=r.max_concurrent_trials,
                              num_cpus=r.num_cpus).devices)


def index_limit_note(config: Any, task: Any, batch_per_worker: int) -> str | None:
    """The target's warning text when one GPU micro-batch makes an activation of ≥ 2^31 elements
    (which trained NaN on CUDA); None otherwise."""
    if not config.ray.gpus_per_trial:
        return None
    from mutune.proxies.index_limit import index_limit_warning

    return index_limit_warning(task.model, config.target.width, batch_per_worker,
                               task.train.micro_batches)


def warn_index_limit(config: Any, task: Any, workers: int) -> None:
    """Warn (``RuntimeWarning``) with :func:`index_limit_note` for a worker's share of the batch."""
    note = index_limit_note(config, task, task.train.batch_size // workers)
    if note:
        warnings.warn(f"the target run: {note}", RuntimeWarning, stacklevel=3)
