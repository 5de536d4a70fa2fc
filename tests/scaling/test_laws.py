"""Loss scaling law L(N) = E + A·N^-α: recovery, intervals, the power-law fallback, errors."""
import math

import numpy as np
import pytest

from mutune.errors import FitError
from mutune.scaling import fit_loss_law

N = np.array([1e4, 3e4, 1e5, 3e5, 1e6, 3e6])
E, A, ALPHA = 1.7, 400.0, 0.34


def _law(n):
    return E + A * n ** -ALPHA


def test_exact_data_recovers_e_a_alpha():
    law = fit_loss_law(N, _law(N), n_boot=50)
    assert law.identifiable and law.form == "E + A·N^-alpha"
    assert law.E == pytest.approx(E, rel=1e-6)
    assert law.A == pytest.approx(A, rel=1e-6)
    assert law.alpha == pytest.approx(ALPHA, rel=1e-6)
    assert law.predict(1e8) == pytest.approx(_law(1e8), rel=1e-6)


def test_noisy_data_intervals_cover_the_truth():
    rng = np.random.default_rng(3)
    losses = _law(N) * np.exp(rng.normal(0, 0.01, N.size))
    law = fit_loss_law(N, losses, n_boot=100, seed=1)
    assert law.identifiable
    for name, true in (("E", E), ("A", A), ("alpha", ALPHA)):
        lo, hi = law.intervals[name]
        assert lo <= true <= hi, (name, lo, hi)
    lo, hi = law.predict_interval(1e7)
    assert lo < _law(1e7) < hi
    lo2, hi2 = law.predict_interval(1e7, include_noise=False)
    assert hi2 - lo2 <= hi - lo


def test_three_sizes_are_not_identifiable_and_fall_back_to_a_power_law():
    n3 = np.array([1e4, 1e5, 1e6])
    losses = 300.0 * n3 ** -0.3 * np.array([1.0, 1.01, 0.99])
    law = fit_loss_law(n3, losses, n_boot=100)
    assert not law.identifiable and law.form == "A·N^-alpha" and law.E == 0.0
    assert law.alpha == pytest.approx(0.3, abs=0.02)
    lo, hi = law.predict_interval(1e7)
    assert lo < law.predict(1e7) < hi


@pytest.mark.parametrize("sizes, losses, match", [
    ([1e4, 1e5], [3.0, 2.0], "at least 3 distinct sizes"),
    ([1e4, 1e5, 1e6], [3.0, math.nan, 2.0], r"losses \[nan\]"),
    ([1e4, -1, 1e6], [3.0, 2.5, 2.0], r"sizes \[-1.0\]"),
    ([1e4, 1e5, 1e6], [3.0, 2.5], "shape"),
])
def test_bad_inputs_raise_fit_error(sizes, losses, match):
    with pytest.raises(FitError, match=match):
        fit_loss_law(sizes, losses, n_boot=10)
