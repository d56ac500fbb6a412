"""The Postgres write path: lock, fence and count the snapshot rows and append the updates in
one statement and one round trip, with no BEGIN/COMMIT around it unless an archive log row must
commit with it. This is on every acknowledgement's path, so it is kept that lean: the statement
goes straight to asyncpg on the pooled connection, prepared once per connection, with no
SQLAlchemy compilation, parameter processing or result adaptation per write."""

from __future__ import annotations

from typing import Any, cast

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import PersistedBatch, StateDelta
from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.archive_log import archived_rows, log_archived
from shareproxy.persistence.folding import fold
from shareproxy.persistence.stored_state import locked_snapshots, state_epochs
from shareproxy.persistence.writes import (
    DEFAULT_FOLD_EVERY,
    StateWriter,
    Verdicts,
    WritesByKey,
    verdict,
)

# The whole Postgres write in one statement, constant whatever the batch size (a VALUES list of N
# rows would be compiled anew for every batch: 170 ms for 1,000 rows), prepared once per
# connection by asyncpg's statement cache. Parameters, one array each, are: per share-partition
# written (the fence and the count of its new updates) $1-$5; per update row to append, in the
# order the deltas were made, $6-$8, where $6 names its share-partition by its 1-based place in
# $1-$5. Updates are appended in the order given (ORDINALITY), so each share-partition's deltas
# replay in the order they were made. The answer names each share-partition that passed the
# fence by the same place.
_WRITE_PG = (
    "WITH counted AS ("
    " UPDATE share_snapshots AS s SET update_count = s.update_count + w.new_updates"
    " FROM unnest($1::varchar[], $2::uuid[], $3::int[], $4::int[], $5::int[]) WITH ORDINALITY"
    " AS w(group_id, topic_id, partition, state_epoch, new_updates, place)"
    " WHERE s.group_id = w.group_id AND s.topic_id = w.topic_id"
    " AND s.partition = w.partition AND s.state_epoch = w.state_epoch"
    " RETURNING w.place, s.group_id, s.topic_id, s.partition, s.state_epoch, s.snapshot_epoch,"
    " s.update_count"
    "), appended AS ("
    " INSERT INTO share_updates"
    " (group_id, topic_id, partition, state_epoch, snapshot_epoch, start_offset,"
    " state_batches)"
    " SELECT c.group_id, c.topic_id, c.partition, c.state_epoch, c.snapshot_epoch,"
    " u.start_offset, u.state_batches::jsonb"
    " FROM unnest($6::bigint[], $7::bigint[], $8::text[]) WITH ORDINALITY"
    " AS u(place, start_offset, state_batches, ordinal)"
    " JOIN counted AS c ON c.place = u.place"
    " ORDER BY u.ordinal"
    ") SELECT place, update_count FROM counted"
)


def _driver(pooled: PoolProxiedConnection) -> asyncpg.Connection:
    return cast(asyncpg.Connection, pooled.driver_connection)


async def _fetch_counted(
    pooled: PoolProxiedConnection, keys: list[SharePartitionKey], arrays: Arrays
) -> Counted:
    """The write statement on ``pooled``; a failure invalidates it, as the pool cannot tell
    what state the connection is in, nor whether it is alive."""
    try:
        rows = await _driver(pooled).fetch(_WRITE_PG, *arrays)
    except BaseException as exc:
        await greenlet_spawn(pooled.invalidate, exc)
        raise
    return {keys[place - 1]: n for place, n in rows}


def _json(batches: tuple[PersistedBatch, ...]) -> str:
    """State batches as the JSON text the column stores, ``[[first, last, state, count], …]``
    (a fifth value only when set), built directly: json.dumps of rows built first costs twice
    as much on every acknowledgement."""
    return (
        "["
        + ",".join(
            [
                f"[{f},{la},{s:d},{c},{at}]" if at else f"[{f},{la},{s:d},{c}]"
                for f, la, s, c, at in batches
            ]
        )
        + "]"
    )


Arrays = tuple[list[Any], ...]
Counted = dict[SharePartitionKey, int]  # the new update count of each share-partition written


def _parameters(by_key: WritesByKey) -> tuple[list[SharePartitionKey], Arrays]:
    """The share-partitions fenced, in their places, and the statement's eight arrays. A
    share-partition whose writers disagree on the state epoch is left out (at most one of
    them can be current: all are refused)."""
    keys: list[SharePartitionKey] = []
    group_ids: list[str] = []
    topic_ids: list[Any] = []
    partitions: list[int] = []
    epochs: list[int] = []
    counts: list[int] = []
    places: list[int] = []
    starts: list[int] = []
    states: list[str] = []
    for key, key_writes in by_key.items():
        epoch = key_writes[0].state_epoch
        if any(w.state_epoch != epoch for w in key_writes):
            continue
        keys.append(key)
        place = len(keys)
        n = 0
        for w in key_writes:
            delta: StateDelta = w.delta
            if not delta.is_empty:
                n += 1
                places.append(place)
                starts.append(delta.start_offset)
                states.append(_json(delta.state_batches))
        group_ids.append(key.group_id)
        topic_ids.append(key.topic_id)
        partitions.append(key.partition)
        epochs.append(epoch)
        counts.append(n)
    return keys, (group_ids, topic_ids, partitions, epochs, counts, places, starts, states)


class PostgresWriter(StateWriter):
    """``keep_connection``: the hot write keeps one pooled connection between writes (until
    ``close``), as a server's group committer, which writes one batch at a time, wants."""

    def __init__(
        self,
        engine: AsyncEngine,
        fold_every: int = DEFAULT_FOLD_EVERY,
        *,
        keep_connection: bool = False,
    ) -> None:
        super().__init__(engine, fold_every)
        # Same pool; asyncpg then sends no BEGIN/COMMIT around single-statement writes.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._keep = keep_connection
        self._kept: PoolProxiedConnection | None = None
        self._kept_busy = False

    async def _write(self, by_key: WritesByKey) -> Verdicts:
        """One statement, one round trip, atomic on its own: lock, fence and count the
        snapshot rows, and append the updates of those that passed. Folding is compaction and
        happens afterwards in its own transaction, off the acknowledgement's critical path."""
        keys, arrays = _parameters(by_key)
        if any(w.archived for ws in by_key.values() for w in ws):
            counted = await self._write_archiving(by_key, keys, arrays)
        else:
            counted = await self._write_alone(keys, arrays)
        results: Verdicts = dict.fromkeys(counted, ErrorCode.NONE)
        if len(counted) < len(by_key):
            missing = [k for k in by_key if k not in counted]
            async with self._autocommit.connect() as conn:
                known = await state_epochs(conn, missing)
            for k in missing:
                results[k] = verdict(k, counted, known)
        due = [k for k, n in counted.items() if n >= self.fold_every]
        if due:
            async with self.engine.begin() as conn:
                snapshots = await locked_snapshots(conn, due)
                still_due: dict[SharePartitionKey, list[StateDelta]] = {
                    k: [] for k in due if k in snapshots
                }
                await fold(conn, snapshots, still_due)
        return results

    async def _write_alone(self, keys: list[SharePartitionKey], arrays: Arrays) -> Counted:
        """The statement alone, outside any transaction. A checkout from the pool and its
        return (the pool's bookkeeping, two greenlet hops) cost twice the CPU of the statement
        (~120 against ~60 µs), so a writer told to keeps its connection; a write that finds it
        busy, or a writer that keeps none, takes one straight from the pool."""
        if not self._keep or self._kept_busy:
            pooled = await self.engine.raw_connection()
            try:
                return await _fetch_counted(pooled, keys, arrays)
            finally:
                # back to the pool, in a greenlet: a connection past the pool's size is closed
                # there, and closing an asyncpg connection awaits
                await greenlet_spawn(pooled.close)
        self._kept_busy = True
        try:
            if self._kept is not None and _driver(self._kept).is_closed():  # the server's doing
                stale, self._kept = self._kept, None
                await greenlet_spawn(stale.invalidate)
                await greenlet_spawn(stale.close)
            if self._kept is None:
                self._kept = await self.engine.raw_connection()
            kept = self._kept
            try:
                return await _fetch_counted(kept, keys, arrays)
            except BaseException:
                self._kept = None
                await greenlet_spawn(kept.close)  # invalidated: its pool slot is free again
                raise
        finally:
            self._kept_busy = False

    async def close(self) -> None:
        """Give the kept connection back to the pool, once writes have stopped (before the
        engine is disposed); later writes take theirs from the pool."""
        self._keep = False
        kept, self._kept = self._kept, None
        if kept is not None:
            if _driver(kept).is_closed():
                await greenlet_spawn(kept.invalidate)
            await greenlet_spawn(kept.close)

    async def _write_archiving(
        self, by_key: WritesByKey, keys: list[SharePartitionKey], arrays: Arrays
    ) -> Counted:
        """Rare (a rejection or the delivery limit): the archive log rows commit with the
        state, in one transaction on one connection."""
        async with self._autocommit.connect() as conn:
            raw = await conn.get_raw_connection()
            driver = cast(asyncpg.Connection, raw.driver_connection)
            try:
                async with driver.transaction():
                    rows = await driver.fetch(_WRITE_PG, *arrays)
                    counted = {keys[place - 1]: n for place, n in rows}
                    await log_archived(conn, archived_rows(by_key, counted))
            except BaseException:
                await conn.invalidate()
                raise
        return counted
