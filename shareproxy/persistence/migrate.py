"""Run and check the Alembic migrations that own the schema (the app never creates tables)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from shareproxy.persistence.engine import StoreUnusable, async_url, create_engine, shown_url


class SchemaBehind(StoreUnusable):
    """The store has no schema, or an older one, and was not to be migrated here."""


def migrations_dir() -> Path:
    """Packaged copy in a wheel, else the repository's top-level ``migrations/``."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("shareproxy's Alembic migrations are missing from this install")


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option(
        "sqlalchemy.url", async_url(url).render_as_string(hide_password=False).replace("%", "%%")
    )
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema up to ``revision``; blocking (it runs its own event loop)."""
    command.upgrade(alembic_config(url), revision)


def head_revision(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


async def current_revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:

            def _current(sync_conn: Connection) -> str | None:
                return MigrationContext.configure(sync_conn).get_current_revision()

            return await conn.run_sync(_current)
    finally:
        await engine.dispose()


async def schema_is_current(url: str) -> bool:
    return await current_revision(url) == head_revision(url)


async def require_current(url: str) -> None:
    """SchemaBehind, saying how to fix it, unless the schema is the newest."""
    current, head = await current_revision(url), head_revision(url)
    if current != head:
        raise SchemaBehind(
            f"the state store {shown_url(url)} has schema {current or 'none'}, expected {head}: "
            f"run `shareproxy migrate --state-url {shown_url(url)}` first"
        )


def schema_status(url: str) -> tuple[str | None, str | None]:
    """(current, head) revisions; blocking."""
    return asyncio.run(current_revision(url)), head_revision(url)
