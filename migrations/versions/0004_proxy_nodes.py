"""The proxy nodes of a cluster and their leases.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "proxy_nodes",
        sa.Column("node_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("incarnation", sa.String(32), nullable=False),
        sa.Column("listeners", Json, nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_proxy_nodes")),
    )


def downgrade() -> None:
    op.drop_table("proxy_nodes")
