"""The error root :class:`MutuneError` and its families, each naming the stage that raised it."""
from __future__ import annotations

__all__ = ["MutuneError", "ConfigError", "ProxyError", "SearchError", "FitError", "StoreError",
           "SweepStopped"]


class MutuneError(Exception):
    """Root of every error mutune raises deliberately."""


class ConfigError(MutuneError, ValueError):
    """A config breaks a rule; the message (and ``errors``, as data) names field, value and rule."""

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors or [])


class ProxyError(MutuneError):
    """A proxy model or its data cannot be built as configured (μP rules, shapes, data paths)."""


class SearchError(MutuneError):
    """The sweep itself failed: bad scheduler settings, a report missing its metric, Ray errors."""


class FitError(MutuneError, ValueError):
    """A transfer rule or optimum cannot be fitted from the given points; says why."""


class StoreError(MutuneError):
    """The results database refused or lost a write, or holds no such row."""


class SweepStopped(MutuneError):
    """The sweep was ended early on purpose (``status``: why); what was recorded stays."""

    def __init__(self, status: str, reason: str, sweep_id: int | None = None) -> None:
        super().__init__(f"sweep {sweep_id} {status}: {reason}" if sweep_id is not None
                         else f"{status}: {reason}")
        self.status, self.reason, self.sweep_id = status, reason, sweep_id
