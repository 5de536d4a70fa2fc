"""Scaling laws: loss against scale, with the target's predicted loss.

Revision ID: 0002
Revises: 0001"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scaling_laws",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"],
                                name="fk_scaling_laws_sweep_id_sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_scaling_laws"),
    )
    op.create_index("ix_scaling_laws_sweep_id", "scaling_laws", ["sweep_id"])


def downgrade() -> None:
    op.drop_index("ix_scaling_laws_sweep_id", table_name="scaling_laws")
    op.drop_table("scaling_laws")
