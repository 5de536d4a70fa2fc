"""The Ray cluster a sweep runs on, how many trials fit on it, and Ray Tune's own loggers."""
from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Any

from mutune.config import RayConfig

__all__ = ["ray_cluster", "slots", "tracking_callbacks", "shortfall", "pending_trials",
           "PENDING_ENV", "worker_env", "local_worker_env", "TUNE_ACTOR_ENV",
           "TRAIN_POLL_ENV", "environ"]


def tracking_callbacks(tracking: Any, name: str) -> list[Any]:
    """Ray Tune's own logger callbacks the config's ``tracking`` section asks for:
    ``TBXLoggerCallback`` (TensorBoard) and ``MLflowLoggerCallback`` (experiment
    ``mlflow_experiment`` or ``name``).

    Raises:
        SearchError: a logger is asked for but its package (extra) is not installed."""
    import importlib.util

    from mutune.errors import SearchError

    out: list[Any] = []
    if tracking is None:
        return out
    if tracking.tensorboard:
        if importlib.util.find_spec("tensorboardX") is None:
            raise SearchError("tracking.tensorboard needs tensorboardX: pip install "
                              "'mutune[tensorboard]'")
        from ray.tune.logger import TBXLoggerCallback
        out.append(TBXLoggerCallback())
    if tracking.mlflow_uri:
        if importlib.util.find_spec("mlflow") is None:
            raise SearchError("tracking.mlflow_uri needs mlflow: pip install 'mutune[mlflow]'")
        from ray.air.integrations.mlflow import MLflowLoggerCallback
        out.append(MLflowLoggerCallback(tracking_uri=tracking.mlflow_uri,
                                        experiment_name=tracking.mlflow_experiment or name))
    return out


#: what Ray Tune sets in every trial actor's ``runtime_env``
#: (``ray.tune.execution.class_cache.DEFAULT_ENV_VARS``); in the workers' own environment it
#: lets trial actors start in Ray's idle workers (:func:`mutune._internals.use_idle_workers`)
TUNE_ACTOR_ENV = {"PL_DISABLE_FORK": "1"}

#: the environment the workers of the local cluster :func:`ray_cluster` started inherit,
#: while it runs (Ray's own state is per process too: one cluster per driver)
_started: dict[str, dict[str, str]] = {}

#: glibc malloc arenas per Ray worker process: a worker runs ~25 threads, and glibc's default
#: (8 × cores arenas) lets each keep its own heap; two arenas cut a quickstart trial worker's
#: resident memory by about 40 MB (490 against 530 MB, benchmarks/driver_memory.py) at no
#: measurable cost to a trial, whose training runs in one thread
MALLOC_ARENAS = "2"


#: how often Ray Train's controller polls the target run's workers, in seconds (Ray Train
#: v2's ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``, default 2.0). Each worker hands its reports
#: over through a one-slot queue (``ray/train/v2/_internal/execution/worker_group/worker.py``)
#: that only a poll empties, so with Ray's default a worker that reports more often than
#: every 2 s waits at each report, and every run ends up to one interval after its last
#: step: a DDP target on 2 CPUs reporting every 3 steps, 40 reports, took 101.3 s against
#: 20.6 s at 0.1 s (medians of 3, ``benchmarks/train_poll.py``). A poll is one small actor
#: call per worker: the controller used 5.2 CPU-s in a 43.7-s run at 0.1 s, its start-up
#: included.
TRAIN_POLL_ENV = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}


def worker_env() -> dict[str, str]:
    """Environment variables of the sweep's Ray workers (set where a local cluster starts,
    or as the job's ``runtime_env`` on a cluster at ``ray.address``, which Ray merges into
    every actor's own): :data:`TUNE_ACTOR_ENV`; ``MALLOC_ARENA_MAX`` (:data:`MALLOC_ARENAS`)
    and Ray Train's poll interval (:data:`TRAIN_POLL_ENV`, read by the target run's
    controller, a worker too) unless the user's environment sets them."""
    env = dict(TUNE_ACTOR_ENV)
    if "MALLOC_ARENA_MAX" not in os.environ:
        env["MALLOC_ARENA_MAX"] = MALLOC_ARENAS
    env.update({k: v for k, v in TRAIN_POLL_ENV.items() if k not in os.environ})
    return env


@contextlib.contextmanager
def ray_cluster(cfg: RayConfig) -> Iterator[None]:
    """Connect to Ray for the duration of the block, starting a local cluster if needed."""
    import ray

    # Tune's per-trial CSV/JSON/TensorBoard loggers cost start-up time per trial; mutune
    # records everything in its own database.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banners; verbose=0
    if ray.is_initialized():
        yield
        return
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                  logging_level=logging.ERROR, configure_logging=True)
    entry = None
    if cfg.address:
        ray.init(address=cfg.address, runtime_env={"env_vars": worker_env()}, **kwargs)
    else:
        from mutune.search.backends.ray_tune.orphans import reap_orphans, register

        for found in reap_orphans():      # what a killed driver's cluster left running
            names = ", ".join(f"{p['name']} (PID {p['pid']})" for p in found["ended"])
            warnings.warn(f"ended {len(found['ended'])} process(es) of the local Ray cluster "
                          f"left by driver PID {found['driver_pid']} "
                          f"({found['session_dir']}): {names or 'none left'}", stacklevel=3)
        # address="local": always a new local cluster, never one another process started
        # on the same host (ray.init() without an address joins the latest `ray start` one)
        # a local cluster's workers inherit the environment its raylet starts in: set there
        # instead of as the job's runtime_env, the workers Ray prestarts at ray.init serve
        # the sweep's actors, Ray Tune's trial actors too (use_idle_workers); with a
        # runtime_env every actor waits for a process of its own. Ray Tune, imported next,
        # is imported in a thread while Ray starts its processes.
        from mutune._internals import session_dir
        from mutune.search.backends.ray_tune.import_ahead import importing_ahead

        with environ(worker_env()), importing_ahead("ray.tune"):
            started = dict(os.environ)
            ray.init(address="local", num_cpus=cfg.num_cpus, **kwargs)
        folder = session_dir()
        entry = register(folder) if folder is not None else None
        _started["env"] = started
    try:
        yield
    finally:
        _started.pop("env", None)
        ray.shutdown()
        if entry is not None:
            from mutune.search.backends.ray_tune.orphans import unregister
            unregister(entry)


def local_worker_env() -> dict[str, str] | None:
    """The environment every worker of the local cluster :func:`ray_cluster` started in this
    process inherits (its raylet's: this process's environment at ``ray.init``, plus
    :func:`worker_env`); None while no such cluster runs (none, one at ``ray.address``, or
    one this process joined already initialized)."""
    env = _started.get("env")
    return dict(env) if env is not None else None


@contextlib.contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """``env`` (variable name → value) in this process's environment for the block, so the
    processes started in it (a local Ray cluster's raylet and so its workers) inherit it;
    each variable is as it was before (set or absent) afterwards, also on an error."""
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def slots(ray_cfg: RayConfig) -> int:
    """Trials that can run at once: ``max_concurrent_trials`` if set, else what the connected
    cluster's CPUs (and GPUs, when trials take some — ⌊1/fraction⌋ per card for a fraction of
    one) allow for the per-trial resources (:func:`mutune.scaling.idle.held_devices`)."""
    if ray_cfg.max_concurrent_trials:
        return ray_cfg.max_concurrent_trials
    import ray

    from mutune.scaling.idle import held_devices

    return held_devices(dict(ray.cluster_resources()), cpus_per_trial=ray_cfg.cpus_per_trial,
                        gpus_per_trial=ray_cfg.gpus_per_trial,
                        max_concurrent=ray_cfg.max_concurrent_trials,
                        num_cpus=ray_cfg.num_cpus).slots


#: Ray Tune's limit on trials waiting to start (their actors starting), read when a run begins
PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"


@contextlib.contextmanager
def pending_trials(n: int) -> Iterator[None]:
    """Let the Ray Tune run started in the block have up to ``n`` trials pending at once."""
    if PENDING_ENV in os.environ:
        yield
        return
    with environ({PENDING_ENV: str(max(int(n), 1))}):
        yield


def shortfall(cpus: float, gpus: float) -> tuple[str, float, float] | None:
    """The first resource the connected Ray cluster has less of than asked — (``"CPU"`` or
    ``"GPU"``, needed, available) — or None when it holds ``cpus`` CPUs and ``gpus`` GPUs
    (a task asking more would wait forever instead of failing)."""
    import ray

    res = ray.cluster_resources()
    for kind, need in (("CPU", cpus), ("GPU", gpus)):
        if need and res.get(kind, 0) < need:
            return kind, float(need), float(res.get(kind, 0))
    return None
