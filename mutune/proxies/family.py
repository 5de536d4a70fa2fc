"""A model family: what a model plugin gives mutune (entry-point group ``mutune.models``,
:mod:`mutune.proxies.plugins`); public as ``mutune.ModelFamily``."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelFamily"]


@dataclass(frozen=True)
class ModelFamily:
    """What a model plugin gives mutune; mutune does the rest (base shapes, optimizer, reports).

    Attributes:
        spec: pydantic model of the config's ``model`` section (``family: Literal[name]``).
        build: ``build(width, *, depth, **options, **data_shape, **hparams) -> nn.Module``.
        readout: attribute path of a plain ``nn.Linear`` output to swap for a ``MuReadout``.
        attention_scale: attribute holding the attention-logit scale (next to ``head_dim``).
        forward_loss: optional ``forward_loss(model, x, y) -> loss`` (nats).
        batch: optional pure ``batch(data, batch_size, seed, step) -> (x, y)``.
        flops_per_sample: optional ``(width, n_params, spec) -> float``; default 6·N (Kaplan
            et al. 2020, §2.1).
        norm_gains_checked: the family's transfer across width has been measured with its
            trainable norm gains (the built-in GPT's: its transfer check and ground truth,
            docs/transfer.md §7), so the pre-flight does not warn about them (Lingle 2024)."""
    name: str
    spec: type
    build: Callable[..., Any]
    data_kinds: tuple[str, ...] = ("digits",)
    hparams: tuple[str, ...] = ("input_mult", "output_mult", "init_std")
    readout: str | None = None
    attention_scale: str | None = None
    forward_loss: Callable[..., Any] | None = None
    batch: Callable[..., Any] | None = None
    flops_per_sample: Callable[..., float] | None = None
    norm_gains_checked: bool = False
