"""The sweep config: pydantic v2 models of the YAML file a user writes (docs/architecture.md
§1–§2).

Every model forbids unknown keys. :func:`load_config` turns pydantic's errors into one
:class:`~mutune.errors.ConfigError` whose lines each name the field (dotted path), the value and
the rule it broke, e.g. ``search.scheduler.max_t = 10: must be >= grace_period (20)``; an
unknown key comes with the closest keys its section takes ("did you mean …").

The modules, one idea each: :mod:`~mutune.config.spaces` (searchable hyperparameters and their
distributions), :mod:`~mutune.config.model` (the ``model`` and ``data`` sections),
:mod:`~mutune.config.sections` (search, scheduler, train, target, transfer, ray, budget,
tracking), :mod:`~mutune.config.cost` (the device table), :mod:`~mutune.config.sweep` (the whole
config and its cross-section rules), :mod:`~mutune.config.loading` (YAML and errors) and
:mod:`~mutune.config.suggest` (the close-match suggestions). Importing this package imports
pydantic and PyYAML only (no torch, Ray or SQLAlchemy).
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
