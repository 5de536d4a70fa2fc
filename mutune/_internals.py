"""Every use of another library's private state, in one place, each gated by version.

Two shortcuts buy speed and are off outside the releases they were verified on
(:data:`VERIFIED`): then the library's public behaviour runs and a ``RuntimeWarning`` says
which shortcut is off and why.

* :func:`keep_actors` — Ray Tune keeps a finished trial's actor only for a trial already
  waiting (``TuneController._actor_cache``, an ``_ObjectCache(may_keep_one=True)``); raising
  its bound by the driver's slots lets a width's confirmation design and a gate round start on
  kept actors instead of new worker processes.
* :func:`optimizer_class` — torch's Adam, AdamW and SGD wrap ``step``, ``zero_grad``,
  ``add_param_group``, ``state_dict`` and ``load_state_dict`` for ``torch.compile``, and the
  wrappers import ``torch._dynamo`` on first call. The eager classes call the undecorated
  functions (``__wrapped__``) outside compilation, with autograd off in ``step`` as torch's
  wrapper does; inside a compiled region they call torch's wrapped methods. The updates are
  torch's, bit for bit.

Two reads serve correctness and fall back to "unknown" (None) where the attribute is gone:
:func:`session_dir` (the local cluster's folder, for reaping a killed driver's processes)
and :func:`draining_nodes` (Ray's node drain deadlines, a preemption notice).
``tests/test_internals.py`` fails when any attribute relied on here disappears.
"""
from __future__ import annotations

import functools
import importlib.metadata
import inspect
import re
import warnings
from typing import Any

__all__ = ["VERIFIED", "verified", "keep_actors", "optimizer_class", "eager_optimizers",
           "session_dir", "draining_nodes"]

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
    """True when the installed ``package`` ("ray" or "torch") is a release in
    :data:`VERIFIED`; otherwise warns once that its shortcuts are off."""
    low, high = VERIFIED[package]
    ok = low <= _release(package) <= high
    if not ok:
        warnings.warn(f"{package} {importlib.metadata.version(package)} is outside the "
                      f"releases mutune's {package} shortcuts were verified on "
                      f"({low[0]}.{low[1]}–{high[0]}.{high[1]}): they are off",
                      RuntimeWarning, stacklevel=2)
    return ok


def keep_actors(tune_controller: Any, resources: Any, slots: int) -> bool:
    """Let Ray Tune keep up to ``slots`` finished actors with ``resources`` for later trials.

    Args:
        tune_controller: the run's ``TuneController`` (a scheduler hook's argument).
        resources: the trials' ``PlacementGroupFactory``.
        slots: trials running at once at most (the driver's concurrency), >= 1.
    Returns:
        True when the bound was raised; False when Ray is unverified or has no actor cache of
        the known shape (nothing changed).
    """
    cache = getattr(tune_controller, "_actor_cache", None)
    if not verified("ray") or not callable(getattr(cache, "increase_max", None)):
        return False
    cache.increase_max(resources, by=max(int(slots), 1))
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
    """The optimizer class for ``train.optimizer`` ``kind`` ("adam", "adamw", "sgd"): the
    eager class where torch is verified and its wrappers have the known shape, torch's own
    class otherwise.

    Raises:
        KeyError: an unknown ``kind``.
    """
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
    """``base.step`` as torch wraps it for compilation, without the step-hook wrapper torch
    adds to a class when it is first instantiated (the eager class gets its own)."""
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
    """``kind`` → the eager class (``EagerAdam``, ``EagerAdamW``, ``EagerSGD``), built once;
    drop-in for torch's: ``mup.optim.MuAdam(groups, impl=EagerAdamW, …)`` is μP AdamW (Yang
    et al. 2022, Tensor Programs V, Table 3)."""
    import torch

    return {"adam": _eager(torch.optim.Adam), "adamw": _eager(torch.optim.AdamW),
            "sgd": _eager(torch.optim.SGD)}


def __getattr__(name: str) -> type:
    """``EagerAdam`` / ``EagerAdamW`` / ``EagerSGD`` by name (pickle finds classes so)."""
    for cls in (eager_optimizers().values() if name.startswith("Eager") else ()):
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
