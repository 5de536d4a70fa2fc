"""What a sweep holds and why its held device-seconds went idle (mutune.scaling.idle): the
fractional-GPU packing bound, held devices from a cluster's resources, and the idle causes
of a synthetic timeline whose answer is known."""
from __future__ import annotations

import pytest

from mutune.scaling.idle import IDLE_CAUSES, Interval, held_devices, idle_breakdown, \
    trials_per_device


@pytest.mark.parametrize("fraction, n", [(0.125, 8), (0.3, 3), (0.5, 2), (1 / 3, 3),
                                         (0.7, 1), (1.0, 1), (2.0, 1)])
def test_at_most_floor_one_over_fraction_trials_share_a_card(fraction, n):
    assert trials_per_device(fraction) == n


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf")])
def test_a_fraction_must_be_positive_and_finite(bad):
    with pytest.raises(ValueError, match="fraction"):
        trials_per_device(bad)


def test_held_devices_come_from_the_clusters_cpus_and_gpus():
    kw = dict(cpus_per_trial=1, max_concurrent=None, num_cpus=2)
    # CPU trials on the config's 2 CPUs (no cluster seen), and on a 16-CPU cluster
    assert held_devices(None, gpus_per_trial=0, **kw).slots == 2
    h = held_devices({"CPU": 16.0}, gpus_per_trial=0, **kw)
    assert (h.slots, h.devices, h.kind) == (16, 16.0, "cpu")
    # a quarter GPU each on 2 GPUs: 8 trials, 2 GPUs held (the fraction billed per trial)
    h = held_devices({"CPU": 16.0, "GPU": 2.0}, gpus_per_trial=0.25, **kw)
    assert (h.slots, h.devices, h.kind) == (8, 2.0, "gpu")
    assert h.source == "ray.cluster_resources()"
    # 0.3 of a GPU: 3 per card (not 2 // 0.3 spread across cards)
    assert held_devices({"CPU": 16.0, "GPU": 2.0}, gpus_per_trial=0.3, **kw).slots == 6
    # CPUs bind first; max_concurrent caps; whole GPUs per trial
    assert held_devices({"CPU": 2.0, "GPU": 4.0}, gpus_per_trial=0.25, **kw).slots == 2
    h = held_devices({"CPU": 16.0, "GPU": 4.0}, gpus_per_trial=2, cpus_per_trial=1,
                     max_concurrent=None, num_cpus=2)
    assert (h.slots, h.devices) == (2, 4.0)
    h = held_devices({"CPU": 16.0, "GPU": 2.0}, gpus_per_trial=0.25, cpus_per_trial=1,
                     max_concurrent=3, num_cpus=2)
    assert (h.slots, h.devices) == (3, 0.75)
    # GPU trials on a cluster without GPUs: one slot (Ray would queue; shortfall refuses)
    assert held_devices({"CPU": 4.0}, gpus_per_trial=1, **kw).slots == 1
    with pytest.raises(ValueError, match="cpus_per_trial"):
        held_devices(None, gpus_per_trial=0, cpus_per_trial=0, max_concurrent=None,
                     num_cpus=2)


def test_idle_causes_of_a_known_timeline():
    """2 devices held from t = 0 to 20:
    0–1 start-up; width A: trials 1–5 and 1–3; 5–6 between widths; width B: trial 6–9;
    9–10 fits; a design trial 10–11; 11–12 fits; target 12–20 on one device."""
    ivs = [Interval(1, 5, 1, "width"), Interval(1, 3, 1, "width"), Interval(6, 9, 1, "width"),
           Interval(10, 11, 1, "design"), Interval(12, 20, 1, "target")]
    out = idle_breakdown(ivs, start=0.0, held=2.0,
                         inside={"worker_start": 1.5, "trial_overhead": 0.5,
                                 "recovery": 0.25})
    assert set(out) == set(IDLE_CAUSES)
    assert out["sweep_startup"] == pytest.approx(2.0)          # 1 s × 2 devices
    assert out["between_widths"] == pytest.approx(2.0)         # 5–6
    assert out["fits"] == pytest.approx(4.0)                   # 9–10 and 11–12
    # 3–5 one of two slots (2), 6–9 (3), the design 10–11 (1)
    assert out["tails"] == pytest.approx(6.0)
    assert out["target_fewer_devices"] == pytest.approx(8.0)
    assert out["trial_overhead"] == 0.5 and out["recovery"] == 0.25
    assert out["worker_start"] == 1.5
    # everything held that no trial occupied, plus what trials wasted inside
    occupied = sum((iv.end - iv.start) * iv.devices for iv in ivs)
    assert sum(out.values()) == pytest.approx(20 * 2 - occupied + 2.25)


def test_a_target_wider_than_the_hold_is_never_negative_idle():
    out = idle_breakdown([Interval(0, 1, 1, "width"), Interval(1, 3, 4, "target")],
                         start=0.0, held=2.0, inside={})
    assert out["target_fewer_devices"] == 0.0 and out["tails"] == pytest.approx(1.0)


def test_bad_timelines_are_refused():
    with pytest.raises(ValueError, match="no trial intervals"):
        idle_breakdown([], start=0.0, held=1.0, inside={})
    with pytest.raises(ValueError, match="after the sweep's start"):
        idle_breakdown([Interval(0, 1, 1, "width")], start=0.5, held=1.0, inside={})
    with pytest.raises(ValueError, match="group"):
        idle_breakdown([Interval(0, 1, 1, "proxy")], start=0.0, held=1.0, inside={})
    with pytest.raises(ValueError, match="held"):
        idle_breakdown([Interval(0, 1, 1, "width")], start=0.0, held=0.0, inside={})
