"""Transfer-rule fits with intervals: Monte-Carlo coverage, extra axes, degenerate inputs."""
import math

import numpy as np
import pytest
from scipy.stats import binom

from mutune.errors import FitError
from mutune.scaling import fit_transfer_rule

WIDTHS = np.array([64.0, 128.0, 256.0, 512.0, 1024.0])
N_DRAWS = 200
# Acceptance band for the number of 95 % intervals covering the truth in 200 independent draws:
# [binom.ppf(0.0005), binom.ppf(0.9995)] of Binomial(200, 0.95) = [179, 198]; a correct 95 %
# interval lands outside it with probability ≈ 0.1 % (P(X < 179) ≈ 0.0005, P(X > 198) ≈ 0.0004).
# The draws are seeded, so the test is deterministic.
BAND = (int(binom.ppf(0.0005, N_DRAWS, 0.95)), int(binom.ppf(0.9995, N_DRAWS, 0.95)))


def _coverage(b_true: float, seed: int, *, with_intervals: bool) -> int:
    rng = np.random.default_rng(seed)
    sigma = 0.3                                    # lognormal noise of the optima, log units
    covered = 0
    for draw in range(N_DRAWS):
        log_opt = -6.0 + b_true * np.log(WIDTHS) + rng.normal(0.0, sigma, WIDTHS.size)
        iv = None
        if with_intervals:                         # each optimum's own 95 % interval
            iv = np.exp(np.column_stack([log_opt - 1.96 * sigma, log_opt + 1.96 * sigma]))
        rule = fit_transfer_rule("lr", WIDTHS, np.exp(log_opt), optima_intervals=iv,
                                 n_boot=200, seed=draw)
        lo, hi = rule.slope_interval
        covered += lo <= b_true <= hi
    return covered


@pytest.mark.parametrize("b_true, seed", [(-0.5, 11), (0.0, 12)])
def test_slope_interval_coverage_is_95_percent(b_true, seed):
    covered = _coverage(b_true, seed, with_intervals=False)
    print(f"b = {b_true}: {covered}/{N_DRAWS} covered, band {BAND}")
    assert BAND[0] <= covered <= BAND[1], (covered, BAND)


def test_slope_interval_coverage_with_optimum_intervals():
    covered = _coverage(-0.5, 13, with_intervals=True)
    print(f"with optima intervals: {covered}/{N_DRAWS} covered, band {BAND}")
    assert BAND[0] <= covered <= BAND[1], (covered, BAND)


def test_extra_axes_are_recovered_and_predicted():
    rng = np.random.default_rng(0)
    width = np.array([64, 128, 256, 64, 128, 256, 512, 512], dtype=float)
    depth = np.array([2, 2, 2, 4, 4, 4, 8, 2], dtype=float)
    log_opt = -5.0 - 0.1 * np.log(width) - 0.5 * np.log(depth) + rng.normal(0, 0.01, 8)
    rule = fit_transfer_rule("lr", width, np.exp(log_opt), extra_scales={"depth": depth},
                             n_boot=200)
    assert rule.axes == ("width", "depth")
    assert rule.coefficients["depth"] == pytest.approx(-0.5, abs=0.05)
    assert rule.slope == pytest.approx(-0.1, abs=0.05)
    lo, hi = rule.intervals["depth"]
    assert lo <= -0.5 <= hi
    pred = rule.predict(2048, depth=16)
    assert pred == pytest.approx(math.exp(-5.0 - 0.1 * math.log(2048) - 0.5 * math.log(16)),
                                 rel=0.15)
    plo, phi = rule.prediction_interval(2048, depth=16)
    assert plo < pred < phi
    assert "log depth" in rule.formula
    # each coefficient's sign joins its term (no "+ -")
    assert f"− {abs(rule.coefficients['depth']):.4g}·log depth" in rule.formula
    assert "+ -" not in rule.formula and rule.formula.count("−") == 2
    with pytest.raises(ValueError, match="missing"):
        rule.predict(2048)


def test_robust_fit_shrugs_off_an_outlier():
    log_opt = np.full(6, -7.0)
    log_opt[2] += 2.0                              # one sweep's optimum is way off
    widths = np.array([32, 64, 128, 256, 512, 1024.0])
    robust = fit_transfer_rule("lr", widths, np.exp(log_opt), n_boot=100)
    plain = fit_transfer_rule("lr", widths, np.exp(log_opt), n_boot=100, robust=False)
    assert abs(robust.slope) < abs(plain.slope)


def test_two_sizes_fit_but_have_no_interval():
    rule = fit_transfer_rule("lr", [64, 128], [1e-3, 2e-3])
    assert rule.slope == pytest.approx(1.0)
    assert all(math.isnan(v) for v in rule.slope_interval)
    assert rule.residual_scale == 0.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(scales=[64, 64, 64], optima=[1e-3, 2e-3, 3e-3]), "at least 2 distinct scales"),
    (dict(scales=[64, 128, 256], optima=[math.nan] * 3), "all 3 optima are non-finite"),
    (dict(scales=[64, 128, 256], optima=[1e-3, 2e-3]), "shape"),
    (dict(scales=[64, 128, 256], optima=[1e-3, 2e-3, 3e-3],
          extra_scales={"depth": [2, 4, 8]}), "cannot be identified"),
    (dict(scales=[64, 128, 256], optima=[1e-3, 2e-3, 3e-3],
          extra_scales={"depth": [2, 4]}), "shape"),
    (dict(scales=[64, 128, 256], optima=[1e-3, 2e-3, 3e-3],
          optima_intervals=[(1e-3, 2e-3)] * 2), "optima_intervals shape"),
])
def test_degenerate_inputs_raise_fit_error(kwargs, match):
    with pytest.raises(FitError, match=match):
        fit_transfer_rule("lr", **kwargs)
