"""A share-partition's stored state from creation to deletion: initialize, read, claim (a new
leader takes the next state epoch), reset, delete, and the lists and epochs around them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.store import LoadedState, SharePartitionKey
from shareproxy.persistence import claim_postgres, stored_state
from shareproxy.persistence.groups import insert_group
from shareproxy.persistence.sql import (
    ARCHIVED_KEY,
    KEYS_PER_QUERY,
    SNAPSHOT_KEY,
    UPDATE_KEY,
    insert_ignore,
    key_in,
    key_is,
    key_of,
)
from shareproxy.persistence.tables import share_archived, share_snapshots, share_updates


def _new_snapshot(
    key: SharePartitionKey, start_offset: int, topic_name: str | None
) -> dict[str, Any]:
    """A share-partition's first snapshot row: state epoch 0, nothing in flight."""
    return {
        "group_id": key.group_id,
        "topic_id": key.topic_id,
        "partition": key.partition,
        "state_epoch": 0,
        "snapshot_epoch": 0,
        "start_offset": start_offset,
        "state_batches": [],
        "update_count": 0,
        "topic_name": topic_name,
    }


async def _delete(conn: AsyncConnection, keys: Sequence[SharePartitionKey]) -> int:
    """Snapshot, update and archive-log rows of ``keys``; how many had a snapshot."""
    await conn.execute(delete(share_updates).where(key_in(UPDATE_KEY, keys)))
    await conn.execute(delete(share_archived).where(key_in(ARCHIVED_KEY, keys)))
    result = await conn.execute(delete(share_snapshots).where(key_in(SNAPSHOT_KEY, keys)))
    return result.rowcount


class SharePartitionStates:
    """The lifecycle of the ``share_snapshots`` rows (and the rows that hang off them)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def initialize(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        return await self._created(key, start_offset, topic_name, stored_state.load)

    async def _created(
        self,
        key: SharePartitionKey,
        start_offset: int,
        topic_name: str | None,
        then: Callable[[AsyncConnection, SharePartitionKey], Awaitable[LoadedState | None]],
    ) -> LoadedState | None:
        """The state created unless it exists, then ``then`` in the same transaction. None
        when the group is deleted meanwhile (its row goes between this transaction's
        statements, which an insert that finds a row does not lock): the caller starts over."""
        try:
            async with self.engine.begin() as conn:
                await insert_group(conn, key.group_id)
                await conn.execute(
                    insert_ignore(
                        conn, share_snapshots, ["group_id", "topic_id", "partition"]
                    ).values(**_new_snapshot(key, start_offset, topic_name))
                )
                return await then(conn, key)
        except IntegrityError:  # the snapshot's group row was deleted under it
            return None

    async def read(self, key: SharePartitionKey) -> LoadedState | None:
        async with self.engine.connect() as conn:
            return await stored_state.load(conn, key)

    async def state_epochs(self, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, int]:
        out: dict[SharePartitionKey, int] = {}
        async with self.engine.connect() as conn:
            for i in range(0, len(keys), KEYS_PER_QUERY):
                out.update(await stored_state.state_epochs(conn, keys[i : i + KEYS_PER_QUERY]))
        return out

    async def claim(self, key: SharePartitionKey) -> LoadedState | None:
        """Take the next state epoch (fencing the previous leader) and load the state."""
        if self.engine.dialect.name == "postgresql":
            return await claim_postgres.claim(self.engine, key)
        async with self.engine.begin() as conn:
            return await _claim(conn, key)

    async def claim_new(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        """The state created unless it exists, then claimed: one transaction, not the two of
        ``initialize`` and ``claim`` (a thousand new share-partitions load at a group's start)."""
        if self.engine.dialect.name == "postgresql":
            return await claim_postgres.claim_new(self.engine, key, start_offset, topic_name)
        return await self._created(key, start_offset, topic_name, _claim)

    async def reset(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        """Start over at ``start_offset`` with nothing in flight, under new epochs."""
        async with self.engine.begin() as conn:
            await insert_group(conn, key.group_id)
            existing = await stored_state.locked_snapshots(conn, [key])
            await conn.execute(delete(share_updates).where(key_is(UPDATE_KEY, key)))
            if key in existing:
                row = existing[key]
                await conn.execute(
                    update(share_snapshots)
                    .where(key_is(SNAPSHOT_KEY, key))
                    .values(
                        state_epoch=row.state_epoch + 1,
                        snapshot_epoch=row.snapshot_epoch + 1,
                        start_offset=start_offset,
                        state_batches=[],
                        update_count=0,
                    )
                )
            else:
                await conn.execute(
                    insert(share_snapshots).values(**_new_snapshot(key, start_offset, topic_name))
                )
            loaded = await stored_state.load(conn, key)
            assert loaded is not None
            return loaded

    async def delete(self, keys: Sequence[SharePartitionKey]) -> int:
        if not keys:
            return 0
        async with self.engine.begin() as conn:
            return await _delete(conn, keys)

    async def delete_at_epoch(self, key: SharePartitionKey, state_epoch: int) -> bool:
        """Delete the state only if its epoch is still ``state_epoch``: a leader that claimed it
        since (a proxy using it) wins, and nothing is deleted."""
        async with self.engine.begin() as conn:
            rows = await stored_state.locked_snapshots(conn, [key])
            if key not in rows or rows[key].state_epoch != state_epoch:
                return False
            return await _delete(conn, [key]) == 1

    async def count_partitions(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(share_snapshots.c.group_id, func.count()).group_by(
                    share_snapshots.c.group_id
                )
            )
            return {r[0]: int(r[1]) for r in rows}

    async def list_partitions(self, group_id: str) -> list[SharePartitionKey]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(*SNAPSHOT_KEY)
                .where(share_snapshots.c.group_id == group_id)
                .order_by(share_snapshots.c.topic_id, share_snapshots.c.partition)
            )
            return [key_of(r) for r in rows]


async def _claim(conn: AsyncConnection, key: SharePartitionKey) -> LoadedState | None:
    result = await conn.execute(
        update(share_snapshots)
        .where(key_is(SNAPSHOT_KEY, key))
        .values(state_epoch=share_snapshots.c.state_epoch + 1)
    )
    if result.rowcount == 0:
        return None
    return await stored_state.load(conn, key)
