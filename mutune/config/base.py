"""The base of every sweep-config section: unknown keys are refused, values are frozen."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """A pydantic model that forbids unknown keys (pydantic error ``extra_forbidden``, which
    :func:`mutune.config.parse_config` reports with the closest known keys) and is immutable."""
    model_config = ConfigDict(extra="forbid", frozen=True)
