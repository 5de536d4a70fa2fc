"""The sweep config: pydantic v2 models of the YAML file a user writes (docs/config.md).

Unknown keys are refused; :func:`load_config` reports each broken rule as one line naming the
field, the value and the rule. Importing it imports pydantic and PyYAML only.
"""
from __future__ import annotations

from mutune.config.cost import DEFAULT_DEVICES, CostConfig, DeviceSpec
from mutune.config.loading import default_config_path, load_config, parse_config
from mutune.config.model import (DigitsDataConfig, GPTModel, MLPModel, ModelSpec,
                                 TextDataConfig, TokenDataConfig)
from mutune.config.ray_section import LEASE_FACTOR, PreemptionConfig, RayConfig
from mutune.config.sections import (BudgetConfig, SchedulerConfig, SearchConfig, TargetConfig,
                                    TrackingConfig, TrainConfig, TransferConfig)
from mutune.config.spaces import SEARCHABLE, Choice, LogUniform, Uniform
from mutune.config.sweep import SweepConfig

__all__ = [
    "SweepConfig", "ModelSpec", "MLPModel", "GPTModel", "DigitsDataConfig", "TextDataConfig",
    "TokenDataConfig",
    "LogUniform", "Uniform", "Choice", "SearchConfig", "SchedulerConfig", "TrainConfig",
    "TargetConfig", "TransferConfig", "RayConfig", "PreemptionConfig", "BudgetConfig",
    "TrackingConfig",
    "CostConfig", "DeviceSpec", "DEFAULT_DEVICES",
    "load_config", "parse_config", "default_config_path", "SEARCHABLE", "LEASE_FACTOR",
]

#: names the data sections had before they were renamed apart from the loaded datasets
#: (:mod:`mutune.proxies.data`); importing one warns
_RENAMED = {"DigitsData": "DigitsDataConfig", "TextData": "TextDataConfig",
            "TokenData": "TokenDataConfig"}


def __getattr__(name: str) -> object:
    if name in _RENAMED:
        import warnings

        new = _RENAMED[name]
        warnings.warn(f"mutune.config.{name} is now mutune.config.{new}", DeprecationWarning,
                      stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module 'mutune.config' has no attribute {name!r}")
