"""How many devices the target run takes: its data-parallel workers, the CPUs of a one-process
CPU target, and the index-limit warning for a worker's share of its batch."""
from __future__ import annotations

import warnings
from typing import Any

__all__ = ["target_workers", "target_cpus", "index_limit_note", "warn_index_limit"]


def target_workers(config: Any, batch: int | None = None) -> int:
    """Data-parallel workers of the target run: ``target.num_workers``; by default, when
    trials get GPUs, every slot the sweep holds on its connected Ray cluster
    (:func:`~mutune.search.backends.ray_tune.cluster.slots`), lowered to the largest count
    that divides the target's batch (``batch``; default the config's); on CPUs, 1 — gloo
    workers on one machine's cores step slower than one process (benchmarks/target_workers.py),
    so a CPU target on several workers costs more device-hours for nothing (set
    ``target.num_workers`` for a cluster of CPU nodes)."""
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
    """CPUs of a target that trains as one process on CPUs (its torch threads: one per CPU):
    ``target.cpus``; by default, on a local cluster, every CPU the sweep holds (slots ×
    ``ray.cpus_per_trial``, the slots as :func:`mutune.scaling.idle.held_devices` counts
    them from ``ray.num_cpus``), so no CPU the sweep holds idles while the target trains; on
    a cluster (``ray.address``, whose nodes a single process cannot span) or when trials get
    GPUs, ``ray.cpus_per_trial``. More threads step faster but do less work per CPU-second,
    so the target's MFU per device falls while the CPUs it holds no longer idle."""
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
    """The target's index-limit warning text when it trains on GPUs and one micro-batch of
    ``batch_per_worker`` rows makes an activation of 2^31 elements or more
    (:func:`mutune.proxies.index_limit.index_limit_warning`: such a step trained NaN on
    CUDA); None on CPU trials or under the limit. The target stage warns with it and the
    dry run's plan carries it."""
    if not config.ray.gpus_per_trial:
        return None
    from mutune.proxies.index_limit import index_limit_warning

    return index_limit_warning(task.model, config.target.width, batch_per_worker,
                               task.train.micro_batches)


def warn_index_limit(config: Any, task: Any, workers: int) -> None:
    """Warn (``RuntimeWarning``) with :func:`index_limit_note` for a worker's share of the
    target's batch on ``workers`` data-parallel workers."""
    note = index_limit_note(config, task, task.train.batch_size // workers)
    if note:
        warnings.warn(f"the target run: {note}", RuntimeWarning, stacklevel=3)
