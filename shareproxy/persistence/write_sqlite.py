"""The SQLite write path: the transaction holds the database's write lock, so each
share-partition is fenced and counted by a statement of its own (there are no round trips to
save), and a share-partition due for folding folds in the same transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncConnection

from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.archive_log import archived_rows, log_archived
from shareproxy.persistence.folding import fold
from shareproxy.persistence.sql import batch_rows
from shareproxy.persistence.stored_state import locked_snapshots, state_epochs
from shareproxy.persistence.tables import share_snapshots, share_updates
from shareproxy.persistence.writes import (
    StateWriter,
    Verdicts,
    WritesByKey,
    fenced_counts,
    verdict,
)


async def _count_updates(
    conn: AsyncConnection, by_key: WritesByKey
) -> dict[SharePartitionKey, tuple[int, int]]:
    """Fence and count per key: key → (snapshot epoch, update count) for those whose state
    epoch matches every write's."""
    s = share_snapshots.c
    out = {}
    for group_id, topic_id, partition, state_epoch, new_updates in fenced_counts(by_key):
        row = (
            await conn.execute(
                update(share_snapshots)
                .where(
                    s.group_id == group_id,
                    s.topic_id == topic_id,
                    s.partition == partition,
                    s.state_epoch == state_epoch,
                )
                .values(update_count=s.update_count + new_updates)
                .returning(s.snapshot_epoch, s.update_count)
            )
        ).first()
        if row is not None:
            out[SharePartitionKey(group_id, topic_id, partition)] = (
                row.snapshot_epoch,
                row.update_count,
            )
    return out


class SqliteWriter(StateWriter):
    async def _write(self, by_key: WritesByKey) -> Verdicts:
        results: Verdicts = {}
        async with self.engine.begin() as conn:
            counted = await _count_updates(conn, by_key)
            missing = [k for k in by_key if k not in counted]
            known = await state_epochs(conn, missing) if missing else {}
            update_rows: list[dict[str, Any]] = []
            to_fold: dict[SharePartitionKey, list[StateDelta]] = {}
            for key, key_writes in by_key.items():
                results[key] = verdict(key, counted, known)
                if key not in counted:
                    continue
                deltas = [w.delta for w in key_writes if not w.delta.is_empty]
                if not deltas:
                    continue
                snapshot_epoch, update_count = counted[key]
                if update_count >= self.fold_every:
                    to_fold[key] = deltas
                    continue
                update_rows.extend(
                    {
                        "group_id": key.group_id,
                        "topic_id": key.topic_id,
                        "partition": key.partition,
                        "state_epoch": key_writes[0].state_epoch,
                        "snapshot_epoch": snapshot_epoch,
                        "start_offset": d.start_offset,
                        "state_batches": batch_rows(d.state_batches),
                    }
                    for d in deltas
                )
            if update_rows:
                await conn.execute(insert(share_updates), update_rows)
            await log_archived(conn, archived_rows(by_key, counted))
            if to_fold:
                snapshots = await locked_snapshots(conn, list(to_fold))
                await fold(conn, snapshots, to_fold)
        return results
