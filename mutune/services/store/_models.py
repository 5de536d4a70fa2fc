"""SQLAlchemy 2 models of the results database (docs/architecture.md §7), one class per table,
matching the Alembic migrations. Timestamps are UTC, durations wall seconds, losses nats."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Integer, MetaData, String,
                        Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "Sweep", "Provenance", "ProxySweep", "Trial", "TrialReport", "SchedulerEvent",
           "TransferRule", "TargetRun", "LedgerEntry", "ScalingLaw", "SweepCheck", "TrialLog",
           "ApiToken",
           "TABLES"]

#: Constraint names are fixed by convention so the migration and the models name them alike.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

UTCDateTime = DateTime(timezone=True)


class Base(DeclarativeBase):
    """Declarative base of every mutune table; ``Base.metadata`` is Alembic's target."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, datetime: UTCDateTime}


class Sweep(Base):
    """One main-job sweep: its validated config, seed and status."""

    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    project: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    seed: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Provenance(Base):
    """What a rerun needs to be trusted: package versions, hardware, dataset fingerprint."""

    __tablename__ = "provenance"
    __table_args__ = (UniqueConstraint("sweep_id", name="uq_provenance_sweep_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class ProxySweep(Base):
    """The sweep at one proxy width: scheduler settings and the best trial found."""

    __tablename__ = "proxy_sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    width: Mapped[int] = mapped_column(Integer)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(32))
    best: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    scheduler_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    searcher_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    state_seq: Mapped[int | None] = mapped_column(Integer)


class Trial(Base):
    """One trial (a proxy trial or the target run) with its cost figures (docs/architecture.md
    §6)."""

    __tablename__ = "trials"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    proxy_sweep_id: Mapped[int | None] = mapped_column(ForeignKey("proxy_sweeps.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(200))
    width: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    seed: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    allocated_s: Mapped[float | None] = mapped_column(Float)
    productive_s: Mapped[float | None] = mapped_column(Float)
    eval_s: Mapped[float | None] = mapped_column(Float)
    overhead_s: Mapped[float | None] = mapped_column(Float)
    steps: Mapped[int | None] = mapped_column(Integer)
    samples: Mapped[int | None] = mapped_column(Integer)
    devices: Mapped[float | None] = mapped_column(Float)
    device_kind: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    checkpoint_dir: Mapped[str | None] = mapped_column(Text)
    restarts: Mapped[int | None] = mapped_column(Integer)
    preemptions: Mapped[int | None] = mapped_column(Integer)
    repeated_steps: Mapped[int | None] = mapped_column(Integer)
    recovery_s: Mapped[float | None] = mapped_column(Float)
    checkpoint_s: Mapped[float | None] = mapped_column(Float)
    upload_s: Mapped[float | None] = mapped_column(Float)


class TrialReport(Base):
    """An evaluation report of a trial at a training step; one row per (trial, step)."""

    __tablename__ = "trial_reports"
    __table_args__ = (UniqueConstraint("trial_id", "step",
                                       name="uq_trial_reports_trial_id_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    step: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SchedulerEvent(Base):
    """A scheduler decision at a rung, one row per (trial, milestone, decision); non-finite values
    are NULL."""

    __tablename__ = "scheduler_events"
    __table_args__ = (UniqueConstraint("trial_id", "milestone", "decision",
                                       name="uq_scheduler_events_trial_id_milestone_decision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    seq: Mapped[int] = mapped_column(Integer)
    milestone: Mapped[int] = mapped_column(Integer)
    value: Mapped[float | None] = mapped_column(Float)
    cutoff: Mapped[float | None] = mapped_column(Float)
    decision: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class TransferRule(Base):
    """A fitted rule log h*(w) = intercept + slope·log w; ``data`` holds the whole rule."""

    __tablename__ = "transfer_rules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    hyperparameter: Mapped[str] = mapped_column(String(200))
    intercept: Mapped[float | None] = mapped_column(Float)
    slope: Mapped[float | None] = mapped_column(Float)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class TargetRun(Base):
    """The target-size run with the transferred hyperparameters; val_loss in nats."""

    __tablename__ = "target_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), index=True)
    width: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(32))
    val_loss: Mapped[float | None] = mapped_column(Float)
    model_dir: Mapped[str | None] = mapped_column(Text)


class LedgerEntry(Base):
    """One cost figure (docs/architecture.md §6): ``value`` in ``unit``; NULL when not finite."""

    __tablename__ = "ledger_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id"), index=True)
    scope: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(64))
    formula: Mapped[str | None] = mapped_column(Text)
    inputs: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ScalingLaw(Base):
    """A fitted law of loss against scale (e.g. L(N) = E + A·N^-α); ``data`` holds the whole fit."""

    __tablename__ = "scaling_laws"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class SweepCheck(Base):
    """A check the sweep made about itself, one per (sweep, kind); ``data`` holds the whole
    record."""

    __tablename__ = "sweep_checks"
    __table_args__ = (UniqueConstraint("sweep_id", "kind", name="uq_sweep_checks_sweep_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class TrialLog(Base):
    """The tail of a trial's stdout and stderr, and its traceback; one row per trial."""

    __tablename__ = "trial_logs"
    __table_args__ = (UniqueConstraint("trial_id", name="uq_trial_logs_trial_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    stdout: Mapped[str] = mapped_column(Text)
    stderr: Mapped[str] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)


class ApiToken(Base):
    """A search-server bearer token, stored as its sha256 (hex); its sweeps belong to
    ``project``."""

    __tablename__ = "api_tokens"
    __table_args__ = (UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(String(200))
    token_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked: Mapped[bool] = mapped_column(Boolean)


#: Table names, in creation order.
TABLES = ("sweeps", "provenance", "proxy_sweeps", "trials", "trial_reports", "scheduler_events",
          "transfer_rules", "target_runs", "ledger_entries", "scaling_laws", "trial_logs",
          "api_tokens", "sweep_checks")
