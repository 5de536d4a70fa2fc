"""Writes of the store for what the stages fit and check: transfer rules, scaling laws and the
sweep's checks, each kept by its key so that recording it again replaces it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from mutune.checks import CheckRecord
from mutune.errors import StoreError

from ._models import ScalingLaw, Sweep, SweepCheck, TransferRule
from ._values import finite_float, finite_json

__all__ = ["FitsMixin"]


class FitsMixin:
    """Fit and check writes of :class:`~mutune.services.store.Store`."""

    def rule_fitted(self, sweep_id: int, rule: Mapping[str, Any]) -> None:
        """Record a fitted transfer rule, kept by (sweep, hyperparameter).

        Raises:
            StoreError: unknown sweep, or ``rule`` lacks ``hyperparameter``."""
        if "hyperparameter" not in rule:
            raise StoreError(f"a transfer rule needs 'hyperparameter'; got keys {sorted(rule)}")

        def work(s: Session) -> None:
            self._get(s, Sweep, sweep_id, "sweep")
            s.execute(delete(TransferRule).where(
                TransferRule.sweep_id == sweep_id,
                TransferRule.hyperparameter == str(rule["hyperparameter"])))
            s.add(TransferRule(sweep_id=sweep_id, hyperparameter=str(rule["hyperparameter"]),
                               intercept=finite_float(rule.get("intercept"), "intercept"),
                               slope=finite_float(rule.get("slope"), "slope"),
                               data=finite_json(rule)))
        self._write(work)

    def law_fitted(self, sweep_id: int, law: Mapping[str, Any]) -> None:
        """Record a fitted scaling law, kept by (sweep, ``law["kind"]``).

        Raises:
            StoreError: unknown sweep, or ``law`` lacks ``kind``."""
        if "kind" not in law:
            raise StoreError(f"a scaling law needs 'kind'; got keys {sorted(law)}")

        def work(s: Session) -> None:
            self._get(s, Sweep, sweep_id, "sweep")
            s.execute(delete(ScalingLaw).where(ScalingLaw.sweep_id == sweep_id,
                                               ScalingLaw.kind == str(law["kind"])))
            s.add(ScalingLaw(sweep_id=sweep_id, kind=str(law["kind"]), data=finite_json(law)))
        self._write(work)

    def check_recorded(self, sweep_id: int, check: CheckRecord) -> None:
        """Record one of the sweep's checks, kept by (sweep, kind).

        Raises:
            StoreError: unknown sweep, or ``check`` is not a CheckRecord."""
        if not isinstance(check, CheckRecord):
            raise StoreError(f"check = {type(check).__name__}: must be a CheckRecord "
                             "(mutune.checks)")
        data = {k: v for k, v in check.data.items() if k != "kind"}

        def work(s: Session) -> None:
            self._get(s, Sweep, sweep_id, "sweep")
            s.execute(delete(SweepCheck).where(SweepCheck.sweep_id == sweep_id,
                                               SweepCheck.kind == check.kind))
            s.add(SweepCheck(sweep_id=sweep_id, kind=check.kind, data=finite_json(data)))
        self._write(work)
