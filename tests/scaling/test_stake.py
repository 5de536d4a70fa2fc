"""The loss at stake: a proxy's fitted quadratic prices a transferred value's uncertainty, and
the verdict of a μP rule whose slope interval contains 0 rests on it (synthetic surfaces)."""
import math

import numpy as np
import pytest

from mutune.scaling import TransferRule, estimate_optimum, rule_verdict
from mutune.scaling.stake import loss_at_stake

LOSS = 2.0          # nats at the optimum
OPT = math.log(3e-3)


def _surface_fit(curvature: float, seed: int = 0):
    """estimate_optimum on 40 trials of L = 2 + ½·c·(log lr − log 3e-3)² + 0.01 % noise."""
    rng = np.random.default_rng(seed)
    log_h = rng.uniform(OPT - 3, OPT + 3, size=(40, 1))
    y = LOSS + 0.5 * curvature * (log_h[:, 0] - OPT) ** 2 + rng.normal(0, 2e-4, 40)
    return estimate_optimum(log_h, y, names=["lr"], n_boot=0, region=None)


def _rule(interval):
    widths = tuple(16.0 * 2 ** k for k in range(3))
    return TransferRule("lr", OPT, sum(interval) / 2, widths, (3e-3,) * 3,
                        slope_interval=interval, residual_scale=0.1)


@pytest.mark.parametrize("curvature", [0.05, 0.4])
def test_the_fitted_quadratic_recovers_the_surfaces_curvature_and_loss(curvature):
    opt = _surface_fit(curvature)
    assert opt.curvature["lr"] == pytest.approx(curvature, rel=0.15)
    assert opt.fitted_value == pytest.approx(LOSS, abs=0.01)
    assert opt.center["lr"] == pytest.approx(OPT, abs=0.3)


def _verdict(curvature, slope_interval, miss=math.log(4)):
    """A rule transferred from width 64 to 512 whose target optimum may lie ×4 either way."""
    opt = _surface_fit(curvature)
    value = math.exp(opt.center["lr"])
    stake = loss_at_stake("lr", value, (value / math.exp(miss), value * math.exp(miss)),
                          curvature=opt.curvature["lr"], loss=opt.fitted_value,
                          source="width 64's loss surface")
    return stake, rule_verdict(_rule(slope_interval), parametrization="mup", stake=stake,
                               loss_tolerance=0.005)


def test_a_flat_direction_is_healthy_however_vague_its_optimum():
    # slope interval ±0.6 (6× the slope tolerance's limit), but a miss of ×4 costs
    # ½·0.005·ln(4)² ≈ 0.0048 nats = 0.24 % of the loss
    stake, v = _verdict(0.005, (-0.6, 0.6))
    assert stake.relative < 0.005
    assert v.name == "stable" and "within loss_tolerance 0.5 %" in v.reason
    assert rule_verdict(_rule((-0.6, 0.6)), parametrization="mup").name == "noisy"


def test_a_steep_uncertain_direction_is_noisy_and_says_what_is_at_stake():
    stake, v = _verdict(0.4, (-0.6, 0.6))
    assert stake.relative == pytest.approx(0.5 * 0.4 * math.log(4) ** 2 / LOSS, rel=0.2)
    assert v.name == "noisy" and "over loss_tolerance" in v.reason
    assert f"{100 * stake.relative:.2g} % of the loss" in v.reason


def test_a_slope_that_excludes_zero_is_drift_even_on_a_flat_surface():
    stake, v = _verdict(0.005, (0.05, 0.7))
    assert v.name == "drifting" and "excludes 0" in v.reason and "extrapolated" in v.reason
    _, v = _verdict(0.4, (-0.9, -0.1))
    assert v.name == "drifting"


def test_the_miss_is_the_farthest_interval_end():
    s = loss_at_stake("lr", 1e-3, (5e-4, 4e-3), curvature=0.2, loss=2.0, source="s")
    assert s.log_distance == pytest.approx(math.log(4))
    assert s.absolute == pytest.approx(0.1 * math.log(4) ** 2)
    assert s.relative == pytest.approx(s.absolute / 2.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(value=0.0), "value = 0.0"),
    (dict(interval=(2e-3, 1e-3)), "low > high"),
    (dict(curvature=-1.0), "curvature = -1.0"),
    (dict(loss=math.nan), "loss = nan"),
])
def test_bad_arguments_name_the_value(kwargs, match):
    args = dict(value=1e-3, interval=(5e-4, 2e-3), curvature=0.2, loss=2.0, source="s")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        loss_at_stake("lr", **args)
