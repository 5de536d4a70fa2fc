"""The NVML monitor: aggregates of utilization and memory samples; no monitor without CUDA."""
from __future__ import annotations

import time

import pytest

from mutune.search.trial.gpu_monitor import GpuMonitor


def test_no_monitor_on_a_machine_without_cuda():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the GPU check script covers the NVML path")
    assert GpuMonitor.for_visible_devices() is None


def test_aggregates_over_devices_and_samples():
    readings = iter([[(50.0, 1e9), (100.0, 2e9)], [(0.0, 3e9), (10.0, 1e9)]])
    m = GpuMonitor(lambda: next(readings), interval_s=60)
    assert m.figures() == {}
    m.sample()
    m.sample()
    # device means 75 and 5 → mean 40, max 75; the largest device peak 3e9 bytes
    assert m.figures() == {"gpu_util_mean": 40.0, "gpu_util_max": 75.0,
                           "gpu_mem_max_bytes": 3e9, "gpu_samples": 2.0}


def test_thread_samples_until_stopped():
    calls = []
    m = GpuMonitor(lambda: calls.append(1) or [(30.0, 5.0)], interval_s=0.01).start()
    time.sleep(0.2)
    m.stop()
    n = len(calls)
    time.sleep(0.05)
    assert n >= 3 and len(calls) == n          # sampled while running, nothing after stop
    assert m.figures()["gpu_util_mean"] == 30.0
    with pytest.raises(ValueError, match="interval_s = 0"):
        GpuMonitor(lambda: [], interval_s=0)
