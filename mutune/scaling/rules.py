"""Transfer rules: how an optimal hyperparameter moves with scale.

A transfer rule is the power law h*(w) = exp(a) · w^b, fitted as log h*(w) = a + b·log w by least
squares on the per-width optima (Yang et al. 2022, "Tensor Programs V", §3 and Figure 1: under μP
the learning-rate optimum is width-independent, so b ≈ 0; under standard parametrization b < 0).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mutune.errors import FitError

__all__ = ["TransferRule", "fit_transfer_rule"]


@dataclass(frozen=True)
class TransferRule:
    """log h*(s) = intercept + slope·log s, in natural logs.

    Attributes:
        hyperparameter: name of the hyperparameter (e.g. ``"lr"``).
        intercept: a, in log units of the hyperparameter.
        slope: b, the exponent of the scale (dimensionless).
        scales: the proxy scales used (e.g. widths), shape (n,).
        optima: the per-scale optima used, shape (n,), in the hyperparameter's unit.
    """
    hyperparameter: str
    intercept: float
    slope: float
    scales: tuple[float, ...]
    optima: tuple[float, ...]

    def predict(self, scale: float) -> float:
        """h*(scale) = exp(a + b·log scale), in the hyperparameter's unit.

        Raises:
            FitError: scale is not a finite positive number.
        """
        if not (math.isfinite(scale) and scale > 0):
            raise FitError(f"scale = {scale}: must be a finite number > 0")
        return math.exp(self.intercept + self.slope * math.log(scale))

    @property
    def formula(self) -> str:
        """The fitted rule as text, e.g. ``log lr*(w) = -6.21 + -0.012·log w``."""
        return (f"log {self.hyperparameter}*(w) = {self.intercept:.4g} + "
                f"{self.slope:.4g}·log w")


def fit_transfer_rule(hyperparameter: str, scales: Sequence[float],
                      optima: Sequence[float]) -> TransferRule:
    """Fit log h*(s) = a + b·log s by ordinary least squares on (log s, log h*).

    Args:
        hyperparameter: the name the rule is for.
        scales: proxy scales (widths), shape (n_sizes,), positive.
        optima: optimal value per scale, shape (n_sizes,), positive, same unit as the
            hyperparameter (e.g. learning rate per step).
    Returns:
        The fitted :class:`TransferRule`.
    Raises:
        FitError: shapes differ, fewer than 2 distinct scales, or a non-finite or non-positive
            scale or optimum (names which).
    References:
        Yang et al. 2022, Tensor Programs V (arXiv 2203.03466), §3 (μP makes b ≈ 0 for lr).
    """
    s = np.asarray(scales, dtype=float)
    h = np.asarray(optima, dtype=float)
    if s.shape != h.shape or s.ndim != 1:
        raise FitError(f"scales shape {s.shape} and optima shape {h.shape} must be equal 1-D")
    for name, arr in (("scale", s), ("optimum", h)):
        bad = [float(v) for v in arr if not (math.isfinite(v) and v > 0)]
        if bad:
            raise FitError(f"{hyperparameter}: {name} values {bad} must be finite and > 0")
    if len(np.unique(s)) < 2:
        raise FitError(f"{hyperparameter}: need at least 2 distinct scales, got "
                       f"{sorted(set(s.tolist()))}")
    x, y = np.log(s), np.log(h)
    slope, intercept = np.polyfit(x, y, 1)
    return TransferRule(hyperparameter, float(intercept), float(slope),
                        tuple(float(v) for v in s), tuple(float(v) for v in h))
