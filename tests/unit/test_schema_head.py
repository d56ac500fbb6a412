"""A node checks its store's schema against ``migrate.SCHEMA_HEAD`` without Alembic: it must
be the head of the migration scripts, or a node would refuse (or accept) the wrong schema."""

from __future__ import annotations

from shareproxy.persistence import migrate


def test_the_schema_head_is_the_newest_migration():
    assert migrate.head_revision("sqlite://") == migrate.SCHEMA_HEAD
