"""The best value of a categorical knob (e.g. ``lr_schedule``) at one proxy width, compared at
matched numeric values (docs/transfer.md §8) by one least-squares fit at the rung of

    y = c + Σ_j (b_j z_j + q_j z_j²) + δ_name                                    (1)

(z_j the standardized log of each numeric knob; Myers, Montgomery & Anderson-Cook, "Response
Surface Methodology", §2.3), with percentile-bootstrap intervals (Efron & Tibshirani 1993,
ch. 13). When (1) cannot be fitted, each name is scored by the mean of its k best trials."""
from __future__ import annotations

import math
import statistics
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["TOP_K", "FIXED_EFFECTS", "TOP_K_MEAN", "best_choice", "late_disagreement"]

#: trials per name whose values are averaged in the fallback score
TOP_K = 3
FIXED_EFFECTS = "fixed-effects quadratic"
TOP_K_MEAN = "top-k mean"


def _design(Z: np.ndarray, levels: np.ndarray, n_levels: int) -> np.ndarray:
    """Columns of (1): 1, z_j, z_j², and one indicator per level but the reference (0)."""
    cols = [np.ones(len(Z))] + [Z[:, j] for j in range(Z.shape[1])] \
        + [Z[:, j] ** 2 for j in range(Z.shape[1])] \
        + [(levels == i).astype(float) for i in range(1, n_levels)]
    return np.column_stack(cols)


def _offsets(Z: np.ndarray, levels: np.ndarray, y: np.ndarray, n_levels: int
             ) -> np.ndarray | None:
    """δ of every level (reference 0) by least squares on (1); None when rank-deficient."""
    D = _design(Z, levels, n_levels)
    if np.linalg.matrix_rank(D) < D.shape[1]:
        return None
    coef = np.linalg.lstsq(D, y, rcond=None)[0]
    return np.concatenate([[0.0], coef[D.shape[1] - (n_levels - 1):]])


def _top_k(name: str, values: Sequence[str], hparams: Mapping[str, Mapping[str, Any]],
           rung: Mapping[str, float], sign: float) -> dict[str, dict[str, Any]]:
    """Per name the mean of its k best finite values, k = min(TOP_K, the fewest trials of any
    name)."""
    got = {v: sorted((x for k, x in rung.items()
                      if math.isfinite(x) and hparams[k].get(name) == v), key=lambda x: sign * x)
           for v in values}
    k = min([TOP_K, *(len(g) for g in got.values() if g)])
    per: dict[str, Any] = {}
    for v in values:
        top = got[v][:k]
        per[v] = {"n_trials": len(got[v]), "top_k": len(top),
                  "score": statistics.fmean(top) if top else None,
                  "best": top[0] if top else None,
                  "spread": statistics.stdev(top) if len(top) >= 2 else None}
    return per


def _bootstrap(Z: np.ndarray, levels: np.ndarray, y: np.ndarray, n_levels: int, chosen: int,
               n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap over trials of (1): each replicate's δ − δ_chosen, and wins per level
    (replicates missing a level or rank-deficient are skipped)."""
    rng = np.random.default_rng(seed)
    boots, wins = [], np.zeros(n_levels)
    for _ in range(n_boot):
        idx = rng.integers(len(y), size=len(y))
        if len(set(levels[idx])) < n_levels:
            continue
        d = _offsets(Z[idx], levels[idx], y[idx], n_levels)
        if d is None:
            continue
        boots.append(d - d[chosen])
        wins[int(np.argmin(d))] += 1
    return np.array(boots), wins


def best_choice(name: str, values: Sequence[str], hparams: Mapping[str, Mapping[str, Any]],
                rung: Mapping[str, float], *, mode: str, numeric: Sequence[str] = (),
                n_boot: int = 200, seed: int = 0) -> tuple[str | None, dict[str, Any]]:
    """The name of ``values`` whose trials did best at one rung, other knobs held equal by (1).

    ``numeric``: the numeric knobs searched beside it (a knob with a value ≤ 0 enters linearly).
    Returns (the best name or None, evidence {"method", "n_trials", "n_boot_used", "per_name":
    {name: {"n_trials", "best", "effect" (δ − δ_chosen, metric units), "effect_interval",
    "p_best", "score", "top_k", "spread"}}}).

    Raises:
        ValueError: mode not ``min``/``max``; n_boot < 0."""
    if mode not in ("min", "max"):
        raise ValueError(f"mode = {mode!r}: use 'min' or 'max'")
    if n_boot < 0:
        raise ValueError(f"n_boot = {n_boot}: must be >= 0")
    sign = 1.0 if mode == "min" else -1.0
    keys = sorted(k for k, x in rung.items() if math.isfinite(x) and hparams[k].get(name) in values)
    present = [v for v in values if any(hparams[k].get(name) == v for k in keys)]
    fallback = _top_k(name, values, hparams, rung, sign)
    evidence: dict[str, Any] = {"method": TOP_K_MEAN, "n_trials": len(keys), "n_boot_used": 0,
                                "per_name": fallback}
    if not present:
        return None, evidence
    if len(present) == 1:
        return present[0], evidence
    y = np.array([sign * rung[k] for k in keys])
    X = np.array([[float(hparams[k][n]) for n in numeric] for k in keys],
                 dtype=float).reshape(len(keys), len(numeric))
    positive = np.all(X > 0, axis=0)          # a knob at 0 (weight decay) stays linear
    X[:, positive] = np.log(X[:, positive])
    spread = np.ptp(X, axis=0) if len(keys) else np.zeros(len(numeric))
    levels = np.array([present.index(hparams[k][name]) for k in keys])
    n_par = 1 + 2 * len(numeric) + len(present) - 1
    delta = None
    if len(keys) >= n_par + 2 and np.all(spread > 0):
        Z = (X - X.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        delta = _offsets(Z, levels, y, len(present))
    if delta is None:
        return min(present, key=lambda v: sign * fallback[v]["score"]), evidence
    chosen = int(np.argmin(delta))
    B, wins = _bootstrap(Z, levels, y, len(present), chosen, n_boot, seed)
    centre = float(np.mean(y - delta[levels]))
    per = {}
    for v in values:
        fb = fallback[v]
        if v not in present:
            per[v] = {**fb, "effect": None, "effect_interval": None, "p_best": 0.0}
            continue
        i = present.index(v)
        iv = ([float(sign * np.percentile(B[:, i], 2.5 if sign > 0 else 97.5)),
               float(sign * np.percentile(B[:, i], 97.5 if sign > 0 else 2.5))]
              if len(B) >= 20 else None)
        per[v] = {**fb, "effect": float(sign * (delta[i] - delta[chosen])),
                  "effect_interval": iv,
                  "p_best": float(wins[i] / len(B)) if len(B) else None,
                  "score": float(sign * (centre + delta[i]))}
    return present[chosen], {"method": FIXED_EFFECTS, "n_trials": len(keys),
                             "n_boot_used": len(B), "per_name": per}


def late_disagreement(name: str, chosen: Any, rungs: dict[int, dict[str, float]],
                       milestone: int, hp_of: dict[str, Any], mode: str) -> dict[str, Any]:
    """``{"late_rung", "late_best"}`` when the best trial at the highest rung above ``milestone``
    chose another value of ``name`` than the one chosen there; {} otherwise."""
    late = [m for m in rungs if m > milestone and rungs[m]]
    if not late:
        return {}
    top = max(late)
    pick = min if mode == "min" else max
    best = pick(rungs[top], key=rungs[top].get)
    value = hp_of[best].get(name)
    return {} if value == chosen else {"late_rung": top, "late_best": value}
