"""Group membership for the expiry rules, topic names on share-partition state, and the log of
archived records that had been delivered (the poison report's source).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("share_groups") as t:
        t.add_column(sa.Column("subscribed_topics", Json, nullable=True))
        t.add_column(sa.Column("subscription_changed_at", sa.DateTime(timezone=True)))
        t.add_column(sa.Column("empty_since", sa.DateTime(timezone=True)))
    with op.batch_alter_table("share_snapshots") as t:
        t.add_column(sa.Column("topic_name", sa.String(255), nullable=True))
    op.create_table(
        "share_archived",
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.Column("topic_id", sa.Uuid(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("first_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("delivery_count", sa.SmallInteger(), nullable=False),
        sa.Column(
            "archived_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint(
            "group_id", "topic_id", "partition", "first_offset", name="pk_share_archived"
        ),
    )


def downgrade() -> None:
    op.drop_table("share_archived")
    with op.batch_alter_table("share_snapshots") as t:
        t.drop_column("topic_name")
    with op.batch_alter_table("share_groups") as t:
        t.drop_column("empty_since")
        t.drop_column("subscription_changed_at")
        t.drop_column("subscribed_topics")
