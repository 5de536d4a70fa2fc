"""Optimum per proxy sweep: a quadratic bowl is recovered; edges, NaNs and flat curves."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import FitError
from mutune.scaling import Neighbourhood, estimate_optimum


@settings(deadline=None, max_examples=25)
@given(c1=st.floats(-8.0, -4.0), curv=st.floats(0.02, 0.5), seed=st.integers(0, 2**16))
def test_one_dimensional_bowl_is_recovered(c1, curv, seed):
    rng = np.random.default_rng(seed)
    grid = np.linspace(-10.0, -2.0, 17)                        # log lr, 2 seeds each
    X = np.repeat(grid, 2)[:, None]
    y = 0.3 + curv * (X[:, 0] - c1) ** 2 + rng.normal(0, 0.002, X.shape[0])
    opt = estimate_optimum(X, y, names=["lr"], groups=np.tile([0, 1], grid.size), n_boot=30,
                           seed=seed)
    assert opt.method == "quadratic"
    assert opt.center["lr"] == pytest.approx(c1, abs=0.15)
    assert opt.value("lr") == pytest.approx(math.exp(opt.center["lr"]))
    assert not opt.on_edge["lr"]


@settings(deadline=None, max_examples=20)
@given(c1=st.floats(-1.5, 1.5), c2=st.floats(-1.5, 1.5), rho=st.floats(-0.5, 0.5),
       seed=st.integers(0, 2**16))
def test_two_dimensional_bowl_is_recovered(c1, c2, rho, seed):
    rng = np.random.default_rng(seed)
    g = np.linspace(-3.0, 3.0, 9)
    X = np.array([(a, b) for a in g for b in g])
    d = X - [c1, c2]
    y = d[:, 0] ** 2 + 2 * d[:, 1] ** 2 + 2 * rho * d[:, 0] * d[:, 1] \
        + rng.normal(0, 0.001, len(X))
    opt = estimate_optimum(X, y, names=["lr", "init"], n_boot=20, seed=seed,
                           region=Neighbourhood(n_best=12))
    assert opt.method == "quadratic"
    assert opt.center["lr"] == pytest.approx(c1, abs=0.2)
    assert opt.center["init"] == pytest.approx(c2, abs=0.2)


def test_interval_covers_centre_and_mode_max():
    rng = np.random.default_rng(0)
    X = rng.uniform(-9, -3, (40, 1))
    acc = 0.9 - 0.02 * (X[:, 0] + 6.0) ** 2 + rng.normal(0, 0.005, 40)
    opt = estimate_optimum(X, acc, names=["lr"], mode="max", n_boot=200)
    lo, hi = opt.interval["lr"]
    assert lo <= opt.center["lr"] <= hi and lo <= -6.0 <= hi
    assert opt.n_boot_used > 150


def test_optimum_at_the_edge_is_flagged_with_its_side():
    grid = np.linspace(-8.0, -4.0, 9)[:, None]
    y = 0.1 * (grid[:, 0] + 3.0) ** 2                        # true optimum above the range
    opt = estimate_optimum(grid, y, names=["lr"], n_boot=0)
    assert opt.on_edge["lr"] and opt.edge_side["lr"] == "high"
    opt = estimate_optimum(grid, y[::-1], names=["lr"], n_boot=0)
    assert opt.on_edge["lr"] and opt.edge_side["lr"] == "low"
    inside = estimate_optimum(grid, 0.1 * (grid[:, 0] + 6.0) ** 2, names=["lr"], n_boot=0,
                              region=Neighbourhood(bounds=[(-8.0, -4.0)]))
    assert not inside.on_edge["lr"] and inside.edge_side["lr"] is None


def test_a_clipped_optimum_is_flagged_edge_even_far_from_the_searched_bounds():
    """The quickstart case: the quadratic's minimum lies beyond the fitted trials, so the
    centre is clipped to their box — the optimum then equals the top of its own data and must
    be flagged, however wide the searched range passed as ``bounds`` is."""
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.uniform(-8, -4, 30), rng.uniform(-2, 2, 30)])
    y = 0.1 * (X[:, 0] + 6.0) ** 2 + 0.05 * (X[:, 1] - 4.0) ** 2     # om* = 4, beyond 2
    opt = estimate_optimum(X, y, names=["lr", "om"], n_boot=0,
                           region=Neighbourhood(bounds=[(-12.0, 0.0), (-6.0, 6.0)]))
    assert opt.clipped["om"] and not opt.clipped["lr"]
    assert opt.on_edge["om"] and opt.edge_side["om"] == "high"
    assert not opt.on_edge["lr"]
    assert opt.center["om"] <= X[:, 1].max() + 1e-12     # clipped to the data, and said so


def test_non_positive_definite_curvature_falls_back_to_weighted_mean():
    X = np.linspace(-8.0, -4.0, 9)[:, None]
    y = -0.1 * (X[:, 0] + 9.0) ** 2                          # concave: the quadratic has no min
    opt = estimate_optimum(X, y, names=["lr"], n_boot=0, region=Neighbourhood(n_best=3))
    assert opt.method == "weighted-mean"
    # weights (y_worst − y_i)/(y_worst − y_best) over the 3 best points −4, −4.5, −5
    w = (y[6] - y[[8, 7, 6]]) / (y[6] - y[8])
    assert opt.center["lr"] == pytest.approx(float(w @ X[[8, 7, 6], 0] / w.sum()))
    assert opt.on_edge["lr"] and opt.edge_side["lr"] == "high"


def test_non_finite_values_are_dropped_and_counted():
    X = np.linspace(-8.0, -2.0, 13)[:, None]
    y = 0.05 * (X[:, 0] + 6.0) ** 2
    y[-3:] = np.nan                                          # diverged at large lr
    y[0] = np.inf
    opt = estimate_optimum(X, y, names=["lr"], n_boot=0)
    assert opt.n_dropped == 4 and opt.n_used == 9
    assert opt.center["lr"] == pytest.approx(-6.0, abs=1e-6)


@pytest.mark.parametrize("values, match", [
    ([math.nan] * 9, r"0 finite trials \(9 non-finite dropped of 9\)"),
    ([0.5, math.nan, 0.4] + [math.nan] * 6, "2 finite trials"),
    ([0.7] * 9, "flat: all 9 finite values equal"),
])
def test_degenerate_sweeps_raise_fit_error_with_the_reason(values, match):
    X = np.linspace(-8.0, -4.0, 9)[:, None]
    with pytest.raises(FitError, match=match):
        estimate_optimum(X, np.array(values), names=["lr"], n_boot=0)


def test_argument_errors():
    X = np.linspace(-8.0, -4.0, 9)[:, None]
    with pytest.raises(ValueError, match="names"):
        estimate_optimum(X, np.ones(9), names=["lr", "wd"])
    with pytest.raises(ValueError, match="mode"):
        estimate_optimum(X, np.arange(9.0), names=["lr"], mode="best")
    with pytest.raises(FitError, match="single value"):
        estimate_optimum(np.full((9, 1), -6.0), np.arange(9.0), names=["lr"])


@settings(deadline=None, max_examples=50)
@given(rows=st.integers(1, 30), cols=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_repeated_points_are_grouped_as_numpy_unique_groups_them(rows, cols, seed):
    """The bootstrap's fast grouping of repeated points (seeds of one configuration) gives
    numpy.unique's rows, order and inverse exactly."""
    from mutune.scaling.optimum import _unique_rows

    X = np.random.default_rng(seed).integers(0, 4, (rows, cols)) * 0.5 - 3.0
    want, inverse = np.unique(X, axis=0, return_inverse=True)
    got, got_inverse = _unique_rows(X)
    assert np.array_equal(got, want) and np.array_equal(got_inverse, inverse.reshape(-1))
