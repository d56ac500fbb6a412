"""The Postgres write path: lock, fence and count the snapshot rows and append the updates in
one statement and one round trip, with no BEGIN/COMMIT around it unless an archive log row must
commit with it. This is on every acknowledgement's path, so it is kept that lean."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Integer, String, Text, Uuid, bindparam, column, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.types import TypeEngine

from shareproxy.core.persisted import StateDelta
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.archive_log import archived_rows, log_archived
from shareproxy.persistence.folding import fold
from shareproxy.persistence.sql import batch_rows, key_of
from shareproxy.persistence.stored_state import locked_snapshots, state_epochs
from shareproxy.persistence.writes import (
    DEFAULT_FOLD_EVERY,
    StateWriter,
    Verdicts,
    WritesByKey,
    fenced_counts,
    verdict,
)

# One array parameter per column, in the order of the tuples ``fenced_counts`` makes: one element
# per share-partition written (the fence and the count of its new updates) ...
_PER_SHARE_PARTITION: tuple[tuple[str, TypeEngine[Any]], ...] = (
    ("key_group_ids", String()),
    ("key_topic_ids", Uuid()),
    ("key_partitions", Integer()),
    ("key_state_epochs", Integer()),
    ("key_new_updates", Integer()),
)
# ... and one per update row to append, in the order the deltas were made.
_PER_UPDATE: tuple[tuple[str, TypeEngine[Any]], ...] = (
    ("update_group_ids", String()),
    ("update_topic_ids", Uuid()),
    ("update_partitions", Integer()),
    ("update_start_offsets", BigInteger()),
    ("update_state_batches", Text()),
)


def _unnest(params: Sequence[tuple[str, TypeEngine[Any]]]) -> str:
    return "unnest(" + ", ".join(f":{name}" for name, _ in params) + ")"


# The whole Postgres write in one statement, constant whatever the batch size (a VALUES list of N
# rows would be compiled anew for every batch: 170 ms for 1,000 rows), prepared once by asyncpg.
# Updates are appended in the order given (ORDINALITY), so each share-partition's deltas replay
# in the order they were made.
_WRITE_PG = (
    text(
        "WITH counted AS ("
        " UPDATE share_snapshots AS s SET update_count = s.update_count + w.new_updates"
        f" FROM {_unnest(_PER_SHARE_PARTITION)}"
        " AS w(group_id, topic_id, partition, state_epoch, new_updates)"
        " WHERE s.group_id = w.group_id AND s.topic_id = w.topic_id"
        " AND s.partition = w.partition AND s.state_epoch = w.state_epoch"
        " RETURNING s.group_id, s.topic_id, s.partition, s.state_epoch, s.snapshot_epoch,"
        " s.update_count"
        "), appended AS ("
        " INSERT INTO share_updates"
        " (group_id, topic_id, partition, state_epoch, snapshot_epoch, start_offset,"
        " state_batches)"
        " SELECT c.group_id, c.topic_id, c.partition, c.state_epoch, c.snapshot_epoch,"
        " u.start_offset, u.state_batches::jsonb"
        f" FROM {_unnest(_PER_UPDATE)} WITH ORDINALITY"
        " AS u(group_id, topic_id, partition, start_offset, state_batches, ordinal)"
        " JOIN counted AS c ON c.group_id = u.group_id AND c.topic_id = u.topic_id"
        " AND c.partition = u.partition"
        " ORDER BY u.ordinal"
        ") SELECT group_id, topic_id, partition, update_count FROM counted"
    )
    .bindparams(
        *(
            bindparam(name, type_=ARRAY(item_type))
            for name, item_type in (*_PER_SHARE_PARTITION, *_PER_UPDATE)
        )
    )
    .columns(
        column("group_id", String()),
        column("topic_id", Uuid()),
        column("partition", Integer()),
        column("update_count", Integer()),
    )
)


def _arrays(
    params: Sequence[tuple[str, TypeEngine[Any]]], rows: Sequence[tuple[Any, ...]]
) -> dict[str, list[Any]]:
    """Rows → one array parameter per column (for ``unnest``)."""
    return {name: [row[i] for row in rows] for i, (name, _) in enumerate(params)}


def _json(delta: StateDelta) -> str:
    return json.dumps(batch_rows(delta.state_batches), separators=(",", ":"))


class PostgresWriter(StateWriter):
    def __init__(self, engine: AsyncEngine, fold_every: int = DEFAULT_FOLD_EVERY) -> None:
        super().__init__(engine, fold_every)
        # Same pool; asyncpg then sends no BEGIN/COMMIT around single-statement writes.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def _write(self, by_key: WritesByKey) -> Verdicts:
        """One statement, one round trip, atomic on its own: lock, fence and count the
        snapshot rows, and append the updates of those that passed. Folding is compaction and
        happens afterwards in its own transaction, off the acknowledgement's critical path."""
        updates = [
            (k.group_id, k.topic_id, k.partition, w.delta.start_offset, _json(w.delta))
            for k, key_writes in by_key.items()
            for w in key_writes
            if not w.delta.is_empty
        ]
        params = _arrays(_PER_SHARE_PARTITION, fenced_counts(by_key)) | _arrays(
            _PER_UPDATE, updates
        )
        if any(w.archived for ws in by_key.values() for w in ws):
            # rare (a rejection or the delivery limit): the log row commits with the state
            async with self.engine.begin() as conn:
                result = await conn.execute(_WRITE_PG, params)
                counted = {key_of(r): r.update_count for r in result}
                await log_archived(conn, archived_rows(by_key, counted))
                missing = [k for k in by_key if k not in counted]
                known = await state_epochs(conn, missing) if missing else {}
        else:
            async with self._autocommit.connect() as conn:
                result = await conn.execute(_WRITE_PG, params)
                counted = {key_of(r): r.update_count for r in result}
                missing = [k for k in by_key if k not in counted]
                known = await state_epochs(conn, missing) if missing else {}
        results = {key: verdict(key, counted, known) for key in by_key}
        due = [k for k, n in counted.items() if n >= self.fold_every]
        if due:
            async with self.engine.begin() as conn:
                snapshots = await locked_snapshots(conn, due)
                still_due: dict[SharePartitionKey, list[StateDelta]] = {
                    k: [] for k in due if k in snapshots
                }
                await fold(conn, snapshots, still_due)
        return results
