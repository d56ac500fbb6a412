"""The topic catalogue placement spreads partitions by, and the placement rule each node's
build knows, so a fleet places by the oldest rule of its live nodes while it is upgraded.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "proxy_nodes",
        sa.Column("placement_rule", sa.SmallInteger(), nullable=False, server_default="1"),
    )
    op.create_table(
        "proxy_topics",
        sa.Column("topic_id", sa.Uuid(), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False),
        sa.Column("entered", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("topic_id", name=op.f("pk_proxy_topics")),
    )


def downgrade() -> None:
    op.drop_table("proxy_topics")
    with op.batch_alter_table("proxy_nodes") as batch:
        batch.drop_column("placement_rule")
