"""Rungs: the milestones a trial is judged at, the values recorded at each, and who is on top."""
from __future__ import annotations

import bisect
import math
from typing import Any

from mutune.errors import SearchError

__all__ = ["rung_milestones", "bracket_count", "check_settings", "check_mode", "Rung",
           "rank_at_rung", "encode_rungs", "decode_rungs", "encode_value"]


def check_settings(grace_period: Any, reduction_factor: Any, max_t: Any) -> None:
    """Raise SearchError (naming the setting) unless r ≥ 1, η ≥ 2, max_t ≥ r, all integers."""
    for name, v, low in (("grace_period", grace_period, 1),
                         ("reduction_factor", reduction_factor, 2), ("max_t", max_t, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise SearchError(f"{name} = {v!r}: must be an integer >= {low}")
    if max_t < grace_period:
        raise SearchError(f"max_t = {max_t}: must be >= grace_period ({grace_period})")


def check_mode(mode: Any) -> str:
    """``mode`` if it is ``"min"`` or ``"max"``; else SearchError naming it."""
    if mode not in ("min", "max"):
        raise SearchError(f"mode = {mode!r}: must be 'min' or 'max'")
    return str(mode)


def rung_milestones(grace_period: int, reduction_factor: int, max_t: int) -> list[int]:
    """Rung milestones r·η^k ≤ max_t in steps, increasing; SearchError for bad settings."""
    check_settings(grace_period, reduction_factor, max_t)
    out, m = [], grace_period
    while m <= max_t:
        out.append(m)
        m *= reduction_factor
    return out


def bracket_count(grace_period: int, reduction_factor: int, max_t: int) -> int:
    """s_max + 1 brackets, s_max = ⌊log_η(max_t / r)⌋ in exact integers (Li et al. 2018, §3)."""
    return len(rung_milestones(grace_period, reduction_factor, max_t))


class Rung:
    """Values at one milestone: finite ones sorted, non-finite counted, each trial's by key."""

    __slots__ = ("finite", "n_nonfinite", "by_trial")

    def __init__(self) -> None:
        self.finite: list[float] = []
        self.n_nonfinite = 0
        self.by_trial: dict[str, float] = {}

    @property
    def n(self) -> int:
        """Values recorded here, non-finite ones included."""
        return len(self.finite) + self.n_nonfinite

    def add(self, trial: str, value: float) -> bool:
        """Record ``trial``'s ``value``; returns whether it is finite. O(log n) + insert."""
        self.by_trial[trial] = value
        if math.isfinite(value):
            bisect.insort(self.finite, value)
            return True
        self.n_nonfinite += 1
        return False


def rank_at_rung(rung: Rung, value: float, reduction_factor: int, mode: str, *,
                 at_least_one: bool) -> tuple[bool, float | None]:
    """Whether recorded ``value`` is among the rung's best k, ties favouring it, and the cutoff.

    k = max(⌊n/η⌋, 1) with ``at_least_one`` (stopping ASHA), else ⌊n/η⌋ (Li et al. 2020, Alg. 2)."""
    sorted_vals = rung.finite
    k = rung.n // reduction_factor
    if at_least_one:
        k = max(k, 1)
    if k == 0:
        return False, None
    if mode == "min":
        better = bisect.bisect_left(sorted_vals, value)
        cutoff = sorted_vals[k - 1] if k <= len(sorted_vals) else None
    else:
        better = len(sorted_vals) - bisect.bisect_right(sorted_vals, value)
        cutoff = sorted_vals[-k] if k <= len(sorted_vals) else None
    return better < k, cutoff


def encode_value(v: float) -> float | str:
    """A value for JSON: finite floats as they are, NaN/inf as strings."""
    return v if math.isfinite(v) else str(v)


def encode_rungs(rungs: dict[int, Rung]) -> dict[str, list[list[Any]]]:
    """Rungs as JSON: milestone (a string key) → ``[[trial, value], …]`` in recording order."""
    return {str(m): [[t, encode_value(v)] for t, v in r.by_trial.items()]
            for m, r in rungs.items()}


def decode_rungs(data: dict[str, Any], milestones: list[int]) -> dict[int, Rung]:
    """Inverse of :func:`encode_rungs` (also the older ``{trial: value}`` form); SearchError on an
    unknown milestone."""
    rungs = {m: Rung() for m in milestones}
    for m, pairs in data.items():
        if int(m) not in rungs:
            raise SearchError(f"saved rung {m} is not a milestone of {milestones}")
        items = pairs.items() if isinstance(pairs, dict) else pairs
        for t, v in items:
            rungs[int(m)].add(str(t), float(v))
    return rungs
