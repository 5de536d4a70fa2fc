"""Where the target's optimum lies when a knob transfers flat under μP: the per-width optima
pooled as estimates of one common optimum.

Under μP a knob's optimum keeps its place across widths (Yang et al. 2022, Tensor Programs V,
§3), so each proxy width's optimum y_i = log h*_i is an estimate of one value μ, with standard
error s_i read from its 95 % interval. What the widths disagree on beyond their own errors is
a between-width variance τ², estimated by DerSimonian & Laird (1986, Controlled Clinical
Trials 7, §2). The target is one more width: its optimum lies in μ̂ ± z·√(SE(μ̂)² + τ̂²) (the
plug-in predictive interval of a random-effects model; Higgins, Thompson & Spiegelhalter 2009,
JRSS A 172, §5). With few widths the plug-in τ̂² is itself uncertain and the interval is
optimistic about it; a slope the widths do resolve is not pooled at all (the rule's verdict is
then ``drifting`` and the power law extrapolates).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm

__all__ = ["PooledOptimum", "pool_optima"]


@dataclass(frozen=True)
class PooledOptimum:
    """The per-width optima pooled under μP, in the knob's natural units.

    Attributes:
        value: exp(μ̂), the random-effects mean of the log optima.
        interval: the predictive interval of one more width's optimum (the target's).
        standard_error: SE(μ̂), natural-log units.
        tau: τ̂, the between-width standard deviation, natural-log units (0: the widths agree
            within their own errors).
        n_widths: how many optima were pooled."""
    value: float
    interval: tuple[float, float]
    standard_error: float
    tau: float
    n_widths: int


def _log_estimates(optima: list[float], intervals: list[tuple[float, float]], z: float
                   ) -> tuple[list[float], list[float]]:
    ys, ses = [], []
    for i, (v, (lo, hi)) in enumerate(zip(optima, intervals)):
        if not all(math.isfinite(x) and x > 0 for x in (v, lo, hi)):
            raise ValueError(f"optimum {i}: {v} in [{lo}, {hi}]: all must be finite and > 0")
        if not lo <= v <= hi or hi <= lo:
            raise ValueError(f"optimum {i}: {v} must lie in its interval [{lo}, {hi}], "
                             "low < high")
        ys.append(math.log(v))
        ses.append((math.log(hi) - math.log(lo)) / (2 * z))
    return ys, ses


def pool_optima(optima: list[float], intervals: list[tuple[float, float]], *,
                level: float = 0.95) -> PooledOptimum:
    """Pool per-width optima (shape (k,), natural units) with their ``level`` intervals.

    Raises:
        ValueError: fewer than 2 optima, lengths that differ, a value or end that is not finite
            and > 0, an optimum outside its interval, a level outside (0, 1)."""
    if not 0 < level < 1:
        raise ValueError(f"level = {level}: must be in (0, 1)")
    if len(optima) != len(intervals):
        raise ValueError(f"{len(optima)} optima but {len(intervals)} intervals")
    if len(optima) < 2:
        raise ValueError(f"{len(optima)} optimum: pooling needs ≥ 2 widths")
    z = float(norm.ppf(0.5 + level / 2))
    ys, ses = _log_estimates(optima, intervals, z)
    w = [1 / s ** 2 for s in ses]
    fixed = sum(wi * yi for wi, yi in zip(w, ys)) / sum(w)
    q = sum(wi * (yi - fixed) ** 2 for wi, yi in zip(w, ys))
    denom = sum(w) - sum(wi ** 2 for wi in w) / sum(w)
    tau2 = max(0.0, (q - (len(ys) - 1)) / denom)
    w_re = [1 / (s ** 2 + tau2) for s in ses]
    mu = sum(wi * yi for wi, yi in zip(w_re, ys)) / sum(w_re)
    se = 1 / math.sqrt(sum(w_re))
    half = z * math.sqrt(se ** 2 + tau2)
    return PooledOptimum(math.exp(mu), (math.exp(mu - half), math.exp(mu + half)), se,
                         math.sqrt(tau2), len(ys))
