"""μP multilayer perceptron for classification (the MLP proxy family).

Yang et al. 2022, Tensor Programs V, Table 3; mup 1.0.0 ``examples/MLP``; residual blocks:
Yang et al. 2023, Tensor Programs VI, eq. 1."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mup
import torch
from torch import nn

from mutune.errors import ProxyError
from mutune.proxies.parametrization import (build_parametrized, check_count, check_positive,
                                            split_options)

__all__ = ["MLPShape", "MuMLP", "build_mlp"]


@dataclass(frozen=True)
class MLPShape:
    """A :class:`MuMLP`'s stack: ``depth`` hidden layers, plain or ``residual`` (Tensor
    Programs VI, eq. 1) with each branch multiplied by ``branch_mult``."""

    depth: int = 2
    residual: bool = False
    branch_mult: float = 1.0


def _kaiming_(weight: torch.Tensor) -> None:
    """He-normal, fan_in, a=1 (std 1/√fan_in); μP-aware once base shapes are set."""
    if hasattr(weight, "infshape"):
        mup.init.kaiming_normal_(weight, a=1, mode="fan_in")
    else:
        nn.init.kaiming_normal_(weight, a=1, mode="fan_in")


def _check_mlp(d_in: int, width: int, n_classes: int, s: MLPShape, dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ProxyError(f"dropout = {dropout}: must be in [0, 1)")
    for name, value in (("d_in", d_in), ("width", width), ("n_classes", n_classes),
                        ("depth", s.depth)):
        check_count(name, value)
    check_positive("branch_mult", s.branch_mult)
    if s.branch_mult != 1.0 and not s.residual:
        raise ProxyError(f"branch_mult = {s.branch_mult} needs residual=True (a plain "
                         "stack has no branches to scale)")


class MuMLP(nn.Module):
    """ReLU MLP ``d_in → width (× depth) → n_classes`` with a μP readout, optionally residual.

    Raises:
        ProxyError: a count < 1, a multiplier that is not a finite number > 0, a dropout
            outside [0, 1), or a ``branch_mult`` other than 1 without ``residual``."""

    def __init__(self, d_in: int, width: int, n_classes: int, shape: MLPShape | None = None, *,
                 input_mult: float = 1.0, output_mult: float = 1.0, init_std: float = 1.0,
                 dropout: float = 0.0):
        super().__init__()
        s = shape or MLPShape()
        _check_mlp(d_in, width, n_classes, s, dropout)
        for name, value in (("input_mult", input_mult), ("output_mult", output_mult),
                            ("init_std", init_std)):
            check_positive(name, value)
        self.d_in, self.width, self.n_classes, self.depth = d_in, width, n_classes, s.depth
        self.residual, self.branch_mult = s.residual, s.branch_mult
        self.input_mult, self.output_mult, self.init_std = input_mult, output_mult, init_std
        self.input = nn.Linear(d_in, width, bias=False)
        blocks = s.depth if s.residual else s.depth - 1
        self.hidden = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(blocks))
        self.readout = mup.MuReadout(width, n_classes, bias=False, output_mult=output_mult)
        # Identity at 0: the forward pass (and its RNG use) is exactly the dropout-free one
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.reset_parameters()

    @classmethod
    def from_options(cls, d_in: int, width: int, n_classes: int, **options: Any) -> MuMLP:
        """A MuMLP from flat keyword options: :class:`MLPShape`'s fields and the multipliers.

        Raises:
            ProxyError: as the constructor; TypeError: an option neither names."""
        shape, mults = split_options(MLPShape, options)
        return cls(d_in, width, n_classes, shape, **mults)

    def reset_parameters(self) -> None:
        """He-normal × init_std on input/hidden weights (input ÷ √input_mult); zero readout."""
        _kaiming_(self.input.weight)
        with torch.no_grad():
            self.input.weight.mul_(self.init_std / math.sqrt(self.input_mult))
        for layer in self.hidden:
            _kaiming_(layer.weight)
            with torch.no_grad():
                layer.weight.mul_(self.init_std)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (B, n_classes) for float inputs of shape (B, d_in)."""
        if x.dim() != 2 or x.shape[1] != self.d_in:
            raise ProxyError(f"MuMLP expects input of shape (B, {self.d_in}), got {tuple(x.shape)}")
        if self.residual:
            h = self.input(x) * math.sqrt(self.input_mult)
            for layer in self.hidden:
                h = h + self.branch_mult * layer(self.drop(torch.relu(h)))
            return self.readout(self.drop(torch.relu(h)))
        h = self.drop(torch.relu(self.input(x) * math.sqrt(self.input_mult)))
        for layer in self.hidden:
            h = self.drop(torch.relu(layer(h)))
        return self.readout(h)

    def depth_groups(self) -> dict[str, str]:
        """Parameter name → layer group (:mod:`mutune.proxies.depth`)."""
        return {name: ("embedding" if name.startswith("input.") else
                       "output" if name.startswith("readout.") else "hidden_weight")
                for name, _ in self.named_parameters()}


def build_mlp(width: int, *, d_in: int, n_classes: int, base_width: int, parametrization: str,
              base_shapes: str | None = None, **model: Any) -> nn.Module:
    """A :class:`MuMLP` ``d_in → width → n_classes`` in μP (base ``base_width``) or SP.

    Raises:
        ProxyError: as :class:`MuMLP` and :func:`build_parametrized`."""
    def factory(w: int) -> nn.Module:
        return MuMLP.from_options(d_in, w, n_classes, **model)

    return build_parametrized(factory, width, base_width, parametrization, base_shapes)
