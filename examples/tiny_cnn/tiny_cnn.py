"""A user's own model family for mutune: a small convolutional network on 8×8 images.

Not one of mutune's built-ins. It is registered as the plugin ``tiny_cnn`` (entry-point group
``mutune.models``, see ``pyproject.toml``); a sweep config then says ``model: {family:
tiny_cnn, …}``. mutune builds the base and delta models, sets the μP base shapes, builds the μP
optimizer (MuAdamW), runs the ASHA sweeps, transfers the hyperparameters, trains the target
width once, and records everything.

The width is the number of channels of every convolution; ``depth`` is the number of 3×3
convolutions. The output layer is ``mup.MuReadout`` (zero-initialised, TP V Table 3) on the
flattened feature map (width × 64 features: its fan-in grows with width). An earlier version
averaged the map over positions first, which left 8 numbers per image at the base width: its
proxies stayed at chance (2.30 nats) in 27 steps; the flattened map reaches about 0.25.
"""
from __future__ import annotations

import math
from typing import Literal

import mup
import torch
from pydantic import Field
from torch import nn

from mutune.config import ModelSpec
from mutune import ModelFamily

__all__ = ["TinyCNN", "TinyCNNModel", "build", "flops_per_sample", "FAMILY"]


class TinyCNNModel(ModelSpec):
    """The config's ``model`` section for ``family: tiny_cnn``."""
    family: Literal["tiny_cnn"]
    base_width: int = Field(default=8, ge=1)
    depth: int = Field(default=2, ge=1, le=8)
    kernel_size: int = Field(default=3, ge=1, le=7)


class TinyCNN(nn.Module):
    """``depth`` × (conv k×k, ReLU) at ``width`` channels → flatten → MuReadout.

    Input: (B, d_in) flattened square images (digits: d_in = 64, 8×8); output (B, n_classes).
    """

    def __init__(self, width: int, *, depth: int, kernel_size: int, d_in: int, n_classes: int,
                 output_mult: float = 1.0, init_std: float = 1.0) -> None:
        super().__init__()
        self.side = math.isqrt(d_in)
        if self.side * self.side != d_in:
            raise ValueError(f"d_in = {d_in} is not a square image")
        self.init_std = init_std
        pad = kernel_size // 2
        self.convs = nn.ModuleList(
            nn.Conv2d(1 if i == 0 else width, width, kernel_size, padding=pad, bias=False)
            for i in range(depth))
        self.readout = mup.MuReadout(width * d_in, n_classes, bias=False,
                                     output_mult=output_mult)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """He-normal (fan_in) × init_std on the convolutions, zero readout; ``mup.init`` once
        mutune has set the base shapes (it calls this again then)."""
        for conv in self.convs:
            init = mup.init.kaiming_normal_ if hasattr(conv.weight, "infshape") else \
                nn.init.kaiming_normal_
            init(conv.weight, a=1, mode="fan_in")
            with torch.no_grad():
                conv.weight.mul_(self.init_std)
        nn.init.zeros_(self.readout.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.view(-1, 1, self.side, self.side)
        for conv in self.convs:
            h = torch.relu(conv(h))
        return self.readout(h.flatten(1))


def build(width: int, *, depth: int, kernel_size: int, d_in: int, n_classes: int,
          output_mult: float = 1.0, init_std: float = 1.0) -> nn.Module:
    """The factory mutune calls: a :class:`TinyCNN` with ``width`` channels."""
    return TinyCNN(width, depth=depth, kernel_size=kernel_size, d_in=d_in,
                   n_classes=n_classes, output_mult=output_mult, init_std=init_std)


def flops_per_sample(width: int, n_params: float, spec: TinyCNNModel) -> float:
    """Training FLOPs per digits image (8×8, 10 classes): 6 per weight per use (Kaplan et al.
    2020 §2.1) — every convolution weight is used at each of the 64 positions (padding keeps
    the size), the readout's (width × 64 inputs) once."""
    readout = width * 64 * 10
    return 6.0 * ((n_params - readout) * 64 + readout)


#: The plugin object the entry point names.
FAMILY = ModelFamily(name="tiny_cnn", spec=TinyCNNModel, build=build, data_kinds=("digits",),
                     hparams=("output_mult", "init_std"), flops_per_sample=flops_per_sample)
