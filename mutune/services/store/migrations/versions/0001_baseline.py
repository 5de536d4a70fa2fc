"""Baseline: the nine tables of the results database (docs/architecture.md §7).

Revision ID: 0001
Revises:"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def _fk(column: str, table: str, referred: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{referred}.id"],
                                   name=f"fk_{table}_{column}_{referred}")


def _index(table: str, column: str) -> None:
    op.create_index(f"ix_{table}_{column}", table, [column])


def upgrade() -> None:
    """Create every table, its constraints and the indexes on foreign keys."""
    _sweep_tables()
    _trial_tables()
    _result_tables()


def _sweep_tables() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("project", sa.String(200), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_sweeps"),
    )
    op.create_table(
        "provenance",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        _fk("sweep_id", "provenance", "sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_provenance"),
        sa.UniqueConstraint("sweep_id", name="uq_provenance_sweep_id"),
    )
    op.create_table(
        "proxy_sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("best", sa.JSON(), nullable=True),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        _fk("sweep_id", "proxy_sweeps", "sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_proxy_sweeps"),
    )
    _index("proxy_sweeps", "sweep_id")


def _trial_tables() -> None:
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("proxy_sweep_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.Column("allocated_s", sa.Float(), nullable=True),
        sa.Column("productive_s", sa.Float(), nullable=True),
        sa.Column("eval_s", sa.Float(), nullable=True),
        sa.Column("overhead_s", sa.Float(), nullable=True),
        sa.Column("steps", sa.Integer(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=True),
        sa.Column("devices", sa.Integer(), nullable=True),
        sa.Column("device_kind", sa.String(64), nullable=True),
        sa.Column("heartbeat_at", _TS, nullable=True),
        _fk("sweep_id", "trials", "sweeps"),
        _fk("proxy_sweep_id", "trials", "proxy_sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_trials"),
    )
    _index("trials", "sweep_id")
    _index("trials", "proxy_sweep_id")
    op.create_table(
        "trial_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        _fk("trial_id", "trial_reports", "trials"),
        sa.PrimaryKeyConstraint("id", name="pk_trial_reports"),
        sa.UniqueConstraint("trial_id", "step", name="uq_trial_reports_trial_id_step"),
    )
    op.create_table(
        "scheduler_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("milestone", sa.Integer(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("cutoff", sa.Float(), nullable=True),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        _fk("trial_id", "scheduler_events", "trials"),
        sa.PrimaryKeyConstraint("id", name="pk_scheduler_events"),
        sa.UniqueConstraint("trial_id", "milestone",
                            name="uq_scheduler_events_trial_id_milestone"),
    )


def _result_tables() -> None:
    op.create_table(
        "transfer_rules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("hyperparameter", sa.String(200), nullable=False),
        sa.Column("intercept", sa.Float(), nullable=True),
        sa.Column("slope", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        _fk("sweep_id", "transfer_rules", "sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_transfer_rules"),
    )
    _index("transfer_rules", "sweep_id")
    op.create_table(
        "target_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("val_loss", sa.Float(), nullable=True),
        _fk("sweep_id", "target_runs", "sweeps"),
        _fk("trial_id", "target_runs", "trials"),
        sa.PrimaryKeyConstraint("id", name="pk_target_runs"),
    )
    _index("target_runs", "sweep_id")
    _index("target_runs", "trial_id")
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(64), nullable=False),
        sa.Column("formula", sa.Text(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=True),
        _fk("sweep_id", "ledger_entries", "sweeps"),
        _fk("trial_id", "ledger_entries", "trials"),
        sa.PrimaryKeyConstraint("id", name="pk_ledger_entries"),
    )
    _index("ledger_entries", "sweep_id")
    _index("ledger_entries", "trial_id")


def downgrade() -> None:
    """Drop every table of the baseline (data is lost)."""
    for table in ("ledger_entries", "target_runs", "transfer_rules", "scheduler_events",
                  "trial_reports", "trials", "proxy_sweeps", "provenance", "sweeps"):
        op.drop_table(table)
