"""Published closed-form rules for what μP does not transfer: batch, token horizon, weight decay."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["scale_lr_for_batch", "scale_lr_for_tokens", "AdamWTimescale", "adamw_timescale",
           "adamw_weight_decay_for"]

_ADAPTIVE = ("adam", "adamw", "muadam", "muadamw")
_SGD = ("sgd", "musgd")


def _positive(**kwargs: float) -> None:
    for name, v in kwargs.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (
                math.isfinite(v) and v > 0):
            raise ValueError(f"{name} = {v!r}: must be a finite number > 0")


def scale_lr_for_batch(lr: float, batch_from: int, batch_to: int, optimizer: str) -> float:
    """The learning rate for batch size ``batch_to`` given a good one at ``batch_from``.

    Adam/AdamW: η' = η·√(B'/B) (Malladi et al. 2022, NeurIPS, Definition 4.2); SGD: η' = η·B'/B
    (Goyal et al. 2017, §2.1).

    Raises:
        ValueError: a non-positive or non-finite input, or an optimizer without a rule."""
    _positive(lr=lr, batch_from=batch_from, batch_to=batch_to)
    opt = optimizer.lower()
    ratio = batch_to / batch_from
    if opt in _ADAPTIVE:
        return lr * math.sqrt(ratio)
    if opt in _SGD:
        return lr * ratio
    raise ValueError(f"optimizer = {optimizer!r}: no batch-size rule; known: "
                     f"{list(_ADAPTIVE + _SGD)}")


def scale_lr_for_tokens(lr: float, tokens_from: float, tokens_to: float, *, beta: float) -> float:
    """η' = η·(D'/D)^(−β) for training tokens D (Bjorck et al. 2025, ICLR, §3).

    ``beta`` has no default: it is fitted per setting (e.g. −d of
    :func:`mutune.scaling.horizon.fit_horizon`).

    Raises:
        ValueError: a non-positive input, or β negative / not finite."""
    _positive(lr=lr, tokens_from=tokens_from, tokens_to=tokens_to)
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (
            math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta = {beta!r}: must be a finite number ≥ 0 (LR* ∝ D^-beta)")
    return lr * (tokens_to / tokens_from) ** (-beta)


@dataclass(frozen=True)
class AdamWTimescale:
    """τ_iter = 1/(η·λ) steps and τ_epoch = B/(η·λ·D) epochs (Wang & Aitchison 2024, §3)."""
    tau_iters: float
    tau_epochs: float


def adamw_timescale(lr: float, weight_decay: float, dataset_size: float,
                    batch_size: float) -> AdamWTimescale:
    """τ of AdamW's weight EMA (Wang & Aitchison 2024, §3); lr is η after μP's per-group scaling.

    Raises:
        ValueError: a non-positive or non-finite input."""
    _positive(lr=lr, weight_decay=weight_decay, dataset_size=dataset_size,
              batch_size=batch_size)
    tau_iters = 1.0 / (lr * weight_decay)
    return AdamWTimescale(tau_iters, tau_iters * batch_size / dataset_size)


def adamw_weight_decay_for(*, lr: float, dataset_size: float | None = None,
                           batch_size: float | None = None, tau_epochs: float | None = None,
                           tau_iters: float | None = None) -> float:
    """λ = B/(η·τ_epoch·D), or 1/(η·τ_iter): keeps τ fixed (Wang & Aitchison 2024, §3–4).

    Raises:
        ValueError: both or neither τ given, a needed input missing, or a non-positive input."""
    if (tau_epochs is None) == (tau_iters is None):
        raise ValueError(f"tau_epochs = {tau_epochs!r}, tau_iters = {tau_iters!r}: give "
                         "exactly one")
    if tau_iters is not None:
        _positive(lr=lr, tau_iters=tau_iters)
        return 1.0 / (lr * tau_iters)
    if tau_epochs is None or dataset_size is None or batch_size is None:
        raise ValueError(f"dataset_size = {dataset_size!r}, batch_size = {batch_size!r}: both "
                         "are needed with tau_epochs (λ = B/(η·τ·D))")
    _positive(lr=lr, dataset_size=dataset_size, batch_size=batch_size, tau_epochs=tau_epochs)
    return batch_size / (lr * tau_epochs * dataset_size)
