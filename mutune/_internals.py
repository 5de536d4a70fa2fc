"""Every use of another library's private state, in one place, each gated by version
(:data:`VERIFIED`; outside it the public behaviour runs with a ``RuntimeWarning``): kept Ray
Tune actors, trial actors started in Ray's idle workers, torch optimizers without their
compile wrappers, and two reads that fall back to None. ``tests/test_internals.py`` fails
when an attribute relied on here disappears."""
from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["VERIFIED", "verified", "keep_actors", "tune_actor_env", "use_idle_workers",
           "optimizer_class", "eager_optimizers", "session_dir", "draining_nodes"]

#: (major, minor) releases, inclusive, that each library's shortcuts were verified on
VERIFIED: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "ray": ((2, 60), (2, 60)),
    "torch": ((2, 11), (2, 13)),
}


def _release(package: str) -> tuple[int, int]:
    major, minor = re.findall(r"\d+", importlib.metadata.version(package))[:2]
    return int(major), int(minor)


@functools.cache
def verified(package: str) -> bool:
    """True when the installed ``package`` is a release in :data:`VERIFIED`; else warns once."""
    low, high = VERIFIED[package]
    ok = low <= _release(package) <= high
    if not ok:
        warnings.warn(f"{package} {importlib.metadata.version(package)} is outside the "
                      f"releases mutune's {package} shortcuts were verified on "
                      f"({low[0]}.{low[1]}–{high[0]}.{high[1]}): they are off",
                      RuntimeWarning, stacklevel=2)
    return ok


def keep_actors(tune_controller: Any, resources: Any, slots: int) -> bool:
    """Let Ray Tune keep up to ``slots`` finished actors with ``resources`` for later trials
    (``TuneController._actor_cache``); False when nothing changed."""
    cache = getattr(tune_controller, "_actor_cache", None)
    if not verified("ray") or not callable(getattr(cache, "increase_max", None)):
        return False
    cache.increase_max(resources, by=max(int(slots), 1))
    return True


def tune_actor_env() -> dict[str, str] | None:
    """The ``env_vars`` Ray Tune puts in a trial actor's ``runtime_env`` now: its defaults plus
    the variables it passes on from this process's environment
    (``ray.tune.execution.class_cache``); None when this Ray Tune does not say."""
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
    workers' own environment already holds every variable it would set, so they can start in
    the worker processes Ray started idle with the cluster (an actor with a ``runtime_env``
    waits for a new process of its own). Sets ``TuneController._class_cache._cache``.

    Args:
        tune_controller: the run's ``TuneController`` (a scheduler hook's argument).
        trial: a trial of the run (its trainable class is the one cached).
        worker_env: the environment the cluster's workers start with
            (:func:`mutune.search.backends.ray_tune.cluster.local_worker_env`), None: unknown.
    Returns:
        True when Tune will create the actors without a ``runtime_env``; False when Tune's own
        class stays: the workers' environment is unknown or lacks a variable or value, Tune
        made the class already, this Ray is outside :data:`VERIFIED`, or its class cache
        has another shape."""
    wanted = tune_actor_env()
    if worker_env is None or wanted is None or not verified("ray"):
        return False
    if any(worker_env.get(k) != v for k, v in wanted.items()):
        return False
    cache = getattr(getattr(tune_controller, "_class_cache", None), "_cache", None)
    trainable_cls = trial.get_trainable_cls()
    if not isinstance(cache, dict) or trainable_cls is None or trainable_cls in cache:
        return False
    import ray

    cache[trainable_cls] = ray.remote(trainable_cls)
    return True


def session_dir() -> str | None:
    """The session folder of the local Ray cluster this process started, or None when this
    Ray does not expose it (``ray._private.worker.global_worker.node``)."""
    import ray

    try:
        return str(ray._private.worker.global_worker.node.get_session_dir_path())
    except AttributeError:
        return None


def draining_nodes() -> dict[str, int] | None:
    """Ray's drain deadlines (node id hex → ms since the epoch, 0: none set), or None when
    Ray cannot say (``ray._private.state.state.get_draining_nodes``, GCS unreachable)."""
    try:
        from ray._private.state import state

        return dict(state.get_draining_nodes())
    except Exception:  # noqa: BLE001 - a Ray without this API, or its GCS unreachable
        return None


def optimizer_class(kind: str) -> type:
    """The optimizer class for ``kind`` ("adam", "adamw", "sgd"): the eager class where torch is
    verified, torch's own otherwise. KeyError for an unknown ``kind``."""
    import torch

    plain = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
    cls = plain[kind]
    if not verified("torch") or not _wrappers_known():
        return cls
    return eager_optimizers()[kind]


@functools.cache
def _wrappers_known() -> bool:
    import torch

    opt = torch.optim.Optimizer
    return all(inspect.unwrap(getattr(opt, name)) is not getattr(opt, name)
               for name in _UNGUARDED) and hasattr(torch.optim.Adam.step, "__wrapped__")


_UNGUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def _unguarded(name: str) -> Any:
    """``Optimizer.<name>`` undecorated outside compilation, torch's own inside."""
    import torch

    guarded = getattr(torch.optim.Optimizer, name)
    raw = inspect.unwrap(guarded)

    @functools.wraps(raw)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return (guarded if torch.compiler.is_compiling() else raw)(self, *args, **kwargs)
    return method


def _guarded_step(base: type) -> Any:
    """``base.step`` as torch wraps it for compilation, without its step-hook wrapper."""
    step = base.step
    while getattr(step, "hooked", False):
        step = step.__wrapped__
    return step


def _eager_step(self: Any, closure: Any = None) -> Any:
    import torch

    if torch.compiler.is_compiling():
        return _guarded_step(self._base)(self, closure)
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(bool(self.defaults["differentiable"]))
        return type(self)._raw_step(self, closure)
    finally:
        torch.set_grad_enabled(prev)


def _eager(base: type) -> type:
    body = {name: _unguarded(name) for name in _UNGUARDED}
    body.update(step=_eager_step, _raw_step=staticmethod(inspect.unwrap(_guarded_step(base))),
                _base=base, __module__=__name__,
                __doc__=f"``torch.optim.{base.__name__}`` without the first-call "
                        "``torch._dynamo`` import (:func:`optimizer_class`).")
    return type(f"Eager{base.__name__}", (base,), body)


@functools.cache
def eager_optimizers() -> dict[str, type]:
    """``kind`` → the eager class, built once; drop-in for torch's under ``mup.optim.MuAdam``
    (Yang et al. 2022, Tensor Programs V, Table 3)."""
    import torch

    return {"adam": _eager(torch.optim.Adam), "adamw": _eager(torch.optim.AdamW),
            "sgd": _eager(torch.optim.SGD)}


def __getattr__(name: str) -> type:
    """``EagerAdam`` / ``EagerAdamW`` / ``EagerSGD`` by name (pickle finds classes so)."""
    for cls in (eager_optimizers().values() if name.startswith("Eager") else ()):
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
