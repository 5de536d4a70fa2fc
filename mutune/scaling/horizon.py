"""Short-horizon bias: log lr*(T) = c + d·log T across rungs, extrapolated to the target's steps.

Wu et al. 2018, "Understanding Short-Horizon Bias in Stochastic Meta-Optimization", ICLR, §3–4;
Bjorck et al. 2025, "Scaling Optimal LR Across Token Horizons", ICLR, §3 (LR*(D) ∝ D^-β)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mutune.errors import FitError
from mutune.scaling.rules import TransferRule, fit_transfer_rule

__all__ = ["HorizonFit", "fit_horizon"]


@dataclass(frozen=True)
class HorizonFit:
    """log lr*(T) = intercept + exponent·log T across rungs, extrapolated to ``target_steps``."""
    intercept: float
    exponent: float
    exponent_interval: tuple[float, float]
    steps: tuple[float, ...]
    optima_log_lr: tuple[float, ...]
    highest_rung_steps: float
    highest_rung_log_lr: float
    target_steps: float
    extrapolated_log_lr: float
    extrapolated_interval: tuple[float, float]
    rule: TransferRule

    @property
    def highest_rung_lr(self) -> float:
        """The highest rung's optimum, natural units."""
        return math.exp(self.highest_rung_log_lr)

    @property
    def extrapolated_lr(self) -> float:
        """The extrapolated optimum at ``target_steps``, natural units."""
        return math.exp(self.extrapolated_log_lr)


def fit_horizon(steps: Sequence[float], optima_log_lr: Sequence[float], *, target_steps: float,
                intervals: Sequence[tuple[float, float]] | None = None, n_boot: int = 1000,
                seed: int = 0) -> HorizonFit:
    """Fit log lr*(T) = c + d·log T to per-rung optima and extrapolate to ``target_steps``.

    Raises:
        FitError: fewer than 2 distinct rungs, shapes differ, a non-finite optimum or
            interval, non-positive steps.
        ValueError: target_steps not a finite number > 0."""
    T = np.asarray(steps, dtype=float)
    y = np.asarray(optima_log_lr, dtype=float)
    if T.ndim != 1 or T.shape != y.shape:
        raise FitError(f"steps shape {T.shape} and optima_log_lr shape {y.shape} must be "
                       "equal 1-D")
    if len(np.unique(T[np.isfinite(T)])) < 2:
        raise FitError(f"short-horizon fit needs at least 2 rungs with distinct steps, got "
                       f"{T.tolist()}: use the highest rung's optimum instead")
    if not np.all(np.isfinite(y)):
        raise FitError(f"optima_log_lr {y.tolist()} must all be finite")
    if not (isinstance(target_steps, (int, float, np.integer, np.floating))
            and math.isfinite(target_steps) and target_steps > 0):
        raise ValueError(f"target_steps = {target_steps}: must be a finite number > 0")
    natural_iv = None
    if intervals is not None:
        iv = np.asarray(intervals, dtype=float)
        if iv.shape != (T.size, 2) or not np.all(np.isfinite(iv)):
            raise FitError(f"intervals {iv.tolist()} must be finite, shape ({T.size}, 2)")
        natural_iv = np.exp(iv)
    rule = fit_transfer_rule("lr", T, np.exp(y), optima_intervals=natural_iv, n_boot=n_boot,
                             seed=seed)
    top = int(np.argmax(T))
    ext = math.log(rule.predict(float(target_steps)))
    lo, hi = rule.prediction_interval(float(target_steps))
    ext_iv = (math.log(lo), math.log(hi)) if lo > 0 else (math.nan, math.nan)
    return HorizonFit(rule.intercept, rule.slope, rule.slope_interval,
                      tuple(float(v) for v in T), tuple(float(v) for v in y), float(T[top]),
                      float(y[top]), float(target_steps), ext, ext_iv, rule)
