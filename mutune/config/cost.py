"""The ``cost`` section: the device table (peak FLOP/s and prices) and who pays."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from mutune.config.base import StrictModel

__all__ = ["DeviceSpec", "DEFAULT_DEVICES", "SpotConfig", "CostConfig", "device_kind_of"]


class DeviceSpec(StrictModel):
    """One device kind in the cost table."""
    peak_flops: float | None = Field(
        default=None, gt=0, description="peak FLOP/s per device (dense bf16 for GPUs), what MFU "
        "divides by; None on CPUs: measured at run time")
    on_demand: float | None = Field(
        default=None, ge=0, description="on-demand price per device-hour in `cost.currency`")
    spot: float | None = Field(
        default=None, ge=0, description="spot price per device-hour in `cost.currency`")


#: Defaults of the device table: datasheet dense bf16 peaks (fp16 for V100/T4; ``cpu``: measured
#: at run time) and representative cloud prices in USD per device-hour (per vCPU-hour for cpu).
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
    """Spot capacity's numbers, for the report's ``cost.spot`` (docs/architecture.md §4.6)."""
    mtbp_s: float | None = Field(
        default=None, gt=0, description="mean time between preemptions, s (None: no spot risk "
        "priced, and `train.checkpoint_every: auto` is refused)")
    restart_s: float = Field(
        default=180.0, ge=0, description="a restart's cost beyond the checkpoint restore, s "
        "(reschedule, image pull, data reload)")
    checkpoint_min_interval_s: float = Field(
        default=0.0, ge=0, description="the least spacing of `auto` checkpoints, s")


class CostConfig(StrictModel):
    """How the ledger prices and attributes the sweep (docs/architecture.md §6)."""
    project: str | None = Field(
        default=None, min_length=1, max_length=200, description="who pays; groups sweeps in "
        "`mutune report --by project`")
    owner: str | None = Field(
        default=None, min_length=1, max_length=200, description="the person the spend is "
        "attributed to")
    currency: str = Field(
        default="USD", min_length=1, max_length=8, description="the prices' currency")
    pricing: Literal["on_demand", "spot"] = Field(
        default="on_demand", description="which price of the device table applies")
    devices: dict[str, DeviceSpec] = Field(
        default_factory=dict, description="device kinds (peak FLOP/s, prices); an entry "
        "replaces the default entry of that kind")
    spot: SpotConfig = Field(
        default_factory=SpotConfig, description="spot capacity (`cost.spot.*`)")

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
