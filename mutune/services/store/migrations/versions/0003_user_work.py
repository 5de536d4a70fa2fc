"""User work: trial logs (stdout, stderr, traceback) and sweep cancellation.

Revision ID: 0003
Revises: 0002"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trial_logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("stdout", sa.Text(), nullable=False),
        sa.Column("stderr", sa.Text(), nullable=False),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"],
                                name="fk_trial_logs_trial_id_trials"),
        sa.PrimaryKeyConstraint("id", name="pk_trial_logs"),
        sa.UniqueConstraint("trial_id", name="uq_trial_logs_trial_id"),
    )
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("cancel_requested_at")
    op.drop_table("trial_logs")
