"""Every upgrade path of the schema: a store left at any revision, holding rows in the tables it
had then, is migrated to the head and ends with exactly the models' schema, every row kept with
its values and the columns added since at their defaults. The revisions come from
migrations/versions, so a new migration is covered by adding it (and a row for a table it
creates)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, MetaData, Table, inspect, select
from sqlalchemy.engine import Connection
from typer.testing import CliRunner

from shareproxy.cli.app import app
from shareproxy.core.acl import Operation, PatternType, Permission, ResourceType
from shareproxy.core.persisted import PersistedBatch
from shareproxy.core.push_spec import PushSpec
from shareproxy.core.states import ArchiveReason, RecordState
from shareproxy.host import exits
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import SchemaUnknown, StoreUnusable, create_engine, store_errors
from shareproxy.persistence.sql import batch_rows
from shareproxy.persistence.tables import metadata
from tests.support.postgres import TemporaryPostgres

EMPTY = "empty"  # no migration run yet: the store a first `shareproxy migrate` meets


def _revisions() -> list[str]:
    """Every revision in migrations/versions, oldest first."""
    scripts = ScriptDirectory(str(migrate.migrations_dir()))
    return [s.revision for s in reversed(list(scripts.walk_revisions()))]


REVISIONS = _revisions()

_TOPIC = uuid.UUID("6f1c1d4e-2a7b-4c55-9d0e-3b8f5a7c9e21")
_AT = datetime(2026, 11, 20, 9, 30, 15, 250000, tzinfo=UTC)
_LATER = datetime(2026, 11, 21, 17, 5, 0, tzinfo=UTC)

# One representative row per table, with a value for every column the models declare. At a
# revision, each table that exists then gets the values of the columns it has then.
ROWS: dict[str, dict[str, Any]] = {
    "share_groups": {
        "group_id": "orders",
        "group_type": "share",
        "configs": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": 15000},
        "created_at": _AT,
        "subscribed_topics": ["payments"],
        "subscription_changed_at": _AT,
        "empty_since": _LATER,
    },
    "share_snapshots": {
        "group_id": "orders",
        "topic_id": _TOPIC,
        "partition": 2,
        "state_epoch": 3,
        "snapshot_epoch": 7,
        "start_offset": 40,
        "state_batches": batch_rows(
            [
                PersistedBatch(40, 41, RecordState.ACKNOWLEDGED, 1),
                PersistedBatch(42, 44, RecordState.AVAILABLE, 2, 1_795_000_000_000),
            ]
        ),
        "update_count": 12,
        "updated_at": _LATER,
        "topic_name": "payments",
    },
    "share_updates": {
        "id": 31,
        "group_id": "orders",
        "topic_id": _TOPIC,
        "partition": 2,
        "state_epoch": 3,
        "snapshot_epoch": 7,
        "start_offset": 42,
        "state_batches": batch_rows([PersistedBatch(42, 42, RecordState.ARCHIVED, 5)]),
        "created_at": _LATER,
    },
    "share_archived": {
        "group_id": "orders",
        "topic_id": _TOPIC,
        "partition": 2,
        "first_offset": 42,
        "last_offset": 42,
        "delivery_count": 5,
        "archived_at": _LATER,
        "reason": ArchiveReason.DELIVERY_LIMIT.value,
        "redriven_at": _LATER,
    },
    "share_group_push": {
        "group_id": "orders",
        "spec": PushSpec(url="https://hooks.example.com/orders", topics=("payments",)).stored(),
        "updated_at": _LATER,
    },
    "scram_credentials": {
        "username": "alice",
        "mechanism": "SCRAM-SHA-256",
        "salt": b"\x00salt\xff",
        "stored_key": bytes(range(32)),
        "server_key": bytes(range(32, 64)),
        "iterations": 4096,
        "created_at": _AT,
    },
    "acls": {
        "id": 5,
        "principal": "User:alice",
        "host": "*",
        "resource_type": ResourceType.GROUP,
        "resource_name": "orders",
        "pattern_type": PatternType.LITERAL,
        "operation": Operation.READ,
        "permission": Permission.ALLOW,
        "created_at": _AT,
    },
    "api_tokens": {
        "token_hash": "ab" * 32,
        "username": "alice",
        "expires_at": _LATER,
        "created_at": _AT,
    },
    "proxy_nodes": {
        "node_id": 2,
        "incarnation": "5c0ffee5c0ffee5c0ffee5c0ffee5c0f",
        "listeners": {"PLAINTEXT": ["10.0.0.2", 9192]},
        "registered_at": _AT,
        "lease_expires_at": _LATER,
        "seen_generation": 9,
        "admin_url": "http://10.0.0.2:8080",
        "placement_rule": 2,
    },
    "proxy_cluster": {"id": 1, "generation": 9, "configs_version": 4},
    "proxy_topics": {"topic_id": _TOPIC, "partitions": 6, "entered": 8, "deleted": False},
}

_ANY = object()  # a column whose default is an SQL expression (now()): any value will do


def _default(column: Column[Any]) -> object:
    """What a column added after a row was written holds for it: its server default, or NULL."""
    if column.server_default is None:
        return None
    arg = getattr(column.server_default, "arg", None)
    return column.type.python_type(arg) if isinstance(arg, str) else _ANY


def _comparable(value: object) -> object:
    """SQLite keeps a timestamp without its zone, in UTC as written."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _columns(conn: Connection) -> dict[str, set[str]]:
    """The tables the store has and their columns (Alembic's own table aside)."""
    found = inspect(conn)
    return {
        name: {c["name"] for c in found.get_columns(name)}
        for name in found.get_table_names()
        if name != "alembic_version"
    }


def _as_at(table: Table, columns: set[str]) -> Table:
    """The table as it is at an older revision: only the columns it has then, typed as the
    models type them (so a UUID or a timestamp is bound as the column stores it)."""
    return Table(
        table.name, MetaData(), *(Column(c.name, c.type) for c in table.c if c.name in columns)
    )


async def _seed(url: str) -> dict[str, set[str]]:
    """A row in every table the store has; the columns each had."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            present = await conn.run_sync(_columns)
            unknown = sorted(set(present) - set(ROWS))
            assert not unknown, f"no representative row for {unknown}: add one to ROWS"
            for table in metadata.sorted_tables:  # parents before the rows referring to them
                if table.name in present:
                    at = _as_at(table, present[table.name])
                    row = {k: v for k, v in ROWS[table.name].items() if k in present[table.name]}
                    await conn.execute(at.insert().values(row))
        return present
    finally:
        await engine.dispose()


async def _read(url: str) -> tuple[dict[str, list[Mapping[str, Any]]], list[Any]]:
    """Every seeded table's rows, read through the models, and how the schema differs from
    them."""
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            rows = {
                t.name: [r._mapping for r in await conn.execute(select(t))]
                for t in metadata.sorted_tables
            }

            def diff(sync_conn: Connection) -> list[Any]:
                ctx = MigrationContext.configure(sync_conn, opts={"compare_type": True})
                return compare_metadata(ctx, metadata)

            return rows, await conn.run_sync(diff)
    finally:
        await engine.dispose()


def _empty_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    pg: TemporaryPostgres = request.getfixturevalue("postgres")
    return pg.create_database(f"path_{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
@pytest.mark.parametrize("start", [EMPTY, *REVISIONS])
def test_a_store_at_any_revision_upgrades_to_the_models_schema_keeping_its_rows(
    start: str, kind: str, request: pytest.FixtureRequest, tmp_path: Path
):
    url = _empty_store(kind, request, tmp_path)
    if start != EMPTY:
        migrate.upgrade(url, start)
    had = asyncio.run(_seed(url))
    migrate.upgrade(url)

    rows, diff = asyncio.run(_read(url))
    assert diff == [], f"upgraded from {start}, the schema differs from the models"
    assert asyncio.run(migrate.current_revision(url)) == migrate.SCHEMA_HEAD
    for table in metadata.sorted_tables:
        if table.name not in had:
            assert rows[table.name] == [], table.name
            continue
        assert len(rows[table.name]) == 1, f"{table.name}: the row written at {start} is gone"
        (row,) = rows[table.name]
        for column in table.c:
            kept = column.name in had[table.name]
            want = ROWS[table.name][column.name] if kept else _default(column)
            got = _comparable(row[column.name])
            if want is _ANY:
                assert got is not None, f"{table.name}.{column.name} (added after {start})"
            else:
                assert got == want, (
                    f"{table.name}.{column.name} "
                    f"({'written at' if kept else 'added after'} {start})"
                )


def test_the_paths_cover_every_migration_script():
    """The revisions come from the scripts: each file in migrations/versions is one, in a line."""
    files = sorted((migrate.migrations_dir() / "versions").glob("[0-9]*.py"))
    assert [f.name.split("_", 1)[0] for f in files] == REVISIONS
    assert REVISIONS[-1] == migrate.SCHEMA_HEAD


def test_a_store_a_later_version_migrated_is_refused_saying_so(tmp_path: Path):
    """What an older node meets after a rolling upgrade's `migrate`, with or without
    --migrate: one line naming the store and both schemas."""
    import sqlite3

    url = f"sqlite:///{tmp_path}/state.db"
    migrate.upgrade(url)
    later = f"{int(migrate.SCHEMA_HEAD) + 1:04d}"
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("UPDATE alembic_version SET version_num = ?", (later,))
    said = (
        f"cannot use the state store {url}: its schema {later} is newer than this version's "
        f"{migrate.SCHEMA_HEAD}: a later shareproxy migrated it; run that version or a later one"
    )

    async def checked() -> None:
        with store_errors(url):
            await migrate.require_current(url)

    with pytest.raises(StoreUnusable) as refused:
        asyncio.run(checked())
    assert str(refused.value) == said
    with pytest.raises(StoreUnusable) as moved, store_errors(url):
        migrate.upgrade(url)  # --migrate: the same, where Alembic knows no such revision
    assert str(moved.value) == said
    assert isinstance(moved.value.__cause__, SchemaUnknown)
    checked_by_cli = CliRunner().invoke(app, ["migrate", "--check", "--state-url", url])
    assert checked_by_cli.exit_code == exits.FAILED
    assert said.split(": ", 1)[1] in " ".join(checked_by_cli.output.split())
