"""Transfer rules h*(s) = exp(a) · Π_k s_k^(b_k), fitted on the per-size optima in log space.

Yang et al. 2022, Tensor Programs V, §3 / Fig. 1 (μP: b_width ≈ 0 for lr); Huber 1964 and
Holland & Welsch 1977 (Huber IRLS, c = 1.345); Efron & Tibshirani 1993, §12.5 (bootstrap-t) and
§9.5 (fixed-design resampling); DerSimonian & Laird 1986 (τ² by moments)."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mutune.errors import FitError

__all__ = ["TransferRule", "fit_transfer_rule"]

_Z975 = 1.959963984540054
_HUBER_C = 1.345
WIDTH = "width"


@dataclass(frozen=True)
class _Regression:
    """A (robust, weighted) linear fit y ≈ X·β with its bootstrap-t draws (private)."""
    beta: np.ndarray          # (p,)
    cov: np.ndarray           # (p, p) estimated covariance of beta
    tau2: float               # excess scatter variance (log units²)
    dof: int                  # n − p
    draw_beta: np.ndarray     # (B, p)
    draw_cov: np.ndarray      # (B, p, p)
    draw_tau2: np.ndarray     # (B,)
    draw_noise: np.ndarray    # (B,) standard normals for a new point's scatter
    studentized: bool         # False: percentile (dof = 0, jitter only)
    level: float = 0.95

    def interval(self, x0: np.ndarray, *, new_point: bool = False) -> tuple[float, float]:
        """Bootstrap-t interval for x0·β (+ a new point's scatter when ``new_point``)."""
        x0 = np.asarray(x0, dtype=float)
        centre = float(x0 @ self.beta)
        if self.draw_beta.shape[0] == 0:
            return (math.nan, math.nan)
        q = ((1 - self.level) / 2, 1 - (1 - self.level) / 2)
        tau = math.sqrt(self.tau2)
        draws = self.draw_beta @ x0
        if new_point:
            draws = draws + tau * self.draw_noise
        if not self.studentized:
            lo, hi = np.quantile(draws, q)
            return (float(lo), float(hi))
        var = float(x0 @ self.cov @ x0) + (self.tau2 if new_point else 0.0)
        var_b = np.einsum("i,bij,j->b", x0, self.draw_cov, x0)
        if new_point:
            var_b = var_b + self.draw_tau2
        sd = math.sqrt(max(var, 0.0))
        if sd == 0.0:
            return (centre, centre)
        sd_b = np.sqrt(np.maximum(var_b, 0.0))
        diff = draws - centre
        ok = sd_b > 1e-12 * sd
        t = np.where(diff > 0, np.inf, -np.inf)          # degenerate replicate: ±inf or 0
        t[diff == 0] = 0.0
        t[ok] = diff[ok] / sd_b[ok]
        t_lo, t_hi = np.quantile(np.clip(t, -1e12, 1e12), q)   # no inf − inf in the quantile
        return (centre - float(t_hi) * sd, centre - float(t_lo) * sd)


def _huber_wls(X: np.ndarray, Y: np.ndarray, prec: np.ndarray, robust: bool,
               iters: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batched Huber IRLS. X (n, p), Y (B, n), prec (B, n) precision weights."""
    n, p = X.shape
    outer = (X[:, :, None] * X[:, None, :]).reshape(n, p * p)     # rows x_i x_iᵀ

    def solve(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        A = (w @ outer).reshape(-1, p, p)
        return np.linalg.solve(A, ((w * Y) @ X)[..., None])[..., 0], A

    w = prec
    sqrt_prec = np.sqrt(prec)
    prev = None
    for _ in range(iters if robust and n > p else 0):
        beta, _ = solve(w)
        if prev is not None and np.all(np.abs(beta - prev) <= 1e-7 * (1 + np.abs(prev))):
            break
        prev = beta
        r = np.abs(Y - beta @ X.T) * sqrt_prec
        srt = np.sort(r, axis=1)
        med = 0.5 * (srt[:, (n - 1) // 2] + srt[:, n // 2])
        scale = 1.4826 * med * math.sqrt(n / (n - p))
        scale = np.where(scale > 0, scale, 1.0)[:, None]
        u = r / (_HUBER_C * scale)
        w = prec * np.minimum(1.0, 1.0 / np.maximum(u, 1e-300))
    beta, A = solve(w)
    inv = np.linalg.inv(A)
    r = Y - beta @ X.T
    s2 = (np.sum(w * r * r, axis=1) / (n - p)) if n > p else np.zeros(Y.shape[0])
    return beta, inv, s2


def _fit_with_noise(X: np.ndarray, Y: np.ndarray, sigma2: np.ndarray, robust: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit each row of Y (B, n): τ² by moments from an OLS pass, then Huber WLS with
    precision 1/(σ_i² + τ²). Returns beta, cov, tau2 (all batched)."""
    n, p = X.shape
    B = Y.shape[0]
    if n > p:
        ols, _, s2 = _huber_wls(X, Y, np.ones((B, n)), robust=False)
        tau2 = np.maximum(s2 - float(np.mean(sigma2)), 0.0)
    else:
        tau2 = np.zeros(B)
    var = sigma2[None, :] + tau2[:, None]
    prec = 1.0 / np.where(var > 0, var, 1.0)
    beta, inv, s2w = _huber_wls(X, Y, prec, robust)
    if np.any(sigma2 > 0):
        # the optima's own intervals are a noise floor: scale the covariance up when the
        # residuals exceed them, never down (Birge ratio ≥ 1; Birge 1932, Phys. Rev. 40)
        s2w = np.maximum(s2w, 1.0)
    cov = inv * s2w[:, None, None]
    return beta, cov, tau2


def _regress(X: np.ndarray, y: np.ndarray, sigma: np.ndarray | None, *, n_boot: int,
             seed: int, robust: bool) -> _Regression:
    """Point fit + studentized parametric bootstrap (see module docstring)."""
    n, p = X.shape
    sigma2 = np.zeros(n) if sigma is None else np.asarray(sigma, dtype=float) ** 2
    beta, cov, tau2 = (a[0] for a in _fit_with_noise(X, y[None, :], sigma2, robust))
    dof = n - p
    rng = np.random.default_rng(seed)
    studentized = dof > 0
    if dof == 0 and not np.any(sigma2 > 0):
        empty = np.zeros((0, p))
        return _Regression(beta, cov, float(tau2), dof, empty, np.zeros((0, p, p)),
                           np.zeros(0), np.zeros(0), studentized)
    fitted = X @ beta
    sd = np.sqrt(sigma2 + tau2)
    Ystar = fitted[None, :] + rng.standard_normal((n_boot, n)) * sd[None, :]
    b_beta, b_cov, b_tau2 = _fit_with_noise(X, Ystar, sigma2, robust)
    noise = rng.standard_normal(n_boot)
    return _Regression(beta, cov, float(tau2), dof, b_beta, b_cov, b_tau2, noise, studentized)


@dataclass(frozen=True)
class TransferRule:
    """log h*(s) = intercept + Σ_k coefficients[k]·log s_k, in natural logs.

    Attributes:
        slope: b_width, octaves of h per octave of width; intervals: axis → 95 % bootstrap-t.
        residual_scale, excess_scatter: RMS residual and τ of the log optima (log units)."""
    hyperparameter: str
    intercept: float
    slope: float
    scales: tuple[float, ...]
    optima: tuple[float, ...]
    axes: tuple[str, ...] = (WIDTH,)
    extra_scales: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    coefficients: Mapping[str, float] = field(default_factory=dict)
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    intercept_interval: tuple[float, float] = (math.nan, math.nan)
    slope_interval: tuple[float, float] = (math.nan, math.nan)
    residual_scale: float = math.nan
    excess_scatter: float = math.nan
    n_boot: int = 0
    _reg: _Regression | None = field(default=None, repr=False, compare=False)

    def _x0(self, scale: float, extra: Mapping[str, float]) -> np.ndarray:
        values = {WIDTH: scale, **extra}
        unknown = set(extra) - set(self.axes)
        missing = [a for a in self.axes if a not in values]
        if unknown or missing:
            raise ValueError(f"axes {sorted(unknown)} unknown / {missing} missing: this rule "
                             f"needs exactly {list(self.axes)}")
        for axis, v in values.items():
            if not (isinstance(v, (int, float, np.integer, np.floating))
                    and math.isfinite(v) and v > 0):
                raise FitError(f"{axis} = {v}: must be a finite number > 0")
        return np.array([1.0] + [math.log(values[a]) for a in self.axes])

    def check_target(self, target: Mapping[str, float]) -> None:
        """Raises ValueError (no ``width``, a missing or unknown axis) or FitError (a size
        not finite and positive) for a target the rule cannot be evaluated at."""
        t = dict(target)
        if WIDTH not in t:
            raise ValueError(f"target {t}: must give the target's width (key 'width')")
        self._x0(t.pop(WIDTH), t)

    def predict(self, scale: float, **extra: float) -> float:
        """h*(scale) = exp(a + b·log scale + Σ_k b_k·log extra[k]), in the hyperparameter's unit.

        Raises:
            FitError: a scale is not a finite positive number.
            ValueError: an extra axis is missing or unknown."""
        if not self.axes[1:] and not extra:   # fast path, also for rules built by hand
            if not (math.isfinite(scale) and scale > 0):
                raise FitError(f"scale = {scale}: must be a finite number > 0")
            return math.exp(self.intercept + self.slope * math.log(scale))
        x0 = self._x0(scale, extra)
        beta = np.array([self.intercept] + [self.coefficients[a] for a in self.axes])
        return math.exp(float(x0 @ beta))

    def prediction_interval(self, scale: float, *, level: float = 0.95,
                            **extra: float) -> tuple[float, float]:
        """Interval for the optimum at a target size, natural units (bootstrap-t, see module).

        Raises:
            ValueError: level other than 0.95, missing/unknown axes. FitError: bad scale."""
        if level != 0.95:
            raise ValueError(f"level = {level}: only the 0.95 interval is computed")
        if self._reg is None:
            return (math.nan, math.nan)
        lo, hi = self._reg.interval(self._x0(scale, extra), new_point=True)
        return (math.exp(lo), math.exp(hi))

    @property
    def formula(self) -> str:
        """The fitted rule as text, e.g. ``log lr*(w) = -6.21 − 0.012·log w`` (each
        coefficient's sign joins its term)."""
        def term(c: float, axis: str) -> str:
            return f" {'−' if c < 0 else '+'} {abs(c):.4g}·log {axis}"
        args = ", ".join(["w", *self.axes[1:]])
        text = f"log {self.hyperparameter}*({args}) = {self.intercept:.4g}" + term(self.slope,
                                                                                  "w")
        for axis in self.axes[1:]:
            text += term(self.coefficients[axis], axis)
        return text


def _as_1d(name: str, values: Any, n: int | None, hyperparameter: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise FitError(f"{hyperparameter}: {name} shape {arr.shape} must be equal 1-D to the "
                       f"scales' shape ({n},)")
    return arr


def _checked_optima(hyperparameter: str, scales: Any, optima: Any, n_boot: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    if n_boot < 50:
        raise ValueError(f"n_boot = {n_boot}: must be ≥ 50 for a 95 % interval")
    s = np.asarray(scales, dtype=float)
    h = np.asarray(optima, dtype=float)
    if s.shape != h.shape or s.ndim != 1:
        raise FitError(f"scales shape {s.shape} and optima shape {h.shape} must be equal 1-D")
    if h.size and not np.any(np.isfinite(h)):
        raise FitError(f"{hyperparameter}: all {h.size} optima are non-finite (all-NaN): "
                       "no sweep produced a usable optimum")
    for name, arr in (("scale", s), ("optimum", h)):
        bad = [float(v) for v in arr if not (math.isfinite(v) and v > 0)]
        if bad:
            raise FitError(f"{hyperparameter}: {name} values {bad} must be finite and > 0")
    if len(np.unique(s)) < 2:
        raise FitError(f"{hyperparameter}: need at least 2 distinct scales, got "
                       f"{sorted(set(s.tolist()))} (one size cannot fix a slope)")
    return s, h


def _design(hyperparameter: str, s: np.ndarray,
            extra_scales: Mapping[str, Sequence[float]] | None
            ) -> tuple[np.ndarray, tuple[str, ...], dict[str, tuple[float, ...]]]:
    """Design matrix [1, log width, log extra axes…] (sorted axes), checked to have full rank."""
    n = s.size
    extra_scales = dict(extra_scales or {})
    axes = tuple(a for a in sorted(extra_scales) if a != WIDTH)
    cols = [np.ones(n), np.log(s)]
    extra_t: dict[str, tuple[float, ...]] = {}
    for axis in axes:
        arr = _as_1d(f"extra_scales[{axis!r}]", extra_scales[axis], n, hyperparameter)
        bad = [float(v) for v in arr if not (math.isfinite(v) and v > 0)]
        if bad:
            raise FitError(f"{hyperparameter}: {axis} values {bad} must be finite and > 0")
        cols.append(np.log(arr))
        extra_t[axis] = tuple(float(v) for v in arr)
    X = np.column_stack(cols)
    p = X.shape[1]
    if np.linalg.matrix_rank(X) < p:
        raise FitError(f"{hyperparameter}: {p - 1} scale axes {['width', *axes]} cannot be "
                       f"identified from {n} sizes (the log-sizes are collinear or too few; "
                       f"need ≥ {p} sizes varying independently along every axis)")
    return X, axes, extra_t


def _sigma(hyperparameter: str, optima_intervals: Any, n: int) -> np.ndarray | None:
    """Log-unit standard deviation of each optimum from its 95 % interval (None without)."""
    if optima_intervals is None:
        return None
    iv = np.asarray(optima_intervals, dtype=float)
    if iv.shape != (n, 2):
        raise FitError(f"{hyperparameter}: optima_intervals shape {iv.shape} must be "
                       f"({n}, 2)")
    if not (np.all(np.isfinite(iv)) and np.all(iv > 0) and np.all(iv[:, 0] <= iv[:, 1])):
        raise FitError(f"{hyperparameter}: optima_intervals {iv.tolist()} must be finite, "
                       "> 0 and lo ≤ hi")
    sigma: np.ndarray = (np.log(iv[:, 1]) - np.log(iv[:, 0])) / (2 * _Z975)
    return sigma


def fit_transfer_rule(hyperparameter: str, scales: Sequence[float] | np.ndarray,
                      optima: Sequence[float] | np.ndarray, *,
                      extra_scales: Mapping[str, Sequence[float]] | None = None,
                      optima_intervals: Sequence[tuple[float, float]] | None = None,
                      n_boot: int = 1000, seed: int = 0, robust: bool = True
                      ) -> TransferRule:
    """Fit log h*(s) = a + Σ_k b_k·log s_k robustly, with 95 % bootstrap-t intervals.

    Args:
        scales: proxy widths, shape (n_sizes,), positive.
        optima: optimal value per size, shape (n_sizes,), in the hyperparameter's unit.
        extra_scales: axis name → sizes along it (depth, batch, tokens, steps), shape (n_sizes,).
        optima_intervals: per-size 95 % interval (lo, hi) of each optimum, shape (n_sizes, 2).
    Raises:
        FitError: shapes differ; a non-finite or non-positive scale or optimum; fewer than 2
            distinct widths; a rank-deficient design; a bad optimum interval.
        ValueError: n_boot < 50."""
    s, h = _checked_optima(hyperparameter, scales, optima, n_boot)
    n = s.size
    X, axes, extra_t = _design(hyperparameter, s, extra_scales)
    p = X.shape[1]
    sigma = _sigma(hyperparameter, optima_intervals, n)
    reg = _regress(X, np.log(h), sigma, n_boot=n_boot, seed=seed, robust=robust)
    names = (WIDTH, *axes)
    coefs = {a: float(reg.beta[i + 1]) for i, a in enumerate(names)}
    intervals = {a: reg.interval(np.eye(p)[i + 1]) for i, a in enumerate(names)}
    resid = np.log(h) - X @ reg.beta
    dof = n - p
    res_scale = float(np.sqrt(np.sum(resid ** 2) / dof)) if dof > 0 else 0.0
    rule = TransferRule(hyperparameter, float(reg.beta[0]), coefs[WIDTH],
                        tuple(float(v) for v in s), tuple(float(v) for v in h), names, extra_t,
                        coefs, intervals, reg.interval(np.eye(p)[0]), intervals[WIDTH],
                        res_scale, math.sqrt(reg.tau2), int(reg.draw_beta.shape[0]), reg)
    return rule
