"""Let a sweep's trial actors start in Ray's idle worker processes.

Ray Tune gives every trial actor a ``runtime_env`` of a few environment variables
(``ray.tune.execution.class_cache``: ``PL_DISABLE_FORK=1``, plus the AWS credentials and Ray
Train settings the driver's environment has). Ray runs an actor only in a worker process
started with the same ``runtime_env``, so each trial actor waited for a process of its own:
the raylet asked its runtime-env agent for the environment, started Python and imported Ray
before the actor's own imports began, while the worker processes Ray starts with a cluster
(one per CPU) sat idle until Ray ended them unused. On the reference sweep of
``benchmarks/ettr.py`` (2 CPUs, 24 trials) that wait was about 0.45 s per actor.

On a local cluster mutune started (:func:`~.cluster.ray_cluster`), the workers inherit the
environment the cluster started in (:func:`~.cluster.local_worker_env`, which holds
:func:`~.cluster.worker_env`'s ``PL_DISABLE_FORK=1``). When every variable Tune would set has
that same value there, the ``runtime_env`` changes nothing but which processes the actor may
use: :func:`use_idle_workers` then gives Tune the trainable's actor class without it, and
the actor starts in an idle worker when one is there (a new one otherwise, without the
agent's round trip). On a cluster at ``ray.address``, or when a variable was set or changed
after the cluster started, Tune's own class is used, ``runtime_env`` and all.

Tune keeps its actor classes in ``TuneController._class_cache`` (private state, Ray 2.60);
where this Ray has no such cache, :func:`use_idle_workers` changes nothing and says so.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["use_idle_workers", "tune_actor_env"]


def tune_actor_env() -> dict[str, str] | None:
    """The ``env_vars`` Ray Tune puts in a trial actor's ``runtime_env`` now: its defaults
    plus the variables it passes on from this process's environment; None when this Ray
    Tune does not say (no ``ray.tune.execution.class_cache`` constants)."""
    try:
        from ray.tune.execution.class_cache import DEFAULT_ENV_VARS, ENV_VARS_TO_PROPAGATE
    except ImportError:
        return None
    env = dict(DEFAULT_ENV_VARS)
    env.update({k: os.environ[k] for k in ENV_VARS_TO_PROPAGATE if k in os.environ})
    return env


def use_idle_workers(tune_controller: Any, trial: Any,
                     worker_env: Mapping[str, str] | None) -> bool:
    """Have Ray Tune create ``trial``'s trainable actors without a ``runtime_env`` when the
    workers' own environment already holds every variable it would set.

    Args:
        tune_controller: the run's ``TuneController`` (a scheduler hook's argument).
        trial: a trial of the run (its trainable class is the one cached).
        worker_env: the environment the cluster's workers start with
            (:func:`~.cluster.local_worker_env`), None when unknown.
    Returns:
        True when Tune will create the actors without a ``runtime_env``; False when Tune's
        own class stays: the workers' environment is unknown or lacks a variable or value,
        Tune already made the class, or this Ray Tune has no class cache of the known
        shape.
    """
    wanted = tune_actor_env()
    if worker_env is None or wanted is None:
        return False
    if any(worker_env.get(k) != v for k, v in wanted.items()):
        return False
    cache = getattr(getattr(tune_controller, "_class_cache", None), "_cache", None)
    trainable_cls = trial.get_trainable_cls()
    if not isinstance(cache, dict) or trainable_cls is None or trainable_cls in cache:
        return False            # (Tune made its class already: its actors keep it)
    import ray

    cache[trainable_cls] = ray.remote(trainable_cls)
    return True
