"""Short-horizon bias: lr*(T) across rungs, extrapolated to the target's steps."""
import math

import numpy as np
import pytest

from mutune.errors import FitError
from mutune.scaling import fit_horizon


def test_extrapolates_a_known_power_law():
    steps = np.array([20, 60, 180, 540.0])
    log_lr = -4.0 - 0.3 * np.log(steps)                   # short horizons favour large lr
    fit = fit_horizon(steps, log_lr, target_steps=4860, n_boot=100)
    assert fit.exponent == pytest.approx(-0.3, abs=1e-9)
    assert fit.extrapolated_log_lr == pytest.approx(-4.0 - 0.3 * math.log(4860), abs=1e-8)
    assert fit.highest_rung_steps == 540 and fit.highest_rung_log_lr == log_lr[-1]
    assert fit.extrapolated_lr < fit.highest_rung_lr


def test_noisy_rungs_with_intervals_cover_the_truth():
    rng = np.random.default_rng(5)
    steps = np.array([10, 30, 90, 270, 810.0])
    log_lr = -4.0 - 0.3 * np.log(steps) + rng.normal(0, 0.05, 5)
    iv = np.column_stack([log_lr - 0.1, log_lr + 0.1])
    fit = fit_horizon(steps, log_lr, target_steps=5000, intervals=iv, n_boot=300)
    lo, hi = fit.exponent_interval
    assert lo <= -0.3 <= hi
    lo, hi = fit.extrapolated_interval
    assert lo <= -4.0 - 0.3 * math.log(5000) <= hi


def test_two_rungs_fit_and_one_rung_raises():
    fit = fit_horizon([100, 300], [-6.0, -6.5], target_steps=900, n_boot=100)
    assert fit.extrapolated_log_lr == pytest.approx(-7.0)
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_horizon([100], [-6.0], target_steps=900)
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_horizon([100, 100], [-6.0, -6.2], target_steps=900)
    with pytest.raises(ValueError, match="target_steps = 0"):
        fit_horizon([100, 300], [-6.0, -6.5], target_steps=0)
