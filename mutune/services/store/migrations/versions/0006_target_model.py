"""The kept target model's folder: ``target_runs.model_dir`` (NULL when none was kept).

Revision ID: 0006
Revises: 0005"""
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
