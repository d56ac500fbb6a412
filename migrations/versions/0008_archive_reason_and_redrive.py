"""Why each archived range was given up on (rejected, or the delivery limit), and when it was
redriven to its source topic, so a redrive produces each record once.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("share_archived") as batch:
        batch.add_column(sa.Column("reason", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("redriven_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("share_archived") as batch:
        batch.drop_column("redriven_at")
        batch.drop_column("reason")
