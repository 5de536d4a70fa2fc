"""Depth-wise μP: m_L = L/L₀; branches ·m_L^-α, hidden groups' lr ·m_L^(α-1), ε ·m_L^-α.

``completep``: α = 1 (Dey et al. 2025, arXiv 2505.01618, Table 1, §3); ``depth_mup``: α = 1/2
(Yang et al. 2023, Tensor Programs VI, arXiv 2310.02244, §3). Weight decay and init do not
change with depth; the factors are Adam's."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch import nn

from mutune.errors import ProxyError

__all__ = ["DEPTH_PARAMETRIZATIONS", "LAYER_GROUPS", "DepthScaling", "depth_param_groups"]

#: depth parametrization → α (None: no depth scaling)
DEPTH_PARAMETRIZATIONS: dict[str, float | None] = {"none": None, "depth_mup": 0.5,
                                                    "completep": 1.0}
#: the layer groups a model assigns each parameter to (``model.depth_groups()``)
LAYER_GROUPS = ("embedding", "hidden_weight", "hidden_vector", "output")


@dataclass(frozen=True)
class DepthScaling:
    """A depth parametrization of a model ``depth`` deep, equal to the unscaled one at
    ``base_depth``.

    Raises:
        ProxyError: an unknown parametrization, or a depth or base depth below 1."""
    parametrization: str
    depth: int
    base_depth: int

    def __post_init__(self) -> None:
        if self.parametrization not in DEPTH_PARAMETRIZATIONS:
            raise ProxyError(f"depth parametrization {self.parametrization!r}: use one of "
                             f"{sorted(DEPTH_PARAMETRIZATIONS)}")
        for name in ("depth", "base_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ProxyError(f"{name} = {value!r}: must be an integer >= 1")

    @property
    def alpha(self) -> float | None:
        """The exponent α (1 CompleteP, 1/2 Depth-μP; None without depth scaling)."""
        return DEPTH_PARAMETRIZATIONS[self.parametrization]

    @property
    def multiplier(self) -> float:
        """m_L = depth / base_depth."""
        return self.depth / self.base_depth

    @property
    def branch_multiplier(self) -> float:
        """What each residual branch's output is multiplied by: m_L^-α (1 without)."""
        return 1.0 if self.alpha is None else self.multiplier ** -self.alpha

    def factors(self, group: str) -> dict[str, float]:
        """{"lr", "eps", "weight_decay"} multipliers of ``group``; ProxyError if unknown."""
        if group not in LAYER_GROUPS:
            raise ProxyError(f"layer group {group!r}: use one of {LAYER_GROUPS}")
        a = self.alpha
        if a is None:
            return {"lr": 1.0, "eps": 1.0, "weight_decay": 1.0}
        m = self.multiplier
        lr = m ** (a - 1.0) if group in ("hidden_weight", "hidden_vector") else 1.0
        return {"lr": lr, "eps": m ** -a, "weight_decay": 1.0}


def depth_param_groups(model: nn.Module, scaling: DepthScaling, *, lr: float, eps: float,
                       weight_decay: float) -> list[dict[str, Any]]:
    """One optimizer parameter group per layer group, with its ``lr``, ``eps`` and ``weight_decay``.

    Raises:
        ProxyError: no ``depth_groups``, or a parameter without a known group."""
    groups_of = getattr(model, "depth_groups", None)
    if not callable(groups_of):
        raise ProxyError(f"{type(model).__name__} has no depth_groups(): a depth "
                         "parametrization needs the model to name each parameter's layer "
                         "group (the built-in mlp with residual: true, and gpt)")
    named = groups_of()
    out: dict[str, list[Any]] = {g: [] for g in LAYER_GROUPS}
    for name, p in model.named_parameters():
        group = named.get(name)
        if group not in out:
            raise ProxyError(f"parameter {name!r} of {type(model).__name__}: layer group "
                             f"{group!r}, expected one of {LAYER_GROUPS}")
        out[group].append(p)
    result = []
    for group, params in out.items():
        if params:
            f = scaling.factors(group)
            result.append({"params": params, "lr": lr * f["lr"], "eps": eps * f["eps"],
                           "weight_decay": weight_decay * f["weight_decay"],
                           "layer_group": group})
    if not math.isfinite(sum(g["lr"] for g in result)):
        raise ProxyError(f"depth scaling {scaling} gave a non-finite learning rate")
    return result
