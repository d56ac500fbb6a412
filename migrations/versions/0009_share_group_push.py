"""A share group's push: the endpoint its records are POSTed to, kept with the group (deleting
the group deletes it).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "share_group_push",
        sa.Column(
            "group_id",
            sa.String(length=255),
            sa.ForeignKey(
                "share_groups.group_id",
                ondelete="CASCADE",
                name="fk_share_group_push_group_id_share_groups",
            ),
            nullable=False,
        ),
        sa.Column("spec", Json, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("group_id", name="pk_share_group_push"),
    )


def downgrade() -> None:
    op.drop_table("share_group_push")
