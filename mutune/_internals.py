"""Every use of another library's private state, in one place, each gated by version
(:data:`VERIFIED`; outside it the public behaviour runs with a ``RuntimeWarning``): kept Ray
Tune actors, torch optimizers without their compile wrappers, and two reads that fall back to
None. ``tests/test_internals.py`` fails when an attribute relied on here disappears."""
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
