"""A sweep's checks move from ``scaling_laws`` to their own table ``sweep_checks``, one row per
(sweep, kind).

Revision ID: 0009
Revises: 0008"""
from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

KINDS = ("preflight", "gate", "importance", "target_watch")

_laws = sa.table("scaling_laws", sa.column("id", sa.Integer), sa.column("sweep_id", sa.Integer),
                 sa.column("kind", sa.String), sa.column("data", sa.JSON))
_checks = sa.table("sweep_checks", sa.column("id", sa.Integer),
                   sa.column("sweep_id", sa.Integer), sa.column("kind", sa.String),
                   sa.column("data", sa.JSON))


def upgrade() -> None:
    op.create_table(
        "sweep_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"],
                                name="fk_sweep_checks_sweep_id_sweeps"),
        sa.PrimaryKeyConstraint("id", name="pk_sweep_checks"),
        sa.UniqueConstraint("sweep_id", "kind", name="uq_sweep_checks_sweep_id"),
    )
    op.create_index("ix_sweep_checks_sweep_id", "sweep_checks", ["sweep_id"])
    conn = op.get_bind()
    newest: dict[tuple[int, str], dict[str, Any]] = {}
    for row in conn.execute(sa.select(_laws).where(_laws.c.kind.in_(KINDS))
                            .order_by(_laws.c.id)):
        data = {k: v for k, v in dict(row.data or {}).items() if k != "kind"}
        newest[(row.sweep_id, row.kind)] = data
    if newest:
        conn.execute(_checks.insert(), [{"sweep_id": s, "kind": k, "data": d}
                                        for (s, k), d in newest.items()])
    conn.execute(_laws.delete().where(_laws.c.kind.in_(KINDS)))


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_checks).order_by(_checks.c.id)).all()
    if rows:
        conn.execute(_laws.insert(), [{"sweep_id": r.sweep_id, "kind": r.kind,
                                       "data": {"kind": r.kind, **dict(r.data or {})}}
                                      for r in rows])
    op.drop_index("ix_sweep_checks_sweep_id", table_name="sweep_checks")
    op.drop_table("sweep_checks")
