"""Run and check the Alembic migrations that own the schema (the app never creates tables)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from shareproxy.persistence.engine import (
    SchemaUnknown,
    StoreUnusable,
    async_url,
    create_engine,
    shown_url,
)

if TYPE_CHECKING:
    from alembic.config import Config

# The newest migration's revision: the schema a node's store must have to serve. A node checks
# it on every start, without Alembic (a fifth of a start's CPU went on importing it and reading
# the migration scripts); tests/unit/test_schema_head.py holds it to the head of migrations/.
SCHEMA_HEAD = "0010"


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
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option(
        "sqlalchemy.url", async_url(url).render_as_string(hide_password=False).replace("%", "%%")
    )
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema up to ``revision``; blocking (it runs its own event loop)."""
    from alembic import command
    from alembic.util.exc import CommandError

    try:
        command.upgrade(alembic_config(url), revision)
    except CommandError as exc:  # e.g. a revision it does not know: a newer version's schema
        current = asyncio.run(current_revision(url))
        if is_newer(current):  # said whole: Alembic's innermost cause would be the line shown
            raise SchemaUnknown(newer_schema(current)) from None
        raise SchemaUnknown(str(exc)) from exc


def head_revision(url: str) -> str | None:
    """The head of the migration scripts, as Alembic reads them."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def _stored_revision(conn: Connection) -> str | None:
    """The revision Alembic recorded in the store (None: never migrated)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


async def current_revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_stored_revision)
    finally:
        await engine.dispose()


async def schema_is_current(url: str) -> bool:
    return await current_revision(url) == SCHEMA_HEAD


def is_newer(revision: str | None) -> bool:
    """Whether a later version of shareproxy migrated the store: revisions are numbers, each
    migration's one more than the last."""
    return revision is not None and revision.isdigit() and int(revision) > int(SCHEMA_HEAD)


def newer_schema(revision: str | None) -> str:
    """Why this version cannot use a store a later version migrated: said, since nothing here
    can move it back, and a rolling upgrade's old node meets one when it restarts."""
    return (
        f"its schema {revision} is newer than this version's {SCHEMA_HEAD}: a later shareproxy "
        "migrated it; run that version or a later one"
    )


async def require_current(url: str) -> None:
    """SchemaBehind, saying how to fix it, unless the schema is the newest; SchemaUnknown, which
    says so, when a later version migrated it."""
    current, head = await current_revision(url), SCHEMA_HEAD
    if is_newer(current):
        raise SchemaUnknown(newer_schema(current))
    if current != head:
        raise SchemaBehind(
            f"the state store {shown_url(url)} has schema {current or 'none'}, expected {head}: "
            f"run `shareproxy migrate --state-url {shown_url(url)}` first"
        )


def schema_status(url: str) -> tuple[str | None, str | None]:
    """(current, head) revisions; blocking."""
    return asyncio.run(current_revision(url)), SCHEMA_HEAD
