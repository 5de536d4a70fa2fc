"""The devices a sweep is granted, read off the running Ray cluster (docs/architecture.md §6)."""
from __future__ import annotations

from typing import Any

from mutune.config import SweepConfig
from mutune.config.cost import device_kind_of

__all__ = ["granted_device_kind", "with_granted_device"]

#: the prefix of the resource Ray adds per node for the GPU type it detected there
ACCELERATOR_PREFIX = "accelerator_type:"


def granted_device_kind(config: SweepConfig, resources: dict[str, Any] | None
                        ) -> tuple[str, str]:
    """The cost table's kind of the devices the sweep's trials get, and where it came from.

    ``ray.device_kind`` if set, ``cpu`` for CPU trials, else Ray's detected GPU type; several
    types are joined by ``,`` and none detected gives ``cuda`` (neither has a price)."""
    r = config.ray
    if r.device_kind:
        return r.device_kind.lower(), "ray.device_kind"
    if not r.gpus_per_trial:
        return "cpu", "CPU trials (ray.gpus_per_trial = 0)"
    types = sorted(k[len(ACCELERATOR_PREFIX):] for k in (resources or {})
                   if k.startswith(ACCELERATOR_PREFIX))
    if not types:
        return "cuda", ("Ray detected no GPU type on the cluster: not priced; set "
                        "ray.device_kind")
    kinds = sorted({device_kind_of(t, config.cost.kinds()) for t in types})
    return ",".join(kinds), f"Ray's {', '.join(ACCELERATOR_PREFIX + t for t in types)}"


def with_granted_device(config: SweepConfig, resources: dict[str, Any] | None
                        ) -> SweepConfig:
    """``config`` with ``ray.device_kind`` set to :func:`granted_device_kind`."""
    if config.ray.device_kind:
        return config
    kind, _ = granted_device_kind(config, resources)
    return config.model_copy(update={"ray": config.ray.model_copy(update={"device_kind": kind})})
