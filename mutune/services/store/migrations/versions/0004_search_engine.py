"""Search engine: saved scheduler/searcher state, pause/promote events, checkpoints, recovery
costs, fractional ``devices``.

Revision ID: 0004
Revises: 0003"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("proxy_sweeps") as b:
        b.add_column(sa.Column("scheduler_state", sa.JSON(), nullable=True))
        b.add_column(sa.Column("searcher_state", sa.JSON(), nullable=True))
        b.add_column(sa.Column("state_seq", sa.Integer(), nullable=True))
    with op.batch_alter_table("scheduler_events") as b:
        b.drop_constraint("uq_scheduler_events_trial_id_milestone", type_="unique")
        b.create_unique_constraint("uq_scheduler_events_trial_id_milestone_decision",
                                   ["trial_id", "milestone", "decision"])
    with op.batch_alter_table("trials") as b:
        b.add_column(sa.Column("checkpoint_dir", sa.Text(), nullable=True))
        b.add_column(sa.Column("restarts", sa.Integer(), nullable=True))
        b.add_column(sa.Column("repeated_steps", sa.Integer(), nullable=True))
        b.add_column(sa.Column("recovery_s", sa.Float(), nullable=True))
        b.add_column(sa.Column("checkpoint_s", sa.Float(), nullable=True))
        b.alter_column("devices", existing_type=sa.Integer(), type_=sa.Float(),
                       existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("trials") as b:
        b.alter_column("devices", existing_type=sa.Float(), type_=sa.Integer(),
                       existing_nullable=True)
        for name in ("checkpoint_s", "recovery_s", "repeated_steps", "restarts",
                     "checkpoint_dir"):
            b.drop_column(name)
    with op.batch_alter_table("scheduler_events") as b:
        b.drop_constraint("uq_scheduler_events_trial_id_milestone_decision", type_="unique")
        b.create_unique_constraint("uq_scheduler_events_trial_id_milestone",
                                   ["trial_id", "milestone"])
    with op.batch_alter_table("proxy_sweeps") as b:
        for name in ("state_seq", "searcher_state", "scheduler_state"):
            b.drop_column(name)
