"""A version of the group configs, raised with every change of them, so that each proxy node
reads them again when it moves: a config changed through one node applies on every node.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "proxy_cluster",
        sa.Column("configs_version", sa.BigInteger(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("proxy_cluster") as batch:
        batch.drop_column("configs_version")
