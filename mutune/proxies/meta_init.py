"""Building a model on PyTorch's meta device without running its initializers."""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["SkipInitOnMeta", "SKIPPED_INITIALIZERS"]

#: in-place random fills (``Tensor`` methods) and ``torch.nn.init`` initializers, by name
SKIPPED_INITIALIZERS = frozenset({
    "normal_", "uniform_", "bernoulli_", "exponential_", "random_", "cauchy_", "log_normal_",
    "geometric_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_", "sparse_"})


class SkipInitOnMeta(TorchFunctionMode):
    """Torch function mode: :data:`SKIPPED_INITIALIZERS` on meta tensors return them untouched."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        tensor = args[0] if args else kwargs.get("tensor")
        if (getattr(func, "__name__", None) in SKIPPED_INITIALIZERS
                and isinstance(tensor, torch.Tensor) and tensor.is_meta):
            return tensor
        return func(*args, **kwargs)
