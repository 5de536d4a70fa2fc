"""Transfer-rule fits and ledger arithmetic against hand-computed cases."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import FitError
from mutune.scaling import ettr, fit_transfer_rule, gpu_hours, naive_sweep_estimate


@settings(deadline=None)
@given(a=st.floats(-8, 2), b=st.floats(-1.5, 1.5))
def test_fit_recovers_a_known_power_law(a, b):
    widths = [64, 128, 256, 512]
    optima = [math.exp(a + b * math.log(w)) for w in widths]
    rule = fit_transfer_rule("lr", widths, optima)
    assert rule.slope == pytest.approx(b, abs=1e-9)
    assert rule.intercept == pytest.approx(a, abs=1e-8)
    assert rule.predict(4096) == pytest.approx(math.exp(a + b * math.log(4096)), rel=1e-8)


def test_fit_errors_say_why():
    with pytest.raises(FitError, match="at least 2 distinct scales"):
        fit_transfer_rule("lr", [64, 64], [1e-3, 2e-3])
    with pytest.raises(FitError, match=r"optimum values \[nan\]"):
        fit_transfer_rule("lr", [64, 128], [1e-3, float("nan")])
    with pytest.raises(FitError, match="shape"):
        fit_transfer_rule("lr", [64, 128, 256], [1e-3, 2e-3])


def test_gpu_hours_and_ettr_by_hand():
    assert gpu_hours(7200, 2) == 4.0
    assert ettr(900, 1200) == 0.75
    assert ettr(0, 0) is None
    with pytest.raises(ValueError, match="allocated_s = -1.0"):
        gpu_hours(-1, 1)


def test_naive_estimate_by_hand():
    # 3 trials: 20, 60, 180 steps; 2, 6, 18 evals; 0.5 s/step, 0.25 s/eval, 10 s overhead
    est = naive_sweep_estimate([20, 60, 180], [2, 6, 18], s_per_step=0.5, s_per_eval=0.25,
                               overhead_s_per_trial=10, devices=2)
    seconds = 260 * 0.5 + 26 * 0.25 + 3 * 10
    assert est.seconds == pytest.approx(seconds)
    assert est.gpu_hours == pytest.approx(seconds * 2 / 3600)
    assert "260 × 0.5 s" in est.formula and "3 × 10 s" in est.formula
    assert est.inputs["trials"] == 3
