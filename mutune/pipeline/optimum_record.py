"""A width's optimum as the stages hand it on and the store keeps it (docs/transfer.md §2)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WidthOptimum", "surface_fields"]

#: fields every recorded optimum carries (the others only when set)
_ALWAYS = ("milestone", "optimum_horizon", "method", "optimum", "n_trials", "trial_ids",
           "interval", "on_edge", "edge_side", "fallback_reason", "horizon", "choices")


def surface_fields(opt: Any) -> dict[str, Any]:
    """``curvature`` and ``fitted_loss`` of a :class:`mutune.scaling.Optimum`, nan as None."""
    def finite(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None
    return {"curvature": {n: finite(c) for n, c in opt.curvature.items()},
            "fitted_loss": finite(opt.fitted_value)}


@dataclass(frozen=True)
class WidthOptimum:
    """One proxy's optimum of every searched hyperparameter, at a rung or at ``max_t``.

    Values are in each hyperparameter's unit (a categorical knob holds its name); intervals
    are the bootstrap's, per hyperparameter (None where none was fitted).
    """
    milestone: int                       # steps the values were fitted at
    optimum_horizon: str                 # "rung m of max_t T", or "max_t"
    method: str                          # estimate_optimum's method, or "best-trial"
    optimum: dict[str, Any]
    n_trials: int
    trial_ids: list[int]
    interval: dict[str, list[float] | None]
    on_edge: dict[str, bool]
    edge_side: dict[str, str | None]     # "low", "high" or None
    fallback_reason: str | None = None   # why the quadratic was not used
    horizon: dict[str, Any] | None = None            # the lr's fit across rungs
    choices: dict[str, Any] = field(default_factory=dict)   # categorical knobs' evidence
    # the refit at max_t on the confirmation designs (mutune.pipeline.full_horizon)
    n_points: int | None = None          # distinct configurations
    n_seeds: int | None = None
    clipped: dict[str, bool] | None = None
    stationary: dict[str, float] | None = None
    searched_range: dict[str, list[float]] | None = None
    best_val_loss: float | None = None
    best_test_loss: float | None = None
    best_config: dict[str, Any] | None = None
    best_seeds: int | None = None
    best_trial_id: int | None = None
    sweep_best: dict[str, Any] | None = None        # the sweep's own best, before the refit
    full_horizon_error: str | None = None            # why the refit failed (kept: the rung's)
    aligned_from: int | None = None                  # the rung before the common-rung refit
    # a width without a design: its rung optimum moved to max_t by a designed width's shift
    # (mutune.pipeline.horizon_shift); "error" where it could not be moved
    horizon_shift: dict[str, Any] | None = None
    # the quadratic's loss surface (mutune.scaling.Optimum): ∂²loss/∂(log h)² per knob, and its
    # loss at the optimum; None where no quadratic was fitted
    curvature: dict[str, float | None] | None = None
    fitted_loss: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The record the store keeps: every field in :data:`_ALWAYS`, the others when set."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name in _ALWAYS or getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WidthOptimum:
        """An optimum as recorded (older records lack the newer keys: their defaults)."""
        names = {f.name for f in dataclasses.fields(cls)}
        base: dict[str, Any] = {"milestone": 0, "optimum_horizon": "", "method": "",
                                "n_trials": 0, "trial_ids": [], "interval": {}, "on_edge": {},
                                "edge_side": {}}
        return cls(**{**base, **{k: v for k, v in data.items() if k in names}})
