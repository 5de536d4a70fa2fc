"""mutune: μP hyperparameter transfer as a service.

Sweep small μP proxies with ASHA on Ray Tune, fit transfer rules, train the target once, and
count the GPU-hours saved. The public API is loaded lazily (PEP 562), so ``import mutune`` or
``import mutune.proxies`` pulls in neither Ray nor SQLAlchemy nor FastAPI; ``mutune.Client`` and
``mutune.submit`` (the search server's client) load httpx only when first used.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["run", "RunResult", "SweepConfig", "load_config", "MutuneError", "ConfigError",
           "ModelFamily", "LoopContext", "load_target_model", "Client", "submit",
           "ServerError", "AuthError", "NotFound", "Conflict", "PayloadTooLarge", "SweepTimeout"]

_CLIENT = "mutune.services.server.client"
_LAZY = {"run": "mutune.services.api", "RunResult": "mutune.services.api",
         "SweepConfig": "mutune.config", "load_config": "mutune.config",
         "MutuneError": "mutune.errors", "ConfigError": "mutune.errors",
         "ModelFamily": "mutune.proxies.family", "LoopContext": "mutune.training.context",
         "load_target_model": "mutune.pipeline.target_loader",
         **{name: _CLIENT for name in ("Client", "submit", "ServerError", "AuthError",
                                       "NotFound", "Conflict", "PayloadTooLarge",
                                       "SweepTimeout")}}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mutune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
