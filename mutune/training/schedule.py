"""Learning-rate schedules as a factor on each parameter group's own starting lr (``LambdaLR``).

warmup (t < W): (t + 1) / W (Goyal et al. 2017, §2.2); cosine: m + (1 − m)·½(1 + cos(π·u))
(Loshchilov & Hutter 2017); linear: m + (1 − m)·(1 − u); wsd: decay over the last D updates
(Hu et al. 2024, MiniCPM, §4.1); u = (t − W + 1)/(total − W), m = ``min_lr_ratio``."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["SCHEDULES", "lr_factor", "make_lr_schedule"]

SCHEDULES = ("constant", "cosine", "linear", "wsd")


def lr_factor(t: int, total: int, *, kind: str = "constant", warmup_steps: int = 0,
              min_lr_ratio: float = 0.0, decay_fraction: float = 0.2) -> float:
    """The factor for update ``t`` (0-based) of a ``total``-step run.

    Raises:
        ValueError: unknown kind; t outside [0, total); total < 1; warmup_steps < 0;
            min_lr_ratio outside [0, 1]; decay_fraction outside (0, 1]."""
    if kind not in SCHEDULES:
        raise ValueError(f"schedule {kind!r}: use one of {SCHEDULES}")
    if total < 1 or not 0 <= t < total:
        raise ValueError(f"update {t} of a {total}-step run: need 0 <= t < total")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps = {warmup_steps}: must be >= 0")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio = {min_lr_ratio}: must be in [0, 1]")
    if not 0.0 < decay_fraction <= 1.0:
        raise ValueError(f"decay_fraction = {decay_fraction}: must be in (0, 1]")
    if t < warmup_steps:
        return (t + 1) / warmup_steps
    m = min_lr_ratio
    if kind == "constant":
        return 1.0
    if kind == "wsd":
        decay = max(math.ceil(decay_fraction * total), 1)
        start = total - decay
        if t < start:
            return 1.0
        return m + (1.0 - m) * (1.0 - (t - start + 1) / decay)
    span = total - warmup_steps
    frac = (t - warmup_steps + 1) / span if span > 0 else 1.0
    if kind == "cosine":
        return m + (1.0 - m) * 0.5 * (1.0 + math.cos(math.pi * frac))
    return m + (1.0 - m) * (1.0 - frac)


class _Factor:
    """A picklable factor function of a schedule (LambdaLR keeps callables' state)."""

    def __init__(self, total: int, **settings: Any) -> None:
        self.total, self.settings = int(total), settings

    def __call__(self, t: int) -> float:
        return lr_factor(min(int(t), self.total - 1), self.total, **self.settings)


def make_lr_schedule(optimizer: Any, train: Any, total: int) -> Any:
    """``LambdaLR`` of ``train``'s schedule for a ``total``-step run; None for a constant lr."""
    kind = getattr(train, "lr_schedule", "constant")
    warmup = int(getattr(train, "warmup_steps", 0))
    fraction = getattr(train, "warmup_fraction", None)
    if fraction is not None:          # of this run's own steps
        warmup = int(round(float(fraction) * total))
    if kind == "constant" and warmup == 0:
        return None
    import torch

    factor = _Factor(total, kind=kind, warmup_steps=warmup,
                     min_lr_ratio=float(getattr(train, "min_lr_ratio", 0.0)),
                     decay_fraction=float(getattr(train, "decay_fraction", 0.2)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
