"""Where each allocated device-second went: per-trial time categories and per-sweep waste.

ETTR = productive / allocated (Kokolis et al. 2024, §3); MFU = achieved ÷ peak model FLOP/s
(Chowdhery et al. 2022, "PaLM", Appendix B)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["TIME_CATEGORIES", "WASTE_CATEGORIES", "TrialTime", "trial_time", "SweepWaste",
           "sweep_waste", "model_flops_per_step", "mfu", "money"]

#: Per-trial categories, in the order they are taken out of the allocated seconds.
TIME_CATEGORIES = ("productive", "eval", "checkpoint", "setup", "recovery", "other")
#: Waste categories of a sweep (report.json ``cost.waste_gpu_hours``).
WASTE_CATEGORIES = ("early_stopped", "failed", "diverged", "recovery", "idle")
STOPPED = frozenset({"stopped"})
FAILED = frozenset({"failed", "zombie", "stale", "cancelled"})


def _nonneg(name: str, v: object) -> float:
    x = float(v)  # type: ignore[arg-type]
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{name} = {v!r}: must be a finite number >= 0")
    return x


@dataclass(frozen=True)
class TrialTime:
    """One trial's allocated seconds by category (:data:`TIME_CATEGORIES`)."""
    allocated_s: float
    seconds: dict[str, float]
    clock_skew_s: float

    def gpu_hours(self, devices: float) -> dict[str, float]:
        """Each category in GPU-hours for ``devices`` devices granted."""
        return {k: v * devices / 3600.0 for k, v in self.seconds.items()}


def trial_time(timing: Mapping[str, float]) -> TrialTime:
    """Split a trial's allocated seconds into :data:`TIME_CATEGORIES`.

    Raises:
        ValueError: a negative or non-finite figure (names it)."""
    alloc = _nonneg("allocated_s", timing.get("allocated_s", 0.0))
    parts = {k: _nonneg(f"{k}_s", timing.get(f"{k}_s", 0.0)) for k in TIME_CATEGORIES[:-1]}
    used = sum(parts.values())
    skew = max(used - alloc, 0.0)
    alloc = max(alloc, used)
    return TrialTime(alloc, {**parts, "other": alloc - used}, skew)


@dataclass(frozen=True)
class SweepWaste:
    """A sweep's allocated device-seconds, split into ``useful`` and :data:`WASTE_CATEGORIES`
    (``useful_s`` + Σ ``waste_s`` = ``allocated_s`` exactly); device-seconds, i.e. seconds ×
    devices."""
    allocated_s: float
    useful_s: float
    waste_s: dict[str, float]

    @property
    def waste_gpu_hours(self) -> dict[str, float]:
        """Each waste category in GPU-hours."""
        return {k: v / 3600.0 for k, v in self.waste_s.items()}


def sweep_waste(trials: Sequence[tuple[str, Mapping[str, float], float]], *,
                held_device_s: float | None = None) -> SweepWaste:
    """Split a sweep's allocated device-seconds into useful work and the waste categories.

    Raises:
        ValueError: an unknown status, negative devices, or held_device_s below the trials'
            sum by more than 1 % (the wall clock cannot be shorter than what ran inside it)."""
    waste = dict.fromkeys(WASTE_CATEGORIES, 0.0)
    total = useful = 0.0
    for status, timing, devices in trials:
        d = _nonneg("devices", devices)
        t = trial_time(timing)
        s = {k: v * d for k, v in t.seconds.items()}
        alloc = t.allocated_s * d
        total += alloc
        waste["recovery"] += s["recovery"]
        if status in STOPPED:
            waste["early_stopped"] += alloc - s["recovery"]
        elif status == "diverged":
            waste["diverged"] += alloc - s["recovery"]
        elif status in FAILED:
            waste["failed"] += alloc - s["recovery"]
        elif status == "completed":
            waste["idle"] += s["other"]
            useful += alloc - s["recovery"] - s["other"]
        else:
            raise ValueError(f"status = {status!r}: must be completed, stopped, diverged or "
                             f"one of {sorted(FAILED)}")
    held = total if held_device_s is None else _nonneg("held_device_s", held_device_s)
    if held < total * 0.99 - 1e-9:
        raise ValueError(f"held_device_s = {held:.6g} is below the trials' allocated "
                         f"device-seconds {total:.6g}")
    held = max(held, total)
    waste["idle"] += held - total
    return SweepWaste(held, useful, waste)


def model_flops_per_step(n_params: float, tokens_per_step: float, *, n_layer: int = 0,
                         n_ctx: int = 0, d_model: int = 0) -> float:
    """Training FLOPs of one step: tokens × (6·N + 6·n_layer·n_ctx·d_model).

    Kaplan et al. 2020, §2.1, Table 1. For an MLP pass samples as ``tokens_per_step`` and n_layer 0.

    Raises:
        ValueError: a negative or non-finite argument."""
    for name, v in (("n_params", n_params), ("tokens_per_step", tokens_per_step),
                    ("n_layer", n_layer), ("n_ctx", n_ctx), ("d_model", d_model)):
        _nonneg(name, v)
    return float(tokens_per_step) * (6.0 * n_params + 6.0 * n_layer * n_ctx * d_model)


def mfu(flops_per_step: float, steps: int, productive_s: float, devices: float,
        peak_flops_per_device: float | None) -> float | None:
    """MFU = (flops_per_step × steps / productive_s) / (devices × peak); PaLM (2022), App. B.

    Returns:
        The ratio, or None when the peak is unknown, nothing ran, or no step time was measured.
    Raises:
        ValueError: a negative or non-finite argument."""
    for name, v in (("flops_per_step", flops_per_step), ("steps", steps),
                    ("productive_s", productive_s), ("devices", devices)):
        _nonneg(name, v)
    if not peak_flops_per_device or productive_s == 0 or devices == 0 or steps == 0:
        return None
    return flops_per_step * steps / productive_s / (devices * peak_flops_per_device)


def money(gpu_hours: float, price_per_device_hour: float | None) -> float | None:
    """Money = GPU-hours × price per device-hour (docs/architecture.md §6); None without a price.

    Raises:
        ValueError: a negative or non-finite argument."""
    _nonneg("gpu_hours", gpu_hours)
    if price_per_device_hour is None:
        return None
    return gpu_hours * _nonneg("price_per_device_hour", price_per_device_hour)
