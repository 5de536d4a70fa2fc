"""The loss a transferred value's uncertainty puts at stake, read from a proxy's loss surface.

Under μP the loss basin in log h keeps its place and shape across widths (Yang et al. 2022,
Tensor Programs V, §3, Fig. 1), so a proxy's fitted quadratic prices a miss at the target:
missing the optimum by δ natural-log units costs ΔL = ½·c·δ² (c = ∂²L/∂(log h)² along the
knob, the other knobs at their optima; Box & Wilson 1951, JRSS B, §3). The miss at stake is the
farthest end of the interval the target's optimum may lie in, seen from the transferred value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LossAtStake", "loss_at_stake", "share_percent"]


def share_percent(x: float) -> str:
    """A share as a percentage: two significant digits below 10 %, whole percents above
    (``0.21 %``, ``8.7 %``, ``300 %``)."""
    p = 100 * x
    return f"{p:.2g} %" if abs(p) < 10 else f"{p:.0f} %"


@dataclass(frozen=True)
class LossAtStake:
    """What one rule's uncertainty could cost at the target.

    Attributes:
        absolute: ½·c·δ², in the metric's units (nats for a loss).
        relative: ``absolute`` / ``loss``, a share of the loss.
        log_distance: δ, natural-log units between the transferred value and the interval's
            farthest end.
        curvature: c, metric units per (natural-log unit)².
        loss: the surface's fitted loss at its optimum.
        source: which proxy's surface, and why that one."""
    hyperparameter: str
    absolute: float
    relative: float
    log_distance: float
    curvature: float
    loss: float
    source: str

    def describe(self) -> str:
        """The stake in words: its share of the loss, its absolute size, the miss, the source."""
        return (f"{share_percent(self.relative)} of the loss ({self.absolute:.2g}) for a miss of "
                f"×{math.exp(self.log_distance):.3g} ({self.source})")


def loss_at_stake(hyperparameter: str, value: float, interval: tuple[float, float], *,
                  curvature: float, loss: float, source: str) -> LossAtStake:
    """The loss at stake when ``value`` is transferred and the target's optimum lies in
    ``interval`` (both in the knob's natural units, > 0).

    Raises:
        ValueError: a value or interval end that is not finite and > 0, lo > hi, a curvature
            that is not finite and > 0, a loss that is not finite and > 0."""
    lo, hi = interval
    for what, x in (("value", value), ("interval low", lo), ("interval high", hi)):
        if not (math.isfinite(x) and x > 0):
            raise ValueError(f"{hyperparameter}: {what} = {x}: must be a finite number > 0")
    if lo > hi:
        raise ValueError(f"{hyperparameter}: interval [{lo}, {hi}] has low > high")
    if not (math.isfinite(curvature) and curvature > 0):
        raise ValueError(f"{hyperparameter}: curvature = {curvature}: must be finite and > 0")
    if not (math.isfinite(loss) and loss > 0):
        raise ValueError(f"{hyperparameter}: loss = {loss}: must be a finite number > 0")
    delta = max(abs(math.log(value) - math.log(lo)), abs(math.log(hi) - math.log(value)))
    absolute = 0.5 * curvature * delta ** 2
    return LossAtStake(hyperparameter, absolute, absolute / loss, delta, curvature, loss,
                       source)
