"""Folding (compaction): a share-partition's snapshot and its update rows replaced by one new
snapshot under the next snapshot epoch, as KIP-932's share coordinator writes a new ShareSnapshot
every so many ShareUpdates. The caller holds the snapshot rows' locks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, delete, update
from sqlalchemy.ext.asyncio import AsyncConnection

from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.sql import UPDATE_KEY, batch_rows, key_in
from shareproxy.persistence.stored_state import replayed, stored_updates
from shareproxy.persistence.tables import share_snapshots, share_updates

# One executemany for every folded share-partition; the bound names differ from the columns'
# (SQLAlchemy reserves those for the SET clause).
_FOLD_UPDATE = (
    update(share_snapshots)
    .where(
        (share_snapshots.c.group_id == bindparam("key_group_id"))
        & (share_snapshots.c.topic_id == bindparam("key_topic_id"))
        & (share_snapshots.c.partition == bindparam("key_partition"))
    )
    .values(
        snapshot_epoch=bindparam("new_snapshot_epoch"),
        start_offset=bindparam("new_start_offset"),
        state_batches=bindparam("new_state_batches"),
        update_count=0,
    )
)


async def fold(
    conn: AsyncConnection,
    snapshots: Mapping[SharePartitionKey, Any],
    to_fold: Mapping[SharePartitionKey, list[StateDelta]],
) -> None:
    """Replace snapshot + updates (+ the deltas of ``to_fold`` not yet written as updates)
    with a new snapshot (snapshot epoch + 1)."""
    keys = list(to_fold)
    stored = await stored_updates(conn, keys)
    new_rows = []
    for key, deltas in to_fold.items():
        row = snapshots[key]
        state = replayed(row, [*stored.get(key, []), *deltas])
        new_rows.append(
            {
                "key_group_id": key.group_id,
                "key_topic_id": key.topic_id,
                "key_partition": key.partition,
                "new_snapshot_epoch": row.snapshot_epoch + 1,
                "new_start_offset": state.start_offset,
                "new_state_batches": batch_rows(state.batches),
            }
        )
    await conn.execute(delete(share_updates).where(key_in(UPDATE_KEY, keys)))
    await conn.execute(_FOLD_UPDATE, new_rows)
