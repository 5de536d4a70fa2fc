"""The optimum of a proxy sweep: a local quadratic in log space, not a noisy argmin.

Yang et al. 2022, Tensor Programs V, §3 / Fig. 1 (loss valleys in log h); Box & Wilson 1951,
JRSS B (stationary point of a fitted quadratic); Efron & Tibshirani 1993, ch. 13 (percentile
bootstrap); Davison & Hinkley 1997, §3.8 (resampling clusters of seeds)."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass

import numpy as np

from mutune.errors import FitError

__all__ = ["Optimum", "Neighbourhood", "estimate_optimum"]


@dataclass(frozen=True)
class Neighbourhood:
    """Which trials the optimum's quadratic is fitted to, and where it counts as on the edge."""
    n_best: int | None = None
    bounds: Any = None
    extreme_is_edge: bool = True

QUADRATIC = "quadratic"               # full quadratic with cross terms
DIAGONAL = "diagonal-quadratic"       # separable: no cross terms
WEIGHTED_MEAN = "weighted-mean"       # curvature not positive-definite: weighted best points
EDGE_FRACTION = 0.05


@dataclass(frozen=True)
class Optimum:
    """Estimated optimum of one proxy sweep, in natural-log units of each hyperparameter.

    Attributes:
        interval: name → 95 % percentile-bootstrap interval; (nan, nan) under 20 replicates.
        on_edge: the stationary point was clipped, sits within 5 % of a bound, or the best trial
            is the extreme sampled value; ``edge_side`` says which bound.
        stationary: the unclipped −H⁻¹g, the direction to search next (Box & Wilson 1951).
        curvature: name → the quadratic's second derivative along it, in metric units per
            (natural-log unit)², worse-is-positive (mode "max" flips the sign of the metric);
            nan for a weighted mean.
        fitted_value: the quadratic's metric at ``center`` (nan for a weighted mean)."""
    names: tuple[str, ...]
    center: dict[str, float]
    interval: dict[str, tuple[float, float]]
    method: str
    n_used: int
    n_dropped: int
    n_neighbourhood: int
    on_edge: dict[str, bool]
    edge_side: dict[str, str | None]
    best_trial: dict[str, float]
    n_boot_used: int
    clipped: dict[str, bool] = dataclasses.field(default_factory=dict)
    stationary: dict[str, float] = dataclasses.field(default_factory=dict)
    curvature: dict[str, float] = dataclasses.field(default_factory=dict)
    fitted_value: float = math.nan

    def value(self, name: str) -> float:
        """h* of ``name`` in natural units (exp of the log centre)."""
        return math.exp(self.center[name])

    def value_interval(self, name: str) -> tuple[float, float]:
        """The 95 % interval of ``name`` in natural units."""
        lo, hi = self.interval[name]
        return (math.exp(lo), math.exp(hi))


def _design(Z: np.ndarray, full: bool) -> np.ndarray:
    """Quadratic design matrix of standardized coordinates Z (k, d): 1, z_j, z_j², z_i·z_j."""
    k, d = Z.shape
    cols = [np.ones(k)] + [Z[:, j] for j in range(d)] + [Z[:, j] ** 2 for j in range(d)]
    if full:
        cols += [Z[:, i] * Z[:, j] for i in range(d) for j in range(i + 1, d)]
    return np.column_stack(cols)


def _n_params(d: int, full: bool) -> int:
    return 1 + 2 * d + (d * (d - 1) // 2 if full else 0)


def _unique_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(X, axis=0, return_inverse=True)`` for a 2-D float array — the same rows
    in the same (lexicographic) order — by one lexsort (a third of the time, which counts:
    the bootstrap calls it thousands of times)."""
    order = np.lexsort(X.T[::-1])
    Xs = X[order]
    new = np.ones(len(Xs), dtype=bool)
    new[1:] = np.any(Xs[1:] != Xs[:-1], axis=1)
    inverse = np.empty(len(Xs), dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return Xs[new], inverse


@dataclass(frozen=True)
class _Fit:
    """One quadratic (or weighted-mean) estimate, in natural-log units of each hyperparameter."""
    centre: np.ndarray           # (d,) clipped to the fitted points' box
    method: str
    k: int                       # configurations the fit used
    clipped: np.ndarray          # (d,) −1 below, +1 above, 0 inside
    stationary: np.ndarray       # (d,) the unclipped −H⁻¹g
    curvature: np.ndarray        # (d,) ∂²y/∂(log h_j)²; nan for a weighted mean
    value: float                 # the fitted y at ``centre``; nan for a weighted mean


def _quadratic(X: np.ndarray, y: np.ndarray, order: np.ndarray, n_best: int, method: str
               ) -> _Fit | None:
    """The ``method`` quadratic on the best configurations, or None (too few, rank-deficient
    or not positive-definite)."""
    n, d = X.shape
    full = method == QUADRATIC and d > 1
    p = _n_params(d, full)
    k = min(n, max(n_best, p + 1 if full else p))
    if k < p + (1 if full else 0):
        return None
    idx = order[:k]
    Xn, yn = X[idx], y[idx]
    mid = Xn[0]
    spread = np.ptp(Xn, axis=0)
    if np.any(spread == 0):
        return None
    Z = (Xn - mid) / spread
    # lstsq's rank is matrix_rank's (singular values above max(k, p)·eps of the largest)
    coef, _, rank, _ = np.linalg.lstsq(_design(Z, full), yn, rcond=None)
    if rank < p:
        return None
    g = coef[1:1 + d]
    H = np.diag(2 * coef[1 + d:1 + 2 * d])
    if full:
        it = iter(coef[1 + 2 * d:])
        for i in range(d):
            for j in range(i + 1, d):
                H[i, j] = H[j, i] = next(it)
    eig = np.linalg.eigvalsh(H)
    if eig[0] <= 1e-10 * max(1.0, float(np.max(np.abs(eig)))):
        return None           # not positive-definite: try the separable fit, then the mean
    stationary = mid + np.linalg.solve(H, -g) * spread
    lo, hi = Xn.min(axis=0), Xn.max(axis=0)
    centre = np.clip(stationary, lo, hi)
    zc = (centre - mid) / spread
    return _Fit(centre, method, k, np.where(stationary < lo, -1, np.where(stationary > hi, 1, 0)),
                stationary, np.diag(H) / spread ** 2,
                float(coef[0] + g @ zc + 0.5 * zc @ H @ zc))


def _fit_once(X: np.ndarray, y: np.ndarray, n_best: int) -> _Fit:
    """One estimate from trials X (n, d) log values, y (n,) losses to minimise."""
    X, inverse = _unique_rows(X)
    y = np.bincount(inverse, weights=y) / np.bincount(inverse)   # mean over repeats (seeds)
    n, d = X.shape
    order = np.argsort(y, kind="stable")
    for method in ((QUADRATIC, DIAGONAL) if d > 1 else (QUADRATIC,)):
        fit = _quadratic(X, y, order, n_best, method)
        if fit is not None:
            return fit
    k = min(n, max(n_best, 2))
    idx = order[:k]
    yn = y[idx]
    span = yn[-1] - yn[0]
    w = (yn[-1] - yn) / span if span > 0 else np.ones(k)
    if k > 1 and w.sum() == 0:
        w = np.ones(k)
    mean = (w[:, None] * X[idx]).sum(axis=0) / w.sum()
    return _Fit(mean, WEIGHTED_MEAN, k, np.zeros(d, int), mean, np.full(d, math.nan), math.nan)


def _finite_trials(log_h: np.ndarray, values: np.ndarray, names: tuple[str, ...], mode: str,
                   groups: Sequence[Any] | None, n_boot: int, region: Neighbourhood
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """Checked (X, values, groups) of the finite trials, and how many were dropped."""
    X = np.asarray(log_h, dtype=float)
    v = np.asarray(values, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or v.ndim != 1 or X.shape[0] != v.shape[0]:
        raise ValueError(f"log_h shape {np.shape(log_h)} and values shape {v.shape} must be "
                         "(n_trials, n_hp) and (n_trials,)")
    n_all, d = X.shape
    if len(names) != d:
        raise ValueError(f"names {list(names)} must name the {d} columns of log_h")
    if mode not in ("min", "max"):
        raise ValueError(f"mode = {mode!r}: must be 'min' or 'max'")
    if n_boot < 0:
        raise ValueError(f"n_boot = {n_boot}: must be ≥ 0")
    g = None
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != (n_all,):
            raise ValueError(f"groups shape {g.shape} must be ({n_all},)")
    finite = np.isfinite(v) & np.all(np.isfinite(X), axis=1)
    n_dropped = int(n_all - finite.sum())
    return X[finite], v[finite], (g[finite] if g is not None else None), n_dropped


def _bootstrap(X: np.ndarray, y: np.ndarray, g: np.ndarray | None, n_best: int, n_boot: int,
               seed: int, names: tuple[str, ...]) -> tuple[dict[str, tuple[float, float]], int]:
    """Percentile interval of the refitted centre over resampled trials (or groups)."""
    n, needed = X.shape[0], 1 + 2 * X.shape[1]
    rng = np.random.default_rng(seed)
    draws = []
    if g is not None:
        ids, inverse = np.unique(g, return_inverse=True)
        members = [np.flatnonzero(inverse == i) for i in range(len(ids))]
    for _ in range(n_boot):
        idx: np.ndarray
        if g is None:
            idx = rng.integers(0, n, (n,))
        else:
            idx = np.concatenate([members[i] for i in rng.integers(0, len(members),
                                                                   len(members))])
        yb = y[idx]
        if idx.size < needed or np.ptp(yb) == 0 or np.any(np.ptp(X[idx], axis=0) == 0):
            continue
        draws.append(_fit_once(X[idx], yb, min(n_best, idx.size)).centre)
    if len(draws) >= 20:
        qs = np.quantile(np.array(draws), [0.025, 0.975], axis=0)
        return {nm: (float(qs[0, j]), float(qs[1, j])) for j, nm in enumerate(names)}, len(draws)
    return {nm: (math.nan, math.nan) for nm in names}, len(draws)


def _edges(X: np.ndarray, y: np.ndarray, centre: np.ndarray, clipped: np.ndarray, method: str,
           region: Neighbourhood, names: tuple[str, ...]
           ) -> tuple[dict[str, bool], dict[str, str | None], np.ndarray]:
    """Per hyperparameter: whether the centre is on an edge, which side, and the best trial."""
    d = X.shape[1]
    lo_s, hi_s = X.min(axis=0), X.max(axis=0)
    if region.bounds is None:
        b = np.column_stack([lo_s, hi_s])
    else:
        b = np.asarray(region.bounds, dtype=float)
        if b.shape != (d, 2) or not np.all(b[:, 0] < b[:, 1]):
            raise ValueError(f"bounds {b.tolist()} must be shape ({d}, 2) with lo < hi")
    best = X[int(np.argmin(y))]
    margin = EDGE_FRACTION * (b[:, 1] - b[:, 0])
    on_edge: dict[str, bool] = {}
    side: dict[str, str | None] = {}
    # a weighted mean has no stationary point to bracket: its best trial's place decides
    extreme = region.extreme_is_edge or method == WEIGHTED_MEAN
    for j, nm in enumerate(names):
        low = (centre[j] <= b[j, 0] + margin[j] or (extreme and best[j] == lo_s[j])
               or clipped[j] < 0)
        high = (centre[j] >= b[j, 1] - margin[j] or (extreme and best[j] == hi_s[j])
                or clipped[j] > 0)
        on_edge[nm] = bool(low or high)
        side[nm] = ("low" if centre[j] - b[j, 0] <= b[j, 1] - centre[j] else "high") \
            if low and high else ("low" if low else "high" if high else None)
    return on_edge, side, best


def estimate_optimum(log_h: np.ndarray, values: np.ndarray, *, names: Sequence[str],
                     mode: str = "min", groups: Sequence[Any] | None = None,
                     n_boot: int = 500, seed: int = 0,
                     region: Neighbourhood | None = None) -> Optimum:
    """Optimum of the metric over the searched hyperparameters, by a local quadratic in log space.

    Fits a full (or, failing that, diagonal) quadratic to the ``n_best`` best configurations; the
    centre is the stationary point −H⁻¹g clipped to their box, else (no positive-definite fit) their
    weighted mean. Sources in the module docstring.

    Args:
        log_h: natural-log hyperparameter values, shape (n_trials, n_hp).
        values: the metric per trial, shape (n_trials,), e.g. validation loss in nats.
        groups: optional (n_trials,) seed/replicate ids; the bootstrap then resamples groups.
    Raises:
        ValueError: shapes or names inconsistent, mode unknown, n_best < 1, n_boot < 0,
            bounds not (n_hp, 2) with lo < hi.
        FitError: fewer finite trials than 1 + 2·n_hp; a hyperparameter that takes one value
            only; a flat metric."""
    names = tuple(names)
    region = region or Neighbourhood()
    X, v, g, n_dropped = _finite_trials(log_h, values, names, mode, groups, n_boot, region)
    n, d = X.shape
    needed = 1 + 2 * d
    if n < needed:
        raise FitError(f"{n} finite trials ({n_dropped} non-finite dropped of {n + n_dropped}): "
                       f"need ≥ {needed} to fit a quadratic in {d} hyperparameter(s) "
                       f"{list(names)}")
    n_best = region.n_best if region.n_best is not None else max(5, 2 * d + 3)
    if n_best < 1:
        raise ValueError(f"n_best = {n_best}: must be ≥ 1")
    n_best = min(n_best, n)
    single = [names[j] for j in range(d) if X[:, j].min() == X[:, j].max()]
    if single:
        raise FitError(f"hyperparameters {single} take a single value across the {n} finite "
                       "trials: no optimum can be located along them")
    if np.ptp(v) == 0:
        raise FitError(f"flat: all {n} finite values equal {v[0]!r}; the metric does not "
                       f"depend on {list(names)} in the searched range")
    y = v if mode == "min" else -v
    fit = _fit_once(X, y, n_best)
    interval, n_draws = _bootstrap(X, y, g, n_best, n_boot, seed, names)
    on_edge, side, best = _edges(X, y, fit.centre, fit.clipped, fit.method, region, names)
    return Optimum(names, {nm: float(fit.centre[j]) for j, nm in enumerate(names)}, interval,
                   fit.method, n, n_dropped, fit.k, on_edge, side,
                   {nm: float(best[j]) for j, nm in enumerate(names)}, n_draws,
                   {nm: bool(fit.clipped[j]) for j, nm in enumerate(names)},
                   {nm: float(fit.stationary[j]) for j, nm in enumerate(names)},
                   {nm: float(fit.curvature[j]) for j, nm in enumerate(names)},
                   fit.value if mode == "min" else -fit.value)
