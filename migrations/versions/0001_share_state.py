"""Share groups, share-partition snapshots and their update rows.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "share_groups",
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.Column("group_type", sa.String(16), server_default="share", nullable=False),
        sa.Column("configs", Json, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("group_id", name="pk_share_groups"),
    )
    op.create_table(
        "share_snapshots",
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.Column("topic_id", sa.Uuid(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("state_epoch", sa.Integer(), nullable=False),
        sa.Column("snapshot_epoch", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("state_batches", Json, nullable=False),
        sa.Column("update_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["share_groups.group_id"],
            ondelete="CASCADE",
            name="fk_share_snapshots_group_id_share_groups",
        ),
        sa.PrimaryKeyConstraint("group_id", "topic_id", "partition", name="pk_share_snapshots"),
    )
    op.create_table(
        "share_updates",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("group_id", sa.String(255), nullable=False),
        sa.Column("topic_id", sa.Uuid(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("state_epoch", sa.Integer(), nullable=False),
        sa.Column("snapshot_epoch", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("state_batches", Json, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["group_id", "topic_id", "partition"],
            ["share_snapshots.group_id", "share_snapshots.topic_id", "share_snapshots.partition"],
            ondelete="CASCADE",
            name="fk_share_updates_share_snapshots",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_share_updates"),
    )
    op.create_index(
        "ix_share_updates_partition", "share_updates", ["group_id", "topic_id", "partition", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_share_updates_partition", table_name="share_updates")
    op.drop_table("share_updates")
    op.drop_table("share_snapshots")
    op.drop_table("share_groups")
