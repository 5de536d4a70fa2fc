"""Loss scaling law L(N) = E + A·N^(−α) (N parameters, L in nats), extrapolated to the target.

Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §3 (pure power law, the fallback
when the fit is not identifiable); Hoffmann et al. 2022, §3.2 (irreducible term E, log-loss fit);
residual bootstrap over sizes: Efron & Tibshirani 1993, §9.5."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mutune.errors import FitError

__all__ = ["LossLaw", "fit_loss_law"]


@dataclass(frozen=True)
class LossLaw:
    """L(N) = E + A·N^(−α), L in nats, N in parameters; ``identifiable`` False: E = 0 fallback."""
    E: float
    A: float
    alpha: float
    identifiable: bool
    form: str
    sizes: tuple[float, ...]
    losses: tuple[float, ...]
    residual_scale: float
    intervals: dict[str, tuple[float, float]]
    n_boot: int
    _draws: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.zeros((0, 3)))
    _noise: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    _log_n0: float = field(repr=False, compare=False, default=0.0)

    def predict(self, N: float | np.ndarray) -> float | np.ndarray:
        """L(N) in nats; N parameters (> 0), scalar or array of any shape.

        Raises:
            FitError: a size is not finite and > 0."""
        n = _check_sizes(N)
        out = self.E + self.A * n ** (-self.alpha)
        return float(out) if np.ndim(N) == 0 else out

    def predict_interval(self, N: float, *, level: float = 0.95,
                         include_noise: bool = True) -> tuple[float, float]:
        """Percentile bootstrap interval of L(N) (nats)."""
        if not 0 < level < 1:
            raise ValueError(f"level = {level}: must be in (0, 1)")
        n = float(_check_sizes(N))
        if self._draws.shape[0] == 0:
            return (math.nan, math.nan)
        E, log_a0, a = self._draws.T          # A' = A·N₀^(−α): no overflow at large N₀
        log_pred = np.log(E + np.exp(log_a0 - a * (math.log(n) - self._log_n0)))
        if include_noise:
            log_pred = log_pred + self._noise[: log_pred.size]
        lo, hi = np.quantile(log_pred, [(1 - level) / 2, (1 + level) / 2])
        return (float(np.exp(lo)), float(np.exp(hi)))


def _check_sizes(N: Any) -> np.ndarray:
    n = np.asarray(N, dtype=float)
    if not np.all(np.isfinite(n) & (n > 0)):
        raise FitError(f"sizes {n.tolist()}: parameter counts must be finite and > 0")
    return n


def _fit3(x: np.ndarray, y: np.ndarray, start: np.ndarray | None, tol: float = 1e-15) -> Any:
    """Fit log L = log(exp(e) + exp(a)·exp(x)^(−exp(l))) with x = log(N/N₀). Returns θ, ok."""
    from scipy.optimize import least_squares     # lazy: 31 MB, only when a law is fitted

    ymin = float(np.min(y))

    def resid(t: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.log(np.exp(t[0]) + np.exp(t[1] - np.exp(t[2]) * x)) - y
        return out

    lower = np.array([ymin - 40.0, -60.0, math.log(1e-4)])
    upper = np.array([ymin, 60.0, math.log(10.0)])
    starts = [start] if start is not None else []
    if start is None:
        L = np.exp(y)
        for alpha in (0.05, 0.2, 0.5, 1.0):
            for frac in (0.0, 0.5, 0.9):
                E = frac * float(L.min())
                A = float(np.exp(np.mean(np.log(np.maximum(L - E, 1e-300)) + alpha * x)))
                starts.append(np.array([math.log(max(E, 1e-12 * L.min())), math.log(A),
                                        math.log(alpha)]))
    best = None
    for t0 in starts:
        t0 = np.clip(t0, lower + 1e-9, upper - 1e-9)
        r = least_squares(resid, t0, bounds=(lower, upper), xtol=tol, ftol=tol,
                          gtol=tol, max_nfev=2000, method="trf")
        if best is None or r.cost < best.cost:
            best = r
    return best


def _checked(N: Any, losses: Any, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    if n_boot < 0:
        raise ValueError(f"n_boot = {n_boot}: must be ≥ 0")
    n_arr = np.asarray(N, dtype=float)
    L = np.asarray(losses, dtype=float)
    if n_arr.ndim != 1 or n_arr.shape != L.shape:
        raise FitError(f"sizes shape {n_arr.shape} and losses shape {L.shape} must be equal 1-D")
    for name, arr in (("sizes", n_arr), ("losses", L)):
        bad = [float(v) for v in arr if not (math.isfinite(v) and v > 0)]
        if bad:
            raise FitError(f"loss law: {name} {bad} must be finite and > 0")
    if len(np.unique(n_arr)) < 3:
        raise FitError("loss law: need at least 3 distinct sizes, got "
                       f"{sorted({float(v) for v in n_arr})}")
    return n_arr, L


def _normalized(t3: np.ndarray) -> tuple[float, float, float]:
    """(E, log A', α) from the fit's (log E, log A', log α)."""
    return (math.exp(t3[0]), float(t3[1]), math.exp(t3[2]))


def _intervals(draws: np.ndarray, logN0: float) -> dict[str, tuple[float, float]]:
    """95 % percentile intervals of E, A and α over the bootstrap draws (NaN without any)."""
    if not draws.shape[0]:
        return {k: (math.nan, math.nan) for k in ("E", "A", "alpha")}
    with np.errstate(over="ignore"):
        nat = np.column_stack([draws[:, 0], np.exp(draws[:, 1] + draws[:, 2] * logN0),
                               draws[:, 2]])
    qs = np.quantile(nat, [0.025, 0.975], axis=0)
    return {k: (float(qs[0, j]), float(qs[1, j])) for j, k in enumerate(("E", "A", "alpha"))}


def fit_loss_law(N: Any, losses: Any, *, n_boot: int = 1000, seed: int = 0) -> LossLaw:
    """Fit L(N) = E + A·N^(−α) to the best loss of each proxy size, with bootstrap intervals.

    Raises:
        FitError: shapes differ, non-finite or non-positive input (names which), fewer than 3
            distinct sizes.
        ValueError: n_boot < 0."""
    n_arr, L = _checked(N, losses, n_boot)
    n = n_arr.size
    logN0 = float(np.mean(np.log(n_arr)))
    x = np.log(n_arr) - logN0
    y = np.log(L)

    identifiable = False
    if n >= 4:
        r = _fit3(x, y, None)
        J = r.jac
        sv = np.linalg.svd(J, compute_uv=False)
        at_bound = np.any(r.active_mask != 0)
        identifiable = bool(r.success and not at_bound and sv[-1] > 1e-7 * sv[0])
    if identifiable:
        theta = r.x
        fitted = y + r.fun
        p = 3
    else:
        X = np.column_stack([np.ones(n), x])
        coef = np.linalg.lstsq(X, y, rcond=None)[0]
        fitted = X @ coef
        p = 2
    resid = y - fitted
    dof = n - p
    res_scale = float(np.sqrt(np.sum(resid ** 2) / dof)) if dof > 0 else 0.0
    adj = (resid - resid.mean()) * math.sqrt(n / dof)

    E, log_a0, alpha = _normalized(theta) if identifiable else (0.0, float(coef[0]),
                                                                   -float(coef[1]))
    A = math.exp(log_a0 + alpha * logN0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, (n_boot, n))
    Ystar = fitted[None, :] + adj[idx]
    noise = adj[rng.integers(0, n, n_boot)]
    if identifiable:
        fitted_draws = []
        for yb in Ystar:
            rb = _fit3(x, yb, theta, tol=1e-10)
            if rb.success:
                fitted_draws.append(_normalized(rb.x))
        draws = np.array(fitted_draws).reshape(-1, 3)
    else:
        X = np.column_stack([np.ones(n), x])
        C = np.linalg.lstsq(X, Ystar.T, rcond=None)[0].T      # (B, 2)
        draws = np.column_stack([np.zeros(n_boot), C[:, 0], -C[:, 1]])
    intervals = _intervals(draws, logN0)
    form = "E + A·N^-alpha" if identifiable else "A·N^-alpha"
    return LossLaw(E, A, alpha, identifiable, form, tuple(float(v) for v in n_arr),
                   tuple(float(v) for v in L), res_scale, intervals, int(draws.shape[0]),
                   draws, noise, logN0)
