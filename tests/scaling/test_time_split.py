"""Ledger arithmetic against hand-computed cases: every partition adds up to what was allocated."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.scaling.time_split import (TIME_CATEGORIES, WASTE_CATEGORIES, mfu, model_flops_per_step,
                                   money, sweep_waste, trial_time)


def test_trial_time_by_hand():
    t = trial_time({"allocated_s": 100.0, "productive_s": 60.0, "eval_s": 10.0,
                    "checkpoint_s": 5.0, "setup_s": 4.0, "recovery_s": 11.0})
    assert t.seconds == {"productive": 60.0, "eval": 10.0, "checkpoint": 5.0, "setup": 4.0,
                         "recovery": 11.0, "other": 10.0}
    assert tuple(t.seconds) == TIME_CATEGORIES
    assert t.allocated_s == 100.0 and t.clock_skew_s == 0.0
    assert t.gpu_hours(2)["productive"] == pytest.approx(60 * 2 / 3600)


def test_worker_clock_above_driver_clock_raises_allocation_not_a_negative_category():
    t = trial_time({"allocated_s": 10.0, "productive_s": 9.5, "eval_s": 0.6})
    assert t.seconds["other"] == 0.0
    assert t.allocated_s == pytest.approx(10.1) and t.clock_skew_s == pytest.approx(0.1)


@pytest.mark.parametrize("bad, name", [({"allocated_s": -1.0}, "allocated_s"),
                                       ({"allocated_s": 1.0, "eval_s": math.nan}, "eval_s"),
                                       ({"allocated_s": math.inf}, "allocated_s")])
def test_bad_timing_names_the_figure(bad, name):
    with pytest.raises(ValueError, match=f"^{name} = "):
        trial_time(bad)


def test_sweep_waste_by_hand():
    trials = [
        # completed on 1 device: 80 useful (70 + 5 + 5), 10 recovery, 10 other → idle
        ("completed", {"allocated_s": 100.0, "productive_s": 70.0, "eval_s": 5.0,
                       "setup_s": 5.0, "recovery_s": 10.0}, 1.0),
        # stopped on 2 devices: all 2 × 30 is early-stopped waste
        ("stopped", {"allocated_s": 30.0, "productive_s": 20.0, "eval_s": 2.0}, 2.0),
        # diverged on half a device, 4 s of it a restart: 0.5 × 16 diverged, 0.5 × 4 recovery
        ("diverged", {"allocated_s": 20.0, "productive_s": 10.0, "recovery_s": 4.0}, 0.5),
    ]
    w = sweep_waste(trials, held_device_s=200.0)
    # trials hold 100 + 60 + 10 = 170 device-seconds; the sweep held 200 → 30 idle between
    assert w.allocated_s == 200.0
    assert w.waste_s == {"early_stopped": 60.0, "failed": 0.0, "diverged": 8.0,
                         "recovery": 12.0, "idle": 40.0}
    assert w.useful_s == 80.0
    assert w.useful_s + sum(w.waste_s.values()) == w.allocated_s
    assert tuple(w.waste_s) == WASTE_CATEGORIES
    assert w.waste_gpu_hours["idle"] == pytest.approx(40 / 3600)
    # without a wall figure the sweep is the sum of its trials
    assert sweep_waste(trials).allocated_s == 170.0


def test_sweep_waste_refuses_bad_input():
    with pytest.raises(ValueError, match="status = 'paused'"):
        sweep_waste([("paused", {"allocated_s": 1.0}, 1.0)])
    with pytest.raises(ValueError, match="held_device_s"):
        sweep_waste([("completed", {"allocated_s": 100.0}, 1.0)], held_device_s=50.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["completed", "stopped", "failed", "diverged"]),
                          st.lists(st.floats(0, 1e4), min_size=6, max_size=6),
                          st.floats(0, 8)), max_size=20),
       st.floats(0, 1e5))
def test_every_partition_adds_up(rows, extra):
    trials = [(s, dict(zip(("allocated_s", "productive_s", "eval_s", "checkpoint_s",
                            "setup_s", "recovery_s"), v)), d) for s, v, d in rows]
    for _, timing, _ in trials:
        t = trial_time(timing)
        assert all(v >= 0 for v in t.seconds.values())
        assert sum(t.seconds.values()) == pytest.approx(t.allocated_s, rel=1e-9, abs=1e-9)
    base = sweep_waste(trials)
    w = sweep_waste(trials, held_device_s=base.allocated_s + extra)
    assert all(v >= -1e-9 for v in w.waste_s.values()) and w.useful_s >= -1e-9
    assert w.useful_s + sum(w.waste_s.values()) == pytest.approx(w.allocated_s, rel=1e-9,
                                                                 abs=1e-6)


def test_flops_mfu_and_money_by_hand():
    # MLP: 6 · 1e6 params · 64 samples
    assert model_flops_per_step(1e6, 64) == 6 * 1e6 * 64
    # decoder: 8 × 128 tokens × (6·1e7 + 6 · 4 layers · 128 ctx · 256 d_model)
    assert model_flops_per_step(1e7, 8 * 128, n_layer=4, n_ctx=128, d_model=256) == \
        8 * 128 * (6e7 + 6 * 4 * 128 * 256)
    # 1e12 FLOPs/step × 10 steps in 20 s on 2 devices of 1e12 peak: 0.5e12 / 2e12 = 0.25
    assert mfu(1e12, 10, 20.0, 2, 1e12) == pytest.approx(0.25)
    assert mfu(1e12, 10, 20.0, 2, None) is None and mfu(1e12, 0, 0.0, 2, 1e12) is None
    assert money(3.0, 2.5) == 7.5 and money(3.0, None) is None
    with pytest.raises(ValueError, match="price_per_device_hour"):
        money(1.0, -2.0)
