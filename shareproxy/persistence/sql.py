"""SQL pieces every part of the store shares: a share-partition's key columns in each table, key
lists bounded per query, state batches as stored rows, and the dialect's own INSERT.

The three state tables key a share-partition by (group id, topic id, partition); the helpers
below are the one place that spells that key out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from shareproxy.core.persisted import PersistedBatch
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.tables import share_archived, share_snapshots, share_updates

SNAPSHOT_KEY = (share_snapshots.c.group_id, share_snapshots.c.topic_id, share_snapshots.c.partition)
UPDATE_KEY = (share_updates.c.group_id, share_updates.c.topic_id, share_updates.c.partition)
ARCHIVED_KEY = (share_archived.c.group_id, share_archived.c.topic_id, share_archived.c.partition)
KEYS_PER_QUERY = 500  # bound parameters per IN list stay well inside every driver's limit

KeyColumns = tuple[Any, Any, Any]


def key_of(row: Any) -> SharePartitionKey:
    """The share-partition a row of any of the state tables belongs to."""
    return SharePartitionKey(row.group_id, row.topic_id, row.partition)


def key_values(key: SharePartitionKey) -> tuple[str, UUID, int]:
    return (key.group_id, key.topic_id, key.partition)


def key_is(columns: KeyColumns, key: SharePartitionKey) -> ColumnElement[bool]:
    return tuple_(*columns) == key_values(key)


def key_in(columns: KeyColumns, keys: Iterable[SharePartitionKey]) -> ColumnElement[bool]:
    return tuple_(*columns).in_([key_values(k) for k in keys])


def batch_rows(batches: Iterable[PersistedBatch]) -> list[list[int]]:
    """State batches as the JSON column stores them: ``[first, last, state, count]`` rows."""
    return [b.to_row() for b in batches]


def dialect_insert(conn: AsyncConnection) -> Callable[[Any], Any]:
    """The connection's dialect INSERT, which knows ON CONFLICT (the generic one does not)."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def insert_ignore(conn: AsyncConnection, table: Any, index: Sequence[str]) -> Any:
    """INSERT … ON CONFLICT DO NOTHING on ``index``: create the row unless it exists."""
    return dialect_insert(conn)(table).on_conflict_do_nothing(index_elements=list(index))
