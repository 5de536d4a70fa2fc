"""Where a trial trains: CPU, or one CUDA device with bf16 autocast and the flash SDPA kernel.

On CUDA, matrix multiplies run under ``torch.autocast(dtype=torch.bfloat16)`` (parameters and
optimizer state stay float32) and attention is restricted to the FlashAttention kernel of
``scaled_dot_product_attention`` (Dao et al. 2022, "FlashAttention"), which accepts the μP
``attn_mult/d_head`` scale through its ``scale`` argument. On CPU both are no-ops.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

__all__ = ["TrainDevice", "select_device", "measure_cpu_peak_flops"]


@dataclass(frozen=True)
class TrainDevice:
    """A torch device and the numeric settings used on it.

    Attributes:
        device: ``torch.device("cpu")`` or ``torch.device("cuda")``.
        autocast_dtype: ``torch.bfloat16`` on CUDA, None on CPU (full float32).
        flash_sdpa: whether attention is restricted to the flash kernel.
    """
    device: torch.device
    autocast_dtype: torch.dtype | None
    flash_sdpa: bool

    @property
    def kind(self) -> str:
        """``cuda`` or ``cpu`` (the ledger's device kind)."""
        return self.device.type

    @contextlib.contextmanager
    def compute(self) -> Iterator[None]:
        """Context for forward passes: bf16 autocast and the flash SDPA kernel on CUDA."""
        with contextlib.ExitStack() as stack:
            if self.autocast_dtype is not None:
                stack.enter_context(torch.autocast(device_type=self.device.type,
                                                   dtype=self.autocast_dtype))
            if self.flash_sdpa:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                stack.enter_context(sdpa_kernel([SDPBackend.FLASH_ATTENTION]))
            yield


def select_device(prefer_cuda: bool = True) -> TrainDevice:
    """CUDA (bf16 autocast, flash attention) when asked for and available, else CPU float32.

    Inside a Ray trial granted a GPU, ``CUDA_VISIBLE_DEVICES`` already names that GPU, so
    ``cuda`` means the trial's own device.
    """
    if prefer_cuda and torch.cuda.is_available():
        return TrainDevice(torch.device("cuda"), torch.bfloat16, True)
    return TrainDevice(torch.device("cpu"), None, False)


def measure_cpu_peak_flops(*, n: int = 512, repeats: int = 5) -> float:
    """Float32 FLOP/s of one CPU thread on an ``n × n`` matmul, best of ``repeats``.

    The "measured CPU figure" MFU divides by on a CPU machine (there is no datasheet peak
    for an arbitrary CPU): 2·n³ FLOPs per matmul (the multiply-adds of a dense product). Runs
    with one intra-op thread, as trials do (docs/architecture.md §5), and restores the thread count.
    Takes about 0.1 s.

    Returns:
        FLOP/s per thread (per CPU granted).
    Raises:
        ValueError: n < 64 or repeats < 1.
    """
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
