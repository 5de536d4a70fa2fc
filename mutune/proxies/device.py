"""Where a trial trains: CPU, or one CUDA device (bf16 autocast and FlashAttention from sm80).

FlashAttention: Dao et al. 2022."""
from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

__all__ = ["TrainDevice", "numerics_for", "select_device", "model_device",
           "measure_cpu_peak_flops"]


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (CPU when it has neither)."""
    return next((t.device for t in itertools.chain(model.parameters(), model.buffers())),
                torch.device("cpu"))

#: the first compute capability with native bf16 and PyTorch's flash SDPA kernel (Ampere)
SM80 = (8, 0)


@dataclass(frozen=True)
class TrainDevice:
    """A torch device and the numeric settings used on it."""
    device: torch.device
    autocast_dtype: torch.dtype | None
    flash_sdpa: bool

    @property
    def kind(self) -> str:
        """``cuda`` or ``cpu`` (the ledger's device kind)."""
        return self.device.type

    @contextlib.contextmanager
    def compute(self) -> Iterator[None]:
        """Forward-pass context: bf16 autocast and flash SDPA where the device takes them."""
        with contextlib.ExitStack() as stack:
            if self.autocast_dtype is not None:
                stack.enter_context(torch.autocast(device_type=self.device.type,
                                                   dtype=self.autocast_dtype))
            if self.flash_sdpa:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                stack.enter_context(sdpa_kernel([SDPBackend.FLASH_ATTENTION]))
            yield


def numerics_for(capability: tuple[int, int], *, bf16_supported: bool
                 ) -> tuple[torch.dtype | None, bool]:
    """The autocast dtype and whether to force the flash SDPA kernel on a CUDA device."""
    cap = tuple(int(c) for c in capability)
    return (torch.bfloat16 if bf16_supported else None), cap >= SM80


def select_device(prefer_cuda: bool = True) -> TrainDevice:
    """CUDA with :func:`numerics_for`'s numerics when asked for and available; else CPU float32."""
    if prefer_cuda and torch.cuda.is_available():
        dtype, flash = numerics_for(
            torch.cuda.get_device_capability(),
            bf16_supported=torch.cuda.is_bf16_supported(including_emulation=False))
        return TrainDevice(torch.device("cuda"), dtype, flash)
    return TrainDevice(torch.device("cpu"), None, False)


def measure_cpu_peak_flops(*, n: int = 512, repeats: int = 5) -> float:
    """Float32 FLOP/s of one CPU thread on an ``n × n`` matmul (2·n³ FLOPs), best of ``repeats``.

    Raises:
        ValueError: n < 64 or repeats < 1."""
    import time

    if n < 64 or repeats < 1:
        raise ValueError(f"n = {n}, repeats = {repeats}: need n >= 64 and repeats >= 1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=gen)
        b = torch.randn(n, n, generator=gen)
        a @ b  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return 2.0 * n ** 3 / best
