"""GPU utilization and memory of a trial's devices, sampled with NVML while it trains."""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["GpuMonitor"]

Reader = Callable[[], Sequence[tuple[float, float]]]


class GpuMonitor:
    """Running aggregates of (utilization %, memory bytes) samples of the trial's GPUs.

    Raises:
        ValueError: interval_s ≤ 0."""

    def __init__(self, read: Reader, *, interval_s: float = 1.0) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s = {interval_s}: must be > 0")
        self._read, self._interval = read, float(interval_s)
        self._lock = threading.Lock()
        self._n = 0
        self._util_sum = 0.0
        self._util_max = 0.0
        self._mem_max = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_visible_devices(cls, *, interval_s: float = 1.0) -> "GpuMonitor | None":
        """A started monitor of the visible CUDA devices, or None without CUDA or NVML."""
        try:
            import pynvml
            import torch
        except ImportError:
            return None
        if not torch.cuda.is_available():
            return None
        try:
            pynvml.nvmlInit()
            handles = []
            for i in range(torch.cuda.device_count()):
                uuid = str(torch.cuda.get_device_properties(i).uuid)
                uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
                handles.append(pynvml.nvmlDeviceGetHandleByUUID(uuid))
        except pynvml.NVMLError:
            return None

        def read() -> list[tuple[float, float]]:
            return [(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                     float(pynvml.nvmlDeviceGetMemoryInfo(h).used)) for h in handles]

        return cls(read, interval_s=interval_s).start()

    def sample(self) -> None:
        """Take one sample now (the thread calls this every ``interval_s``)."""
        pairs = list(self._read())
        if not pairs:
            return
        util = sum(u for u, _ in pairs) / len(pairs)
        with self._lock:
            self._n += 1
            self._util_sum += util
            self._util_max = max(self._util_max, util)
            self._mem_max = max(self._mem_max, max(m for _, m in pairs))

    def start(self) -> "GpuMonitor":
        """Start the sampling thread (daemon); returns self."""
        def loop() -> None:
            while not self._stop.wait(self._interval):
                self.sample()
        self.sample()
        self._thread = threading.Thread(target=loop, name="mutune-gpu-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self._interval)

    def figures(self) -> dict[str, Any]:
        """``gpu_util_mean``/``gpu_util_max`` (percent), ``gpu_mem_max_bytes``, ``gpu_samples``."""
        with self._lock:
            if self._n == 0:
                return {}
            return {"gpu_util_mean": self._util_sum / self._n, "gpu_util_max": self._util_max,
                    "gpu_mem_max_bytes": self._mem_max, "gpu_samples": float(self._n)}
