"""The ``cost`` section: the device table (peak FLOP/s and prices) and who pays."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from mutune.config.base import StrictModel

__all__ = ["DeviceSpec", "DEFAULT_DEVICES", "SpotConfig", "CostConfig", "device_kind_of"]


class DeviceSpec(StrictModel):
    """One device kind in the cost table: peak FLOP/s per device (dense bf16 for GPUs, the
    figure MFU divides by) and prices per device-hour in ``CostConfig.currency``."""
    peak_flops: float | None = Field(default=None, gt=0)
    on_demand: float | None = Field(default=None, ge=0)
    spot: float | None = Field(default=None, ge=0)


#: Defaults of the device table. Peak: vendor datasheets, dense bf16 tensor-core FLOP/s per
#: device (fp16 for V100/T4); ``cpu`` peak None means "measured at run time" (one thread's
#: float32 matmul rate × CPUs granted). Prices: representative 2026 cloud list prices in USD
#: per device-hour (per vCPU-hour for ``cpu``), on-demand and spot — set your own in the
#: config's ``cost.devices``; an entry there replaces the default entry of that kind.
DEFAULT_DEVICES: dict[str, DeviceSpec] = {
    "cpu": DeviceSpec(peak_flops=None, on_demand=0.04, spot=0.015),
    "t4": DeviceSpec(peak_flops=65e12, on_demand=0.53, spot=0.16),
    "v100": DeviceSpec(peak_flops=125e12, on_demand=3.06, spot=0.92),
    "a10g": DeviceSpec(peak_flops=125e12, on_demand=1.01, spot=0.40),
    "l4": DeviceSpec(peak_flops=121e12, on_demand=0.80, spot=0.30),
    "a100": DeviceSpec(peak_flops=312e12, on_demand=3.67, spot=1.50),
    "h100": DeviceSpec(peak_flops=989e12, on_demand=6.88, spot=2.50),
    "h200": DeviceSpec(peak_flops=989e12, on_demand=7.91, spot=3.00),
    "b200": DeviceSpec(peak_flops=2250e12, on_demand=14.24, spot=5.50),
}


class SpotConfig(StrictModel):
    """Spot capacity's numbers (docs/architecture.md §4.6): ``mtbp_s`` — mean time between
    preemptions, seconds (None: the report prices no spot risk and ``train.checkpoint_every:
    auto`` is refused); ``restart_s`` — what a restart costs beyond the checkpoint restore
    (reschedule, image pull, data reload; default 3 minutes); ``checkpoint_min_interval_s`` —
    the least spacing between checkpoints under ``auto`` (a remote flush of a large
    checkpoint is worth minutes, not every epoch)."""
    mtbp_s: float | None = Field(default=None, gt=0)
    restart_s: float = Field(default=180.0, ge=0)
    checkpoint_min_interval_s: float = Field(default=0.0, ge=0)


class CostConfig(StrictModel):
    """How the ledger prices and attributes the sweep (docs/architecture.md §6): the device
    table (peak FLOP/s and prices per device kind, over :data:`DEFAULT_DEVICES`), which price
    applies, and who pays (``project`` groups sweeps in ``mutune report --by project``)."""
    project: str | None = Field(default=None, min_length=1, max_length=200)
    owner: str | None = Field(default=None, min_length=1, max_length=200)
    currency: str = Field(default="USD", min_length=1, max_length=8)
    pricing: Literal["on_demand", "spot"] = "on_demand"
    devices: dict[str, DeviceSpec] = Field(default_factory=dict)
    spot: SpotConfig = Field(default_factory=SpotConfig)

    def device(self, kind: str) -> DeviceSpec:
        """The table entry of ``kind`` (case-insensitive): the config's, else the default,
        else an entry with no peak and no price."""
        k = kind.lower()
        table = {**DEFAULT_DEVICES, **{n.lower(): v for n, v in self.devices.items()}}
        return table.get(k, DeviceSpec())

    def kinds(self) -> list[str]:
        """Every kind the table prices or knows: the defaults and the config's own."""
        return sorted({*DEFAULT_DEVICES, *(n.lower() for n in self.devices)})

    def price_per_hour(self, kind: str) -> float | None:
        """Price per device-hour of ``kind`` under ``pricing`` (None: not in the table)."""
        return getattr(self.device(kind), self.pricing)


def device_kind_of(name: str, known: Iterable[str]) -> str:
    """The cost table's kind of a device named as the driver or Ray reports it.

    ``name`` is split into words at anything but letters and digits; the first word that is
    a kind of ``known`` (case-insensitive) names it — ``NVIDIA H100 80GB HBM3`` → ``h100``,
    ``Tesla V100-SXM2-16GB`` → ``v100``, ``NVIDIA A10G`` → ``a10g`` (never ``a100``), Ray's
    ``accelerator_type:A100`` → ``a100``. Without such a word: the name's words joined by
    ``-``, lower-case (``nvidia-rtx-6000``), a kind the table does not price.

    Args:
        name: a device name (``torch.cuda.get_device_name()``, ``nvidia-smi``, Ray's
            ``accelerator_type`` resource).
        known: the kinds of the cost table (:meth:`CostConfig.kinds`).
    Raises:
        ValueError: ``name`` has no letter or digit.
    """
    words = [w for w in re.split(r"[^0-9a-z]+", name.lower()) if w]
    if not words:
        raise ValueError(f"device name {name!r}: no letters or digits to map to a kind")
    kinds = {k.lower() for k in known}
    for w in words:
        if w in kinds:
            return w
    return "-".join(words)
