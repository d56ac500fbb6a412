"""The cluster's generation: raised with every change of the live proxy nodes and
given to clients as the partitions' leader epoch; each node records the newest one it acts on,
so a node takes over a partition only once its previous owner has let it go.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "proxy_cluster",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_proxy_cluster")),
    )
    op.add_column(
        "proxy_nodes",
        sa.Column("seen_generation", sa.BigInteger(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("proxy_nodes") as batch:
        batch.drop_column("seen_generation")
    op.drop_table("proxy_cluster")
