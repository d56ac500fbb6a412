"""The schema comes only from the Alembic migrations, and they match the tables' metadata."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from typer.testing import CliRunner

from shareproxy.cli.app import app
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.tables import metadata
from tests.support.postgres import TemporaryPostgres


async def test_migrations_match_the_table_metadata(state_url: str):
    engine = create_engine(state_url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn):
                ctx = MigrationContext.configure(sync_conn, opts={"compare_type": True})
                return compare_metadata(ctx, metadata)

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()
    assert await migrate.schema_is_current(state_url)


def test_cli_migrates_a_fresh_postgres_database_and_reports_it(postgres: TemporaryPostgres):
    url = postgres.create_database("fresh_cli")
    runner = CliRunner()
    behind = runner.invoke(app, ["migrate", "--check", "--state-url", url])
    assert behind.exit_code == 1
    assert "has no schema yet" in behind.output
    assert f"run `shareproxy migrate --state-url {url}`" in behind.output
    done = runner.invoke(app, ["migrate", "--state-url", url])
    assert done.exit_code == 0, done.output
    assert f"to revision {migrate.head_revision(url)}" in done.output
    assert runner.invoke(app, ["migrate", "--check", "--state-url", url]).exit_code == 0
    tables = postgres.psql(
        "select string_agg(tablename, ',' order by tablename) from pg_tables "
        "where schemaname='public'",
        "fresh_cli",
    ).strip()
    assert tables == (
        "acls,alembic_version,api_tokens,proxy_cluster,proxy_nodes,proxy_topics,scram_credentials,"
        "share_archived,share_group_push,share_groups,share_snapshots,share_updates"
    )


def test_cli_refuses_bad_state_urls_and_unreachable_stores(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["migrate", "--state-url", "mysql://x/y"])
    assert bad.exit_code == 2 and "unsupported state store" in bad.output
    nowhere = runner.invoke(app, ["migrate", "--state-url", f"sqlite:///{tmp_path}/no/s.db"])
    assert nowhere.exit_code == 2 and "folder" in nowhere.output, nowhere.output
    unreachable = runner.invoke(
        app, ["migrate", "--state-url", "postgresql://nobody@127.0.0.1:1/none"]
    )
    assert unreachable.exit_code == 3, unreachable.output
    assert "cannot use the state store postgresql://nobody@127.0.0.1:1/none" in unreachable.output
    ok = runner.invoke(app, ["migrate", "--state-url", f"sqlite:///{tmp_path}/s.db"])
    assert ok.exit_code == 0, ok.output


def test_a_store_of_a_newer_version_is_refused_in_one_line(tmp_path):
    """A store another version migrated past this one's head: the node does not serve it and
    `migrate` cannot move it, each said in a line naming the store, no traceback."""
    import sqlite3

    url = f"sqlite:///{tmp_path}/s.db"
    runner = CliRunner()
    assert runner.invoke(app, ["migrate", "--state-url", url]).exit_code == 0
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    check = runner.invoke(app, ["migrate", "--check", "--state-url", url])
    assert check.exit_code == 1 and "9999" in check.output, check.output
    moved = runner.invoke(app, ["migrate", "--state-url", url])
    assert moved.exit_code == 3, moved.output
    assert f"cannot use the state store {url}" in moved.output and "9999" in moved.output
    assert "Traceback" not in moved.output
