"""Published rules for what μP does not transfer: batch size, token horizon, weight decay."""
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

    - Adam/AdamW (and mup's MuAdam/MuAdamW): square-root rule η' = η·√(B'/B) (Malladi, Lyu,
      Panigrahi & Arora 2022, "On the SDEs and Scaling Rules for Adaptive Gradient
      Algorithms", NeurIPS, §4 / Definition 4.2 "square root scaling rule", which also scales
      1 − β and ε; only the learning rate is scaled here).
    - SGD (and MuSGD): linear rule η' = η·B'/B (Goyal et al. 2017, "Accurate, Large Minibatch
      SGD: Training ImageNet in 1 Hour", §2.1), valid below the critical batch size and with
      warm-up.
    """
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
    """The learning rate for a token horizon ``tokens_to`` given a good one at ``tokens_from``.

    LR*(D) ∝ D^(−β), so η' = η·(D'/D)^(−β) (Bjorck, Benhaim, Chaudhary, Wei & Song 2025,
    "Scaling Optimal LR Across Token Horizons", ICLR, §3: the optimal LR of a fixed model
    follows a power law in the training tokens D, fitted per model size on LLaMA-style models).
    """
    _positive(lr=lr, tokens_from=tokens_from, tokens_to=tokens_to)
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (
            math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta = {beta!r}: must be a finite number ≥ 0 (LR* ∝ D^-beta)")
    return lr * (tokens_to / tokens_from) ** (-beta)


@dataclass(frozen=True)
class AdamWTimescale:
    """The EMA timescale of AdamW's weights (Wang & Aitchison 2024)."""
    tau_iters: float
    tau_epochs: float


def adamw_timescale(lr: float, weight_decay: float, dataset_size: float,
                    batch_size: float) -> AdamWTimescale:
    """τ of AdamW: the weights are an EMA of the updates with τ_iter = 1/(η·λ) steps, i.e.
    τ_epoch = B/(η·λ·D) epochs (Wang & Aitchison 2024, "How to set AdamW's weight decay as you
    scale model and dataset size", §3, Eq. for τ_iter and τ_epoch)."""
    _positive(lr=lr, weight_decay=weight_decay, dataset_size=dataset_size,
              batch_size=batch_size)
    tau_iters = 1.0 / (lr * weight_decay)
    return AdamWTimescale(tau_iters, tau_iters * batch_size / dataset_size)


def adamw_weight_decay_for(*, lr: float, dataset_size: float | None = None,
                           batch_size: float | None = None, tau_epochs: float | None = None,
                           tau_iters: float | None = None) -> float:
    """The AdamW weight decay λ that keeps the timescale τ fixed at a new lr / data / batch.

    λ = B/(η·τ_epoch·D) from τ_epoch = B/(η·λ·D), or λ = 1/(η·τ_iter) from τ_iter = 1/(η·λ)
    (Wang & Aitchison 2024, §3–4: keep τ_epoch constant as model and dataset grow; they
    find the optimal τ_epoch roughly constant across scales). Give exactly one of
    ``tau_epochs`` (needs dataset_size and batch_size) and ``tau_iters``.
    """
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
