"""Checkpoint cadence and spot economics (mutune.scaling.spot; Young 1974), and the trial-side
``checkpoint_every: auto`` rule (mutune.search.trial.cadence)."""
from __future__ import annotations

import math
import time

import pytest

from mutune.scaling.spot import spot_economics, spot_overhead_s, young_interval_s
from mutune.search.trial.cadence import Cadence


def test_youngs_interval_and_its_floor():
    assert young_interval_s(2.0, 3600.0) == pytest.approx(math.sqrt(2 * 2 * 3600))   # 120 s
    assert young_interval_s(2.0, 3600.0, min_interval_s=300.0) == 300.0
    for bad in (dict(checkpoint_s=0.0, mtbp_s=1.0), dict(checkpoint_s=1.0, mtbp_s=-1.0),
                dict(checkpoint_s=1.0, mtbp_s=float("nan"))):
        with pytest.raises(ValueError):
            young_interval_s(**bad)


def test_youngs_interval_minimises_the_first_order_waste():
    c, m, t = 5.0, 7200.0, 36000.0
    tau = young_interval_s(c, m)
    waste = lambda x: spot_overhead_s(t, checkpoint_s=c, mtbp_s=m, restart_s=0.0,  # noqa
                                      interval_s=x)
    assert waste(tau) < waste(tau * 0.7) and waste(tau) < waste(tau * 1.4)


def test_short_trials_lose_the_spot_discount_to_restarts():
    kw = dict(checkpoint_s=1.0, restore_s=1.0, mtbp_s=1800.0, restart_s=180.0,
              min_interval_s=0.0, spot_price=1.0, on_demand_price=3.0)
    long = spot_economics(4 * 3600.0, **kw)
    assert long["spot_pays"] is True and long["overhead_fraction"] < 0.2
    assert long["interval_s"] == pytest.approx(60.0)
    assert long["expected_lost_s_per_hard_preemption"] == pytest.approx(30.0)
    assert long["recovery_s_per_preemption"] == 181.0
    # 2-minute trials preempted every minute: each preemption pays the 3-minute restart
    short = spot_economics(120.0, **{**kw, "mtbp_s": 60.0})
    assert short["spot_pays"] is False and short["overhead_fraction"] > 2
    assert spot_economics(600.0, **{**kw, "spot_price": None})["spot_pays"] is None


def test_cadence_every_n_steps_and_auto():
    c = Cadence(6, start_step=0)
    assert [s for s in range(1, 25) if c.due(s) and (c.wrote(s, 0.01) or True)] == [6, 12,
                                                                                     18, 24]
    assert not Cadence(0, start_step=0).due(100)
    with pytest.raises(ValueError, match="mtbp_s"):
        Cadence("auto", start_step=0)
    auto = Cadence("auto", start_step=0, spot={"mtbp_s": 0.02})
    assert auto.due(1)                            # the first evaluation measures C
    auto.wrote(1, 0.0001)
    tau = auto.interval_s()                       # √(2 · 1e-4 · 0.02) = 2 ms
    assert tau == pytest.approx(0.002)
    time.sleep(0.005)
    assert auto.due(2)
    floored = Cadence("auto", start_step=0, spot={"mtbp_s": 0.02,
                                                  "checkpoint_min_interval_s": 60})
    floored.wrote(1, 0.0001)
    assert floored.interval_s() == 60 and not floored.due(2)


def test_cadence_holds_checkpoints_back_to_a_share_of_the_time():
    # a 0.05 s checkpoint at a 0.5 share may come 0.1 s after the last one at the earliest
    c = Cadence(2, start_step=0, max_share=0.5)
    assert c.due(2)                               # the first one measures its seconds
    c.wrote(2, 0.05)
    assert not c.due(3) and not c.due(4)          # steps due, but only ~0 s since
    time.sleep(0.12)
    assert c.due(4) and not c.due(3)              # the step rule still holds too
    exact = Cadence(2, start_step=0)              # no share: every interval, however slow
    exact.wrote(2, 10.0)
    assert exact.due(4)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="max_share"):
            Cadence(2, start_step=0, max_share=bad)


def test_a_run_that_saves_its_final_model_skips_a_checkpoint_within_one_interval_of_it():
    # every 20 steps, the final model saved at 200: nothing periodic at 190 (10 steps before)
    c = Cadence(20, start_step=0, max_share=1.0, final_step=200)
    assert c.due(20) and c.due(180) and not c.due(181) and not c.due(190)
    c.wrote(180, 0.0)
    assert not c.due(199)
    short = Cadence(10, start_step=0, max_share=0.05, final_step=15)
    assert not short.due(10)        # a run under two intervals: its final save only
    # without a share the interval is kept exactly, final save or not
    exact = Cadence(20, start_step=0, final_step=200)
    assert exact.due(190)
