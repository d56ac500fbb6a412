"""The archive log: delivered records that were archived (rejected, or past the delivery
limit), written with the state change that archived them. The state forgets them once SPSO
moves past; the poison report still lists them from here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncConnection

from shareproxy.core.store import PartitionWrite, SharePartitionKey
from shareproxy.persistence.sql import dialect_insert
from shareproxy.persistence.tables import share_archived


def archived_rows(
    by_key: Mapping[SharePartitionKey, list[PartitionWrite]],
    accepted: Iterable[SharePartitionKey] | None = None,
) -> list[dict[str, Any]]:
    """The archive log rows of the writes that passed the epoch check."""
    keys = by_key if accepted is None else [k for k in accepted if k in by_key]
    return [
        {
            "group_id": k.group_id,
            "topic_id": k.topic_id,
            "partition": k.partition,
            "first_offset": run.first,
            "last_offset": run.last,
            "delivery_count": run.delivery_count,
            "reason": run.reason.value,
        }
        for k in keys
        for w in by_key[k]
        for run in w.archived
    ]


async def log_archived(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """Upsert: a later delta may carry the same archived range again, or a longer one."""
    if not rows:
        return
    greatest = func.greatest if conn.dialect.name == "postgresql" else func.max
    stmt = dialect_insert(conn)(share_archived)
    stmt = stmt.on_conflict_do_update(
        index_elements=["group_id", "topic_id", "partition", "first_offset"],
        set_={
            "last_offset": greatest(share_archived.c.last_offset, stmt.excluded.last_offset),
            "delivery_count": greatest(
                share_archived.c.delivery_count, stmt.excluded.delivery_count
            ),
            "reason": func.coalesce(share_archived.c.reason, stmt.excluded.reason),
        },
    )
    await conn.execute(stmt, rows)
