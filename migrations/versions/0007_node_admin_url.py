"""Each proxy node's advertised admin API address, so a node that does not coordinate a share
group can pass a REST call on to the one that does.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("proxy_nodes", sa.Column("admin_url", sa.String(length=2048), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proxy_nodes") as batch:
        batch.drop_column("admin_url")
