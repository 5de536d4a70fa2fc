"""The kept target model: ``target_runs.model_dir`` (issue 15).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

The folder (in the sweep's storage) holding the trained target model, its optimizer state,
base shapes, config and provenance (``mutune/pipeline/target_model.py``); NULL for a target
run that kept no model (diverged, failed, or recorded before this revision).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("target_runs") as batch:
        batch.add_column(sa.Column("model_dir", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("target_runs") as batch:
        batch.drop_column("model_dir")
