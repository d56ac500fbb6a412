"""Async engines for the state store URL (Postgres through asyncpg, SQLite through aiosqlite)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from shareproxy.core.failures import Unreachable
from shareproxy.core.store import StoreUnavailable
from shareproxy.telemetry.logs import first_line
from shareproxy.telemetry.secrets import hide_passwords

_ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}
# Postgres ends a session whose transaction sits idle this long, releasing its row locks: a node
# paused or stalled inside a transaction must not hold the share-partitions and groups that the
# other nodes take over once its lease passed (the proxy's own transactions last milliseconds)
IDLE_IN_TRANSACTION_MS = 5_000


class StateUrlError(ValueError):
    """The --state-url is not a store shareproxy can use."""


class StoreUnusable(Unreachable):
    """A command cannot go on: the state store could not be reached, or is not one shareproxy
    can use as it is."""


class SchemaUnknown(Exception):
    """The store's schema is one this version's migrations do not know (a newer one)."""


# what a store that is down, refuses us or lacks the schema raises (not our own bugs); the
# stores convert these into the core's StoreUnavailable at their boundary (boundary.py)
STORE_FAILURES = (
    OSError,
    SQLAlchemyError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # a session Postgres ended (IDLE_IN_TRANSACTION_MS) whose socket close asyncpg has not seen
    # yet: its next statement finds the protocol still consuming the termination error
    asyncpg.InternalClientError,
    SchemaUnknown,
)


@contextlib.contextmanager
def store_errors(shown: str) -> Iterator[None]:
    """Report a failing store as one line naming it (``shown``: its URL, password hidden)."""
    try:
        yield
    except (*STORE_FAILURES, StoreUnavailable) as exc:
        problem = hide_passwords(first_line(exc))  # a driver may quote the URL it was given
        raise StoreUnusable(f"cannot use the state store {shown}: {problem}") from exc


def shown_url(url: str | URL) -> str:
    """The URL as the user gave it, for logs and messages: password hidden (also in one that
    does not parse, which is shown to say what is wrong with it)."""
    if isinstance(url, str):
        return hide_passwords(url)
    return url.render_as_string(hide_password=True)


def async_url(url: str | URL) -> URL:
    """Accept ``postgresql://…`` and ``sqlite:///…`` as well as their async driver forms."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise StateUrlError(
            f"{shown_url(url)!r} is not a SQLAlchemy URL (expected postgresql://user@host/db "
            "or sqlite:///path/to/state.db)"
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise StateUrlError(f"unsupported state store {backend!r}: use postgresql or sqlite")
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


def usable_url(url: str | URL) -> URL:
    """``async_url``, and for SQLite a folder that exists: SQLite cannot create it, and left to
    the driver the failure surfaces late and garbled."""
    target = async_url(url)
    database = target.database or ""
    if target.get_backend_name() == "sqlite" and database not in ("", ":memory:"):
        folder = Path(database).parent
        if not folder.is_dir():
            raise StateUrlError(f"the SQLite state store's folder {folder} does not exist")
    return target


def create_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """An engine whose transactions serialise writers on SQLite as row locks do on Postgres."""
    target = usable_url(url)
    if target.get_backend_name() == "sqlite":
        engine = create_async_engine(target, **kwargs)
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    # No pre-ping: it is a round trip on every checkout, on the path of every acknowledgement.
    # A connection that died is invalidated when it fails; that request gets a retriable error.
    kwargs.setdefault("pool_recycle", 3600)
    server_settings = kwargs.setdefault("connect_args", {}).setdefault("server_settings", {})
    server_settings.setdefault("idle_in_transaction_session_timeout", str(IDLE_IN_TRANSACTION_MS))
    return create_async_engine(target, **kwargs)


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def aware_utc(when: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes (stored as UTC); Postgres aware ones."""
    if when is None or when.tzinfo is not None:
        return when
    return when.replace(tzinfo=UTC)
