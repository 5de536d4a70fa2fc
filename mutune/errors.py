"""The one error root of mutune and its families.

Every error mutune raises on purpose derives from :class:`MutuneError`, so a caller can catch
them all at once; each family names the stage that raised it.
"""
from __future__ import annotations

__all__ = ["MutuneError", "ConfigError", "ProxyError", "SearchError", "FitError", "StoreError",
           "SweepStopped"]


class MutuneError(Exception):
    """Root of every error mutune raises deliberately."""


class ConfigError(MutuneError, ValueError):
    """A sweep config breaks a rule; the message names the field, the value and the rule.

    ``errors`` holds the same as data when known: [{"field": dotted path, "value": repr of the
    value, "rule": the rule broken}] (the search server answers 422 with it)."""

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
    """The sweep was ended early on purpose, not by a fault: ``status`` is ``cancelled``
    (``mutune cancel``), ``budget_exhausted``, ``gate_stopped`` (the transfer was not healthy
    before the target run) or ``target_diverged`` (the target run was stopped against its
    best proxy); ``reason`` says why. What was recorded before
    stays, and the report is built from it."""

    def __init__(self, status: str, reason: str, sweep_id: int | None = None) -> None:
        super().__init__(f"sweep {sweep_id} {status}: {reason}" if sweep_id is not None
                         else f"{status}: {reason}")
        self.status, self.reason, self.sweep_id = status, reason, sweep_id
