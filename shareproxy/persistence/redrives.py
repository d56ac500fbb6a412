"""The archive log read by the admin API and marked by redrives: a page of a group's archived
ranges, and the claim that marks ranges redriven before their copies are produced.

A claim plans every selection and marks it in one transaction, the rows locked (Postgres),
so two redrives of the same offsets cannot both claim them: the second finds them redriven.
Marking splits a range where only part of it is redriven.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.redrive import (
    ArchivedEntry,
    Interval,
    Selection,
    SelectionPlan,
    claimed_pieces,
    plan,
)
from shareproxy.core.states import ArchiveReason
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.sql import ARCHIVED_KEY, key_in, key_is, key_of
from shareproxy.persistence.tables import share_archived

_a = share_archived.c


def entry_of(row: Any) -> ArchivedEntry:
    return ArchivedEntry(
        key_of(row),
        row.first_offset,
        row.last_offset,
        row.delivery_count,
        row.reason,
        aware_utc(row.archived_at),  # type: ignore[arg-type]  # a NOT NULL column
        aware_utc(row.redriven_at),
    )


class ArchiveLogRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def archived_page(
        self,
        group_id: str,
        keys: Sequence[SharePartitionKey] | None,
        from_offset: int,
        limit: int,
    ) -> list[ArchivedEntry]:
        query = select(share_archived).where(_a.group_id == group_id)
        if keys is not None:
            if not keys:
                return []
            query = query.where(key_in(ARCHIVED_KEY, keys))
        query = (
            query.where(_a.last_offset >= from_offset)
            .order_by(_a.topic_id, _a.partition, _a.first_offset)
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [entry_of(r) for r in await conn.execute(query)]

    async def claim_redrive(
        self, selections: Sequence[Selection], dry_run: bool, max_records: int
    ) -> list[SelectionPlan]:
        async with self.engine.begin() as conn:
            plans = []
            entries: dict[SharePartitionKey, list[ArchivedEntry]] = {}
            # what earlier selections of this call redrive: later ones find it redriven
            planned: dict[SharePartitionKey, list[ArchivedEntry]] = {}
            now = datetime.now(UTC)
            for s in selections:
                if s.key not in entries:
                    entries[s.key] = await _locked(conn, s.key)
                p = plan(s, entries[s.key] + planned.get(s.key, []))
                plans.append(p)
                planned.setdefault(s.key, []).extend(
                    ArchivedEntry(s.key, first, last, 0, None, now, now)
                    for first, last in p.redrive
                )
            refused = sum(p.records for p in plans) > max_records
            if dry_run or refused or any(p.missing or p.empty for p in plans):
                return plans
            for p in plans:
                for claim in p.redrive:
                    await _mark(conn, entries[p.selection.key], claim, now)
                # a later selection of the same partition sees these marked
                entries[p.selection.key] = await _locked(conn, p.selection.key)
            return plans

    async def release_redrive(self, key: SharePartitionKey, intervals: Sequence[Interval]) -> None:
        async with self.engine.begin() as conn:
            for first, last in intervals:
                await conn.execute(
                    update(share_archived)
                    .where(
                        key_is(ARCHIVED_KEY, key),
                        _a.first_offset >= first,
                        _a.last_offset <= last,
                    )
                    .values(redriven_at=None)
                )

    async def explain_rejection(self, key: SharePartitionKey, offset: int, reason: str) -> bool:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(share_archived)
                .where(
                    key_is(ARCHIVED_KEY, key),
                    _a.first_offset == offset,
                    _a.last_offset == offset,
                    _a.reason == ArchiveReason.REJECTED.value,
                )
                .values(reason=reason)
            )
            return bool(result.rowcount)


async def _locked(conn: AsyncConnection, key: SharePartitionKey) -> list[ArchivedEntry]:
    """The share-partition's archive log ranges, locked until the transaction ends (Postgres;
    SQLite's one writer at a time serializes the transactions)."""
    rows = await conn.execute(
        select(share_archived)
        .where(key_is(ARCHIVED_KEY, key))
        .order_by(_a.first_offset)
        .with_for_update()
    )
    return [entry_of(r) for r in rows]


async def _mark(
    conn: AsyncConnection, entries: Sequence[ArchivedEntry], claim: Interval, now: datetime
) -> None:
    """Mark offsets ``claim`` redriven in every unredriven range holding any of them."""
    for e in entries:
        if e.redriven_at is not None or e.last_offset < claim[0] or e.first_offset > claim[1]:
            continue
        within = (max(e.first_offset, claim[0]), min(e.last_offset, claim[1]))
        row = and_(key_is(ARCHIVED_KEY, e.key), _a.first_offset == e.first_offset)
        await conn.execute(delete(share_archived).where(row))
        values = [
            {
                "group_id": e.key.group_id,
                "topic_id": e.key.topic_id,
                "partition": e.key.partition,
                "first_offset": first,
                "last_offset": last,
                "delivery_count": e.delivery_count,
                "reason": e.reason,
                "archived_at": e.archived_at,
                "redriven_at": now if redriven else None,
            }
            for (first, last), redriven in claimed_pieces(e, within)
        ]
        await conn.execute(insert(share_archived), values)
