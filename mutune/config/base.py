"""The base of every sweep-config section: unknown keys are refused, values are frozen; a
rule across fields, broken, names the field to change."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel", "FieldRuleError"]


class FieldRuleError(ValueError):
    """A rule across fields, broken, as a model validator raises it: ``field`` is the dotted
    path of the field to change, relative to the model that raised it, and ``value`` its
    value. :func:`mutune.config.loading.config_errors` reports that field and value instead
    of the whole section the validator checked (``(root) = {…}`` for the sweep config)."""

    def __init__(self, field: str, value: Any, rule: str) -> None:
        super().__init__(rule)
        self.field, self.value = field, value

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled whole (a Ray worker's error travels pickled): ``args`` holds only the rule
        return type(self), (self.field, self.value, str(self))


class StrictModel(BaseModel):
    """A pydantic model that forbids unknown keys (pydantic error ``extra_forbidden``, which
    :func:`mutune.config.parse_config` reports with the closest known keys) and is immutable."""
    model_config = ConfigDict(extra="forbid", frozen=True)
