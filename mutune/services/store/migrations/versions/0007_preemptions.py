"""Preemptions apart from failures: ``trials.preemptions`` (issue 17).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

How many times a trial was preempted (a notice: it checkpointed the step it reached, ended,
and was retried from that checkpoint without consuming ``ray.max_failures``); ``restarts``
keeps counting retries after failures only. NULL for trials recorded before this revision.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("preemptions", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("preemptions")
