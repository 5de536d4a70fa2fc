"""Which trial is best, compared at equal budget (one rung), with an explicit scope."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mutune.errors import SearchError

__all__ = ["BestTrial", "best_at_rung", "SCOPES"]

SCOPES = ("last", "best-so-far")


@dataclass(frozen=True)
class BestTrial:
    """The best trial at rung ``milestone`` (steps), its ``value`` there, and the rung's size."""
    trial: str
    milestone: int
    value: float
    n_trials: int


def best_at_rung(rung_values: Mapping[int, Mapping[str, float]], *, mode: str = "min",
                 min_trials: int = 3, scope: str = "last",
                 curves: Mapping[str, Sequence[tuple[int, float]]] | None = None) -> BestTrial:
    """Best trial at the highest rung with at least ``min_trials`` values.

    Raises:
        SearchError: bad mode or scope, ``best-so-far`` without a curve for a trial, or no
            rung holds a finite value."""
    if mode not in ("min", "max"):
        raise SearchError(f"mode = {mode!r}: must be 'min' or 'max'")
    if scope not in SCOPES:
        raise SearchError(f"scope = {scope!r}: must be one of {SCOPES}")
    rungs = sorted(((m, {t: v for t, v in vals.items() if math.isfinite(v)})
                    for m, vals in rung_values.items()), reverse=True)
    rungs = [(m, vals) for m, vals in rungs if vals]
    if not rungs:
        raise SearchError("no rung holds a finite value: every trial diverged or none reported")
    eligible = [(m, vals) for m, vals in rungs if len(vals) >= min_trials]
    m, vals = eligible[0] if eligible else max(rungs, key=lambda mv: (len(mv[1]), mv[0]))
    pick = min if mode == "min" else max
    if scope == "best-so-far":
        vals = {t: _best_so_far(t, m, curves, pick) for t in vals}
    trial = pick(sorted(vals), key=lambda t: vals[t])
    return BestTrial(trial, m, vals[trial], len(vals))


def _best_so_far(trial: str, milestone: int,
                 curves: Mapping[str, Sequence[tuple[int, float]]] | None, pick) -> float:
    if curves is None or trial not in curves:
        raise SearchError(f"scope 'best-so-far' needs the curve of trial {trial!r}")
    upto = []
    for step, value in curves[trial]:
        if math.isfinite(value):
            upto.append(value)
        if step >= milestone:
            break
    if not upto:
        raise SearchError(f"trial {trial!r} has no finite report up to step {milestone}")
    return pick(upto)
