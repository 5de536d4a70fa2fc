"""Held devices, trials per device, and why held device-seconds went idle (by cause).

ETTR per level: Kokolis et al. 2024, "Revisiting Reliability in Large-Scale ML Research
Clusters", §3."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["IDLE_CAUSES", "Held", "held_devices", "trials_per_device", "Interval",
           "idle_breakdown"]

IDLE_CAUSES = ("sweep_startup", "between_widths", "fits", "tails", "target_fewer_devices",
               "worker_start", "trial_overhead", "recovery")
_EPS = 1e-9


def trials_per_device(fraction: float) -> int:
    """How many trials asking for ``fraction`` of one GPU fit on it: ⌊1/fraction⌋ (Ray's
    fractional-resource rule; 0.125 → 8, 0.3 → 3); 1 for a whole GPU or more.

    Raises:
        ValueError: fraction not > 0 and finite."""
    if not (math.isfinite(fraction) and fraction > 0):
        raise ValueError(f"fraction = {fraction}: must be a finite number > 0")
    return 1 if fraction >= 1 else int(math.floor(1.0 / fraction + _EPS))


@dataclass(frozen=True)
class Held:
    """What a sweep holds. ``slots``: trials that can run at once; ``devices``: devices held
    (slots × devices per trial: GPUs, or CPUs for CPU trials; fractions of a GPU summed);
    ``kind``: ``gpu`` or ``cpu``; ``source``: where the figures came from."""
    slots: int
    devices: float
    kind: str
    source: str


def held_devices(resources: Mapping[str, float] | None, *, cpus_per_trial: float,
                 gpus_per_trial: float, max_concurrent: int | None,
                 num_cpus: int) -> Held:
    """The devices a sweep holds on its cluster.

    Raises:
        ValueError: cpus_per_trial not > 0 or gpus_per_trial < 0."""
    if not cpus_per_trial > 0 or gpus_per_trial < 0:
        raise ValueError(f"cpus_per_trial = {cpus_per_trial}, gpus_per_trial = "
                         f"{gpus_per_trial}: need cpus > 0 and gpus >= 0")
    src = "ray.cluster_resources()" if resources is not None else f"ray.num_cpus = {num_cpus}"
    res = dict(resources) if resources is not None else {"CPU": float(num_cpus)}
    slots = int(math.floor(float(res.get("CPU", 0.0)) / cpus_per_trial + _EPS))
    if gpus_per_trial > 0:
        gpus = float(res.get("GPU", 0.0))
        per_card = trials_per_device(gpus_per_trial)
        by_gpu = (int(math.floor(gpus + _EPS)) * per_card if gpus_per_trial < 1
                  else int(math.floor(gpus / gpus_per_trial + _EPS)))
        slots = min(slots, by_gpu)
    if max_concurrent is not None:
        slots = min(slots, int(max_concurrent))
    slots = max(slots, 1)
    per = gpus_per_trial if gpus_per_trial > 0 else cpus_per_trial
    return Held(slots, slots * per, "gpu" if gpus_per_trial > 0 else "cpu", src)


@dataclass(frozen=True)
class Interval:
    """One trial on the driver's clock: ``start``/``end`` (seconds), ``devices`` it held, and
    its ``group``: ``width`` (a first-round proxy sweep), ``design`` (a confirmation design or
    gate round) or ``target``."""
    start: float
    end: float
    devices: float
    group: str


def idle_breakdown(intervals: Sequence[Interval], *, start: float, held: float,
                   inside: Mapping[str, float]) -> dict[str, float]:
    """Idle device-seconds of a sweep by cause (:data:`IDLE_CAUSES`, defined in
    docs/architecture.md §6).

    Raises:
        ValueError: no interval, an interval ending before it starts or starting before
            ``start``, an unknown group, or held not > 0."""
    if not intervals:
        raise ValueError("no trial intervals: nothing ran, nothing to break down")
    if not held > 0:
        raise ValueError(f"held = {held}: must be > 0 devices")
    for iv in intervals:
        if iv.end < iv.start or iv.start < start - 1e-6:
            raise ValueError(f"interval {iv}: must lie after the sweep's start {start} and "
                             "end after it starts")
        if iv.group not in ("width", "design", "target"):
            raise ValueError(f"interval group {iv.group!r}: must be width, design or target")
    out = dict.fromkeys(IDLE_CAUSES, 0.0)
    first = min(iv.start for iv in intervals)
    widths_end = max((iv.end for iv in intervals if iv.group == "width"), default=first)
    times = sorted({start, *(iv.start for iv in intervals), *(iv.end for iv in intervals)})
    for a, b in zip(times, times[1:]):
        running = [iv for iv in intervals if iv.start <= a and iv.end >= b and iv.end > iv.start]
        idle = max(held - sum(iv.devices for iv in running), 0.0) * (b - a)
        if not idle:
            continue
        if any(iv.group == "target" for iv in running):
            cause = "target_fewer_devices"
        elif running:
            cause = "tails"
        elif b <= first:
            cause = "sweep_startup"
        elif a >= widths_end:
            cause = "fits"
        else:
            cause = "between_widths"
        out[cause] += idle
    for k in ("worker_start", "trial_overhead", "recovery"):
        out[k] += float(inside.get(k, 0.0))
    return out
