"""μP multilayer perceptron for classification (the MLP proxy family).

Yang et al. 2022, Tensor Programs V, Table 3; mup 1.0.0 ``examples/MLP``; residual blocks:
Yang et al. 2023, Tensor Programs VI, eq. 1."""
from __future__ import annotations

import math
from typing import Any

import mup
import torch
from torch import nn

from mutune.errors import ProxyError
from mutune.proxies.parametrization import build_parametrized, check_count, check_positive

__all__ = ["MuMLP", "build_mlp"]


def _kaiming_(weight: torch.Tensor) -> None:
    """He-normal, fan_in, a=1 (std 1/√fan_in); μP-aware once base shapes are set."""
    if hasattr(weight, "infshape"):
        mup.init.kaiming_normal_(weight, a=1, mode="fan_in")
    else:
        nn.init.kaiming_normal_(weight, a=1, mode="fan_in")


class MuMLP(nn.Module):
    """ReLU MLP ``d_in → width (× depth) → n_classes`` with a μP readout, optionally residual.

    Raises:
        ProxyError: a count < 1, a multiplier that is not a finite number > 0, a dropout
            outside [0, 1), or a ``branch_mult`` other than 1 without ``residual``."""

    def __init__(self, d_in: int, width: int, n_classes: int, *, depth: int = 2,
                 input_mult: float = 1.0, output_mult: float = 1.0, init_std: float = 1.0,
                 dropout: float = 0.0, residual: bool = False, branch_mult: float = 1.0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ProxyError(f"dropout = {dropout}: must be in [0, 1)")
        check_count("d_in", d_in)
        check_count("width", width)
        check_count("n_classes", n_classes)
        check_count("depth", depth)
        for name, value in (("input_mult", input_mult), ("output_mult", output_mult),
                            ("init_std", init_std), ("branch_mult", branch_mult)):
            check_positive(name, value)
        if branch_mult != 1.0 and not residual:
            raise ProxyError(f"branch_mult = {branch_mult} needs residual=True (a plain "
                             "stack has no branches to scale)")
        self.d_in, self.width, self.n_classes, self.depth = d_in, width, n_classes, depth
        self.residual, self.branch_mult = residual, branch_mult
        self.input_mult, self.output_mult, self.init_std = input_mult, output_mult, init_std
        self.input = nn.Linear(d_in, width, bias=False)
        blocks = depth if residual else depth - 1
        self.hidden = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(blocks))
        self.readout = mup.MuReadout(width, n_classes, bias=False, output_mult=output_mult)
        # Identity at 0: the forward pass (and its RNG use) is exactly the dropout-free one
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.reset_parameters()

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
        return MuMLP(d_in, w, n_classes, **model)

    return build_parametrized(factory, width, base_width, parametrization, base_shapes)
