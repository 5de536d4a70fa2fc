"""Which trial is best, compared at equal budget (DESIGN.md §4).

The top rung of a small sweep holds one or two trials, partly by arrival order, so the best trial
is taken at the highest rung holding at least ``min_trials`` trials, comparing the values each
trial was judged with there (its first report at or past the milestone).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from mutune.errors import SearchError

__all__ = ["BestTrial", "best_at_rung"]


@dataclass(frozen=True)
class BestTrial:
    """The best trial at rung ``milestone`` (steps), its ``value`` there, and how many trials
    the rung held."""
    trial: str
    milestone: int
    value: float
    n_trials: int


def best_at_rung(rung_values: Mapping[int, Mapping[str, float]], *, mode: str = "min",
                 min_trials: int = 3) -> BestTrial:
    """Best trial at the highest rung with at least ``min_trials`` values (scope ``last``:
    each trial's value as judged at that rung).

    Args:
        rung_values: milestone (steps) → {trial: value judged there}.
        mode: ``"min"`` or ``"max"``.
        min_trials: how many trials a rung must hold to be used (falls back to the rung with
            the most trials, highest first, when none holds that many).
    Raises:
        SearchError: no rung holds a finite value.
    """
    if mode not in ("min", "max"):
        raise SearchError(f"mode = {mode!r}: must be 'min' or 'max'")
    rungs = sorted(((m, {t: v for t, v in vals.items() if math.isfinite(v)})
                    for m, vals in rung_values.items()), reverse=True)
    rungs = [(m, vals) for m, vals in rungs if vals]
    if not rungs:
        raise SearchError("no rung holds a finite value: every trial diverged or none reported")
    eligible = [(m, vals) for m, vals in rungs if len(vals) >= min_trials]
    m, vals = eligible[0] if eligible else max(rungs, key=lambda mv: (len(mv[1]), mv[0]))
    pick = min if mode == "min" else max
    trial = pick(sorted(vals), key=lambda t: vals[t])
    return BestTrial(trial, m, vals[trial], len(vals))
