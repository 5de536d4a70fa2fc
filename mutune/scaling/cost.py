"""Cost arithmetic: GPU-hours, ETTR and the naive full-size counterfactual (wall seconds)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["gpu_hours", "ettr", "NaiveEstimate", "naive_sweep_estimate"]


def _nonneg(name: str, v: float) -> float:
    v = float(v)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} = {v}: must be a finite number >= 0")
    return v


def gpu_hours(allocated_s: float, devices: float) -> float:
    """GPU-hours = allocated seconds × devices granted / 3600 (docs/architecture.md §6).

    Raises:
        ValueError: a negative or non-finite argument."""
    return _nonneg("allocated_s", allocated_s) * _nonneg("devices", devices) / 3600.0


def ettr(productive_s: float, allocated_s: float) -> float | None:
    """ETTR = productive step seconds / allocated seconds; None when nothing was allocated.

    Kokolis et al. 2024, "Revisiting Reliability in Large-Scale ML Research Clusters", §3.

    Raises:
        ValueError: a negative or non-finite argument."""
    p, a = _nonneg("productive_s", productive_s), _nonneg("allocated_s", allocated_s)
    return None if a == 0 else p / a


@dataclass(frozen=True)
class NaiveEstimate:
    """A counterfactual sweep's cost: ``gpu_hours`` with the ``formula`` that produced it and
    its ``inputs`` (seconds, counts), for the report to show."""
    gpu_hours: float
    seconds: float
    formula: str
    inputs: dict[str, float] = field(default_factory=dict)


def naive_sweep_estimate(trial_steps: Sequence[int], trial_evals: Sequence[int], *,
                         s_per_step: float, s_per_eval: float, overhead_s_per_trial: float,
                         devices: float) -> NaiveEstimate:
    """Price the sweep at target size: devices/3600 · Σ_i (steps_i·s_step + evals_i·s_eval + o).

    s_step, s_eval: the target's measured seconds per step and per evaluation; o: per-trial
    overhead (start-up, data, teardown).

    Raises:
        ValueError: lengths differ, or a negative/non-finite input."""
    if len(trial_steps) != len(trial_evals):
        raise ValueError(f"trial_steps ({len(trial_steps)}) and trial_evals "
                         f"({len(trial_evals)}) must have equal length")
    s_step = _nonneg("s_per_step", s_per_step)
    s_eval = _nonneg("s_per_eval", s_per_eval)
    o = _nonneg("overhead_s_per_trial", overhead_s_per_trial)
    d = _nonneg("devices", devices)
    steps = sum(int(_nonneg("steps", t)) for t in trial_steps)
    evals = sum(int(_nonneg("evals", e)) for e in trial_evals)
    n = len(trial_steps)
    seconds = steps * s_step + evals * s_eval + n * o
    formula = (f"devices/3600 × (Σ steps × s_step + Σ evals × s_eval + n × overhead) = "
               f"{d:g}/3600 × ({steps} × {s_step:.4g} s + {evals} × {s_eval:.4g} s + "
               f"{n} × {o:.4g} s) = {seconds * d / 3600:.4g} GPU-h")
    return NaiveEstimate(seconds * d / 3600.0, seconds, formula,
                         {"trials": n, "steps": steps, "evals": evals, "s_per_step": s_step,
                          "s_per_eval": s_eval, "overhead_s_per_trial": o, "devices": d})
