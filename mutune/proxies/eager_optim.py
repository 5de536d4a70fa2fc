"""torch's Adam, AdamW and SGD without the first-call import of ``torch._dynamo``.

torch.optim guards its optimizers against ``torch.compile``: ``add_param_group``,
``zero_grad``, ``state_dict`` and ``load_state_dict`` are wrapped in ``torch._disable_dynamo``,
and ``step`` in ``_use_grad_for_differentiable`` (which inserts graph breaks). Both wrappers
import ``torch._dynamo`` when first called, so a fresh worker pays that import (about a
second, benchmarks/results/README.md) when it builds its first optimizer, although nothing
in a mutune trial is compiled. The classes here call torch's own undecorated methods (the
functions ``functools.wraps`` keeps as ``__wrapped__``), and do what the wrappers do outside
compilation themselves: ``step`` runs with autograd off (on when the optimizer is
``differentiable``), and the other methods run as they are. The update is torch's, bit for bit.

Inside a compiled region (``torch.compiler.is_compiling()``) every method calls torch's
wrapped one instead, so compilation sees exactly what it sees with torch's classes. The
classes are drop-in: ``mup.optim.MuAdam(groups, impl=EagerAdamW, …)`` builds μP AdamW
(Yang et al. 2022, Tensor Programs V, Table 3) on them.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

__all__ = ["EagerAdam", "EagerAdamW", "EagerSGD", "EAGER_OPTIMIZERS"]

_Opt = torch.optim.Optimizer


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _unguarded(name: str) -> Any:
    """``Optimizer.<name>`` without its ``torch._disable_dynamo`` guard outside compilation
    (the undecorated function, looked up once), with it inside."""
    guarded = getattr(_Opt, name)
    raw = inspect.unwrap(guarded)

    @functools.wraps(raw)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return (guarded if _compiling() else raw)(self, *args, **kwargs)
    return method


def _guarded_step(base: type) -> Any:
    """``base.step`` as torch wraps it for compilation, without the step-hook wrapper torch
    adds to a class when it is first instantiated (our own class gets that one)."""
    step = base.step
    while getattr(step, "hooked", False):
        step = step.__wrapped__
    return step


class _EagerEntryPoints:
    """Mixed in before a torch optimizer class (see the module docstring)."""

    _raw_step: Any = None      # the base class's undecorated step, set by _eager()
    _base: type = _Opt

    add_param_group = _unguarded("add_param_group")
    zero_grad = _unguarded("zero_grad")
    state_dict = _unguarded("state_dict")
    load_state_dict = _unguarded("load_state_dict")

    def step(self, closure: Any = None) -> Any:
        if _compiling():
            return _guarded_step(self._base)(self, closure)
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(bool(self.defaults["differentiable"]))
            return type(self)._raw_step(self, closure)
        finally:
            torch.set_grad_enabled(prev)


def _eager(base: type) -> type:
    raw = inspect.unwrap(_guarded_step(base))
    return type(f"Eager{base.__name__}", (_EagerEntryPoints, base),
                {"_raw_step": staticmethod(raw), "_base": base, "__module__": __name__,
                 "__doc__": f"``torch.optim.{base.__name__}`` without the first-call "
                            "``torch._dynamo`` import (module docstring)."})


EagerAdam = _eager(torch.optim.Adam)
EagerAdamW = _eager(torch.optim.AdamW)
EagerSGD = _eager(torch.optim.SGD)

#: optimizer kind (``train.optimizer``) → class
EAGER_OPTIMIZERS = {"adam": EagerAdam, "adamw": EagerAdamW, "sgd": EagerSGD}
