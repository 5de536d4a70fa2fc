"""The results database of mutune (docs/architecture.md §7): ``Store.open(url)`` implements the
pipeline's Recorder and SweepControl; importing this package builds no engine."""
from __future__ import annotations

from ._engine import MIGRATIONS_DIR, alembic_config, make_engine, normalize_url, upgrade
from ._models import (TABLES, ApiToken, Base, LedgerEntry, Provenance, ProxySweep,
                      SchedulerEvent, Sweep, TargetRun, TransferRule, Trial, TrialReport)
from ._store import DEFAULT_PROJECT, Store
from ._values import finite_json

__all__ = [
    "Store", "DEFAULT_PROJECT", "make_engine", "upgrade", "normalize_url", "alembic_config",
    "finite_json",
    "MIGRATIONS_DIR", "TABLES", "Base", "Sweep", "Provenance", "ProxySweep", "Trial",
    "TrialReport", "SchedulerEvent", "TransferRule", "TargetRun", "LedgerEntry", "ApiToken",
]
