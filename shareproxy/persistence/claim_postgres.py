"""A share-partition claimed on Postgres straight on asyncpg: the next state epoch taken and the
state read back in one transaction of two statements (four for one created first). Every load
at a node's start or a failover claims (a node taking over 1,000 share-partitions claims
1,000), and SQLAlchemy's execution of the same statements cost the node 6-7 times their CPU.

The updates are read in the transaction whose UPDATE locked the snapshot row, not in one
statement with it: a statement reads under the snapshot it started with, so rows a writer
committed while the UPDATE waited for the lock would be missed; and in a transaction of its
own, a fold between the two reads would leave updates already folded, or a snapshot already
replaced."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import cast

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from shareproxy.core.persisted import StateDelta, batches_from_rows
from shareproxy.core.store import LoadedState, SharePartitionKey
from shareproxy.persistence.stored_state import replayed

_CLAIM = (
    "UPDATE share_snapshots SET state_epoch = state_epoch + 1"
    " WHERE group_id = $1 AND topic_id = $2 AND partition = $3"
    " RETURNING state_epoch, snapshot_epoch, start_offset, state_batches::text"
)
_NEW_GROUP = (
    "INSERT INTO share_groups (group_id, group_type, configs) VALUES ($1, 'share', '{}')"
    " ON CONFLICT (group_id) DO NOTHING"
)
_NEW_SNAPSHOT = (
    "INSERT INTO share_snapshots (group_id, topic_id, partition, state_epoch, snapshot_epoch,"
    " start_offset, state_batches, update_count, topic_name)"
    " VALUES ($1, $2, $3, 0, 0, $4, '[]', 0, $5)"
    " ON CONFLICT (group_id, topic_id, partition) DO NOTHING"
)
_UPDATES = (
    "SELECT start_offset, state_batches::text FROM share_updates"
    " WHERE group_id = $1 AND topic_id = $2 AND partition = $3 ORDER BY id"
)


async def claim(engine: AsyncEngine, key: SharePartitionKey) -> LoadedState | None:
    """Take the next state epoch (fencing the previous leader) and load the state; None
    when the share-partition has none stored."""
    return await _claimed(engine, key, None)


async def claim_new(
    engine: AsyncEngine, key: SharePartitionKey, start_offset: int, topic_name: str | None
) -> LoadedState | None:
    """The state created at ``start_offset`` unless it exists (its group too), then claimed,
    in one transaction; None when the group is deleted meanwhile (the caller starts over)."""
    return await _claimed(engine, key, (start_offset, topic_name))


async def _claimed(
    engine: AsyncEngine, key: SharePartitionKey, created: tuple[int, str | None] | None
) -> LoadedState | None:
    pooled = await engine.raw_connection()
    try:
        driver = cast(asyncpg.Connection, pooled.driver_connection)
        where = (key.group_id, key.topic_id, key.partition)
        try:
            async with driver.transaction():
                if created is not None:
                    await driver.execute(_NEW_GROUP, key.group_id)
                    await driver.execute(_NEW_SNAPSHOT, *where, *created)
                row = await driver.fetchrow(_CLAIM, *where)
                if row is None:
                    return None
                updates = await driver.fetch(_UPDATES, *where)
                # read inside the transaction: state this build cannot read (a newer one's,
                # in a rolling upgrade) rolls the claim back rather than fence its leader
                return _loaded(row, updates)
        except asyncpg.ForeignKeyViolationError:  # the group's row was deleted under it
            return None
        except BaseException as exc:  # the pool cannot tell what state the connection is in
            await greenlet_spawn(pooled.invalidate, exc)
            raise
    finally:
        await greenlet_spawn(pooled.close)


def _loaded(row: asyncpg.Record, updates: list[asyncpg.Record]) -> LoadedState:
    """The claimed snapshot row with its update rows replayed in the order written."""
    state_epoch, snapshot_epoch, start_offset, batches = row
    snapshot = SimpleNamespace(start_offset=start_offset, state_batches=json.loads(batches))
    deltas = (StateDelta(s, tuple(batches_from_rows(json.loads(b)))) for s, b in updates)
    return LoadedState(state_epoch, snapshot_epoch, replayed(snapshot, deltas))
