"""SCRAM credentials, ACL bindings and admin API bearer tokens.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "scram_credentials",
        sa.Column("username", sa.String(255), nullable=False),
        sa.Column("mechanism", sa.String(32), nullable=False),
        sa.Column("salt", sa.LargeBinary(), nullable=False),
        sa.Column("stored_key", sa.LargeBinary(), nullable=False),
        sa.Column("server_key", sa.LargeBinary(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("username", "mechanism", name="pk_scram_credentials"),
    )
    op.create_table(
        "acls",
        sa.Column("id", AutoId, autoincrement=True, nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("resource_type", sa.SmallInteger(), nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("pattern_type", sa.SmallInteger(), nullable=False),
        sa.Column("operation", sa.SmallInteger(), nullable=False),
        sa.Column("permission", sa.SmallInteger(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_acls"),
        sa.UniqueConstraint(
            "principal",
            "host",
            "resource_type",
            "resource_name",
            "pattern_type",
            "operation",
            "permission",
            name="uq_acls_binding",
        ),
    )
    op.create_table(
        "api_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("username", sa.String(255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("token_hash", name="pk_api_tokens"),
    )
    op.create_index("ix_api_tokens_username", "api_tokens", ["username"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_username", table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("acls")
    op.drop_table("scram_credentials")
