"""Whole-group reads for the batch jobs (reconcile, report, repairs): every share-partition's
state as a leader would load it, and the archive log of delivered records that were archived."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.core.store import LoadedState, SharePartitionKey
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.sql import SNAPSHOT_KEY, key_of
from shareproxy.persistence.stored_state import replayed, stored_updates
from shareproxy.persistence.tables import share_archived, share_snapshots


@dataclass(frozen=True, slots=True)
class StoredPartition:
    """A share-partition's state as the batch jobs read it."""

    key: SharePartitionKey
    topic_name: str | None
    loaded: LoadedState


@dataclass(frozen=True, slots=True)
class ArchivedRange:
    """Delivered records archived together, as the poison report lists them."""

    key: SharePartitionKey
    first_offset: int
    last_offset: int
    delivery_count: int
    archived_at: datetime
    reason: str | None = None  # None: archived before the reason was kept


class BatchScans:
    """Reads over many share-partitions at once, in key order."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def scan(self, group_ids: Sequence[str]) -> list[StoredPartition]:
        """Every share-partition of these groups, state folded as a leader would load it."""
        async with self.engine.connect() as conn:
            snapshots = list(
                await conn.execute(
                    select(share_snapshots)
                    .where(share_snapshots.c.group_id.in_(list(group_ids)))
                    .order_by(*SNAPSHOT_KEY)
                )
            )
            updates = await stored_updates(conn, [key_of(r) for r in snapshots])
        out = []
        for row in snapshots:
            key = key_of(row)
            state = replayed(row, updates.get(key, []))
            out.append(
                StoredPartition(
                    key, row.topic_name, LoadedState(row.state_epoch, row.snapshot_epoch, state)
                )
            )
        return out

    async def archived(self, group_ids: Sequence[str]) -> list[ArchivedRange]:
        a = share_archived.c
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(share_archived)
                .where(a.group_id.in_(list(group_ids)))
                .order_by(a.group_id, a.topic_id, a.partition, a.first_offset)
            )
            return [
                ArchivedRange(
                    key_of(r),
                    r.first_offset,
                    r.last_offset,
                    r.delivery_count,
                    aware_utc(r.archived_at),  # type: ignore[arg-type]  # a NOT NULL column
                    r.reason,
                )
                for r in rows
            ]
