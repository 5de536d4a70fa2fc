"""Seconds spent uploading checkpoints to remote storage: ``trials.upload_s`` (issue 17).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

A trial with ``ray.storage`` set uploads each checkpoint from a background thread of its worker
(mutune/search/trial/remote.py); ``upload_s`` sums that thread's seconds over the trial's
starts. 0 without remote storage; NULL for trials recorded before this revision.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("upload_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("upload_s")
