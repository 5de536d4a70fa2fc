"""Checkpoint cadence and spot economics: τ* = √(2·C·M), floored at a minimum spacing.

C: checkpoint seconds, M: mean time between preemptions; overhead(T) = (T/τ)·C + (T/M)·(τ/2 + R).
Young 1974, CACM 17(9), eq. 4; Daly 2006, FGCS 22(3), §2."""
from __future__ import annotations

import math

__all__ = ["young_interval_s", "spot_overhead_s", "spot_economics"]


def _pos(name: str, v: float, *, zero_ok: bool = False) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0 or (x == 0 and not zero_ok):
        raise ValueError(f"{name} = {v!r}: must be a finite number {'>=' if zero_ok else '>'} 0")
    return x


def young_interval_s(checkpoint_s: float, mtbp_s: float, *, min_interval_s: float = 0.0
                     ) -> float:
    """Young's optimum checkpoint interval √(2·C·M), at least ``min_interval_s``; seconds.

    Raises:
        ValueError: C or M not > 0, or a negative minimum."""
    c, m = _pos("checkpoint_s", checkpoint_s), _pos("mtbp_s", mtbp_s)
    return max(math.sqrt(2.0 * c * m), _pos("min_interval_s", min_interval_s, zero_ok=True))


def spot_overhead_s(trial_s: float, *, checkpoint_s: float, mtbp_s: float,
                    restart_s: float, interval_s: float) -> float:
    """Expected extra seconds of a ``trial_s``-second trial on spot: checkpoints every
    ``interval_s`` plus, per expected preemption, half an interval lost and the restart.

    Raises:
        ValueError: a negative figure, or M or the interval not > 0."""
    t = _pos("trial_s", trial_s, zero_ok=True)
    c = _pos("checkpoint_s", checkpoint_s, zero_ok=True)
    m, tau = _pos("mtbp_s", mtbp_s), _pos("interval_s", interval_s)
    r = _pos("restart_s", restart_s, zero_ok=True)
    return (t / tau) * c + (t / m) * (tau / 2.0 + r)


def spot_economics(trial_s: float, *, checkpoint_s: float, restore_s: float, mtbp_s: float,
                   restart_s: float, min_interval_s: float, spot_price: float | None,
                   on_demand_price: float | None) -> dict[str, float | bool | str | None]:
    """Whether spot pays for trials of ``trial_s`` seconds: p_spot·(T + overhead(T)) <
    p_on_demand·T.

    Raises:
        ValueError: as :func:`young_interval_s` and :func:`spot_overhead_s`."""
    c = max(_pos("checkpoint_s", checkpoint_s, zero_ok=True), 1e-6)
    tau = young_interval_s(c, mtbp_s, min_interval_s=min_interval_s)
    r = _pos("restart_s", restart_s, zero_ok=True) + _pos("restore_s", restore_s, zero_ok=True)
    t = _pos("trial_s", trial_s, zero_ok=True)
    over = spot_overhead_s(t, checkpoint_s=c, mtbp_s=mtbp_s, restart_s=r, interval_s=tau)
    frac = over / t if t > 0 else 0.0
    eff = None if spot_price is None else spot_price * (1.0 + frac)
    pays = None if eff is None or on_demand_price is None else eff < on_demand_price
    return {"mtbp_s": float(mtbp_s), "checkpoint_s": c, "interval_s": tau,
            "expected_preemptions_per_trial": t / float(mtbp_s),
            "expected_lost_s_per_hard_preemption": tau / 2.0,
            "recovery_s_per_preemption": r, "trial_s": t, "overhead_fraction": frac,
            "spot_effective_price": eff, "on_demand_price": on_demand_price,
            "spot_pays": pays,
            "formula": "τ = max(√(2·C·M), min interval) (Young 1974); overhead = (T/τ)·C + "
                       "(T/M)·(τ/2 + R); spot pays iff p_spot·(1 + overhead/T) < p_on_demand"}
