"""``ShareStateStore`` on SQLAlchemy: snapshot + update rows, epoch-fenced, group-committed."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    Text,
    Uuid,
    bindparam,
    column,
    delete,
    func,
    insert,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import (
    PersistedBatch,
    PersistedState,
    StateDelta,
    batches_from_rows,
)
from shareproxy.core.store import (
    LoadedState,
    PartitionWrite,
    ShareGroupRecord,
    SharePartitionKey,
)
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.tables import (
    share_archived,
    share_groups,
    share_snapshots,
    share_updates,
)

DEFAULT_FOLD_EVERY = 50
_KEY_COLUMNS = (share_snapshots.c.group_id, share_snapshots.c.topic_id, share_snapshots.c.partition)
_UPDATE_KEY = (share_updates.c.group_id, share_updates.c.topic_id, share_updates.c.partition)
_KEYS_PER_QUERY = 500  # bound parameters per IN list stay well inside every driver's limit


def _rows(batches: Iterable[PersistedBatch]) -> list[list[int]]:
    return [b.to_row() for b in batches]


def _columns(names: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Rows → one array parameter per column (for ``unnest``)."""
    return {name: [row[i] for row in rows] for i, name in enumerate(names)}


def _verdict(
    key: SharePartitionKey, counted: Mapping[SharePartitionKey, Any], known: Mapping[Any, int]
) -> ErrorCode:
    """A write passed the epoch check (counted), was fenced (the row exists), or has no state."""
    if key in counted:
        return ErrorCode.NONE
    return ErrorCode.FENCED_STATE_EPOCH if key in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _json(delta: StateDelta) -> str:
    return json.dumps(_rows(delta.state_batches), separators=(",", ":"))


_batches = batches_from_rows


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


def _archived_rows(
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
            "first_offset": first,
            "last_offset": last,
            "delivery_count": count,
        }
        for k in keys
        for w in by_key[k]
        for first, last, count in w.archived
    ]


@dataclass(frozen=True, slots=True)
class GroupMembership:
    """A share group as the expiry rules see it."""

    group_id: str
    configs: Mapping[str, str]
    subscribed_topics: tuple[str, ...] | None  # None: no member ever joined
    subscription_changed_at: datetime | None
    empty_since: datetime | None


@dataclass(frozen=True, slots=True)
class StoredPartition:
    """A share-partition's state as the batch jobs read it."""

    key: SharePartitionKey
    topic_name: str | None
    loaded: LoadedState


@dataclass(frozen=True, slots=True)
class ArchivedRange:
    key: SharePartitionKey
    first_offset: int
    last_offset: int
    delivery_count: int
    archived_at: datetime


def _key_of(row: Any) -> SharePartitionKey:
    return SharePartitionKey(row.group_id, row.topic_id, row.partition)


class SqlShareStateStore:
    """The durable share-partition state, behind the core's ``ShareStateStore`` Protocol."""

    def __init__(self, engine: AsyncEngine, fold_every: int = DEFAULT_FOLD_EVERY) -> None:
        if fold_every < 1:
            raise ValueError("fold_every must be at least 1")
        self.engine = engine
        self.fold_every = fold_every
        self._dialect = engine.dialect.name
        # Same pool; asyncpg then sends no BEGIN/COMMIT around single-statement writes.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    # ----------------------------------------------------------------- groups
    async def ensure_group(self, group_id: str) -> ShareGroupRecord:
        async with self.engine.begin() as conn:
            await self._insert_group(conn, group_id)
            return await self._group(conn, group_id)  # type: ignore[return-value]

    async def get_group(self, group_id: str) -> ShareGroupRecord | None:
        async with self.engine.connect() as conn:
            return await self._group(conn, group_id)

    async def list_groups(self) -> list[ShareGroupRecord]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(share_groups).order_by(share_groups.c.group_id))
            return [ShareGroupRecord(r.group_id, dict(r.configs)) for r in rows]

    async def set_group_configs(
        self, group_id: str, configs: Mapping[str, str | None]
    ) -> ShareGroupRecord:
        async with self.engine.begin() as conn:
            await self._insert_group(conn, group_id)
            current = await self._group(conn, group_id, for_update=True)
            assert current is not None
            merged = dict(current.configs)
            for name, value in configs.items():
                if value is None:
                    merged.pop(name, None)
                else:
                    merged[name] = value
            await conn.execute(
                update(share_groups)
                .where(share_groups.c.group_id == group_id)
                .values(configs=merged)
            )
            return ShareGroupRecord(group_id, merged)

    async def _insert_group(self, conn: AsyncConnection, group_id: str) -> None:
        values = {"group_id": group_id, "group_type": "share", "configs": {}}
        await conn.execute(self._insert_ignore(share_groups, ["group_id"]).values(**values))

    async def _group(
        self, conn: AsyncConnection, group_id: str, for_update: bool = False
    ) -> ShareGroupRecord | None:
        query = select(share_groups).where(share_groups.c.group_id == group_id)
        if for_update:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return ShareGroupRecord(row.group_id, dict(row.configs)) if row else None

    def _insert_ignore(self, table: Any, index: list[str]) -> Any:
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(table).on_conflict_do_nothing(index_elements=index)

    # ----------------------------------------------------------------- share-partitions
    async def initialize(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        async with self.engine.begin() as conn:
            await self._insert_group(conn, key.group_id)
            await conn.execute(
                self._insert_ignore(share_snapshots, ["group_id", "topic_id", "partition"]).values(
                    **_new_snapshot(key, start_offset, topic_name)
                )
            )
            loaded = await self._load(conn, key)
            assert loaded is not None
            return loaded

    async def read(self, key: SharePartitionKey) -> LoadedState | None:
        async with self.engine.connect() as conn:
            return await self._load(conn, key)

    async def state_epochs(self, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, int]:
        out: dict[SharePartitionKey, int] = {}
        async with self.engine.connect() as conn:
            for i in range(0, len(keys), _KEYS_PER_QUERY):
                out.update(await self._state_epochs(conn, keys[i : i + _KEYS_PER_QUERY]))
        return out

    async def claim(self, key: SharePartitionKey) -> LoadedState | None:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(share_snapshots)
                .where(tuple_(*_KEY_COLUMNS) == (key.group_id, key.topic_id, key.partition))
                .values(state_epoch=share_snapshots.c.state_epoch + 1)
            )
            if result.rowcount == 0:
                return None
            return await self._load(conn, key)

    async def reset(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        async with self.engine.begin() as conn:
            await self._insert_group(conn, key.group_id)
            existing = await self._locked_snapshots(conn, [key])
            await conn.execute(delete(share_updates).where(self._update_key_is(key)))
            if key in existing:
                row = existing[key]
                await conn.execute(
                    update(share_snapshots)
                    .where(tuple_(*_KEY_COLUMNS) == (key.group_id, key.topic_id, key.partition))
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
            loaded = await self._load(conn, key)
            assert loaded is not None
            return loaded

    async def delete(self, keys: Sequence[SharePartitionKey]) -> int:
        if not keys:
            return 0
        async with self.engine.begin() as conn:
            return await self._delete(conn, keys)

    async def delete_at_epoch(self, key: SharePartitionKey, state_epoch: int) -> bool:
        """Delete the state only if its epoch is still ``state_epoch``: a leader that claimed it
        since (a proxy using it) wins, and nothing is deleted."""
        async with self.engine.begin() as conn:
            rows = await self._locked_snapshots(conn, [key])
            if key not in rows or rows[key].state_epoch != state_epoch:
                return False
            return await self._delete(conn, [key]) == 1

    async def _delete(self, conn: AsyncConnection, keys: Sequence[SharePartitionKey]) -> int:
        tuples = [(k.group_id, k.topic_id, k.partition) for k in keys]
        archived = (
            share_archived.c.group_id,
            share_archived.c.topic_id,
            share_archived.c.partition,
        )
        await conn.execute(delete(share_updates).where(tuple_(*_UPDATE_KEY).in_(tuples)))
        await conn.execute(delete(share_archived).where(tuple_(*archived).in_(tuples)))
        result = await conn.execute(
            delete(share_snapshots).where(tuple_(*_KEY_COLUMNS).in_(tuples))
        )
        return result.rowcount

    async def delete_group(self, group_id: str) -> bool:
        """The group's record, configs and all its share-partition state; False if unknown."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(share_updates).where(share_updates.c.group_id == group_id))
            await conn.execute(delete(share_archived).where(share_archived.c.group_id == group_id))
            await conn.execute(
                delete(share_snapshots).where(share_snapshots.c.group_id == group_id)
            )
            result = await conn.execute(
                delete(share_groups).where(share_groups.c.group_id == group_id)
            )
            return result.rowcount > 0

    async def list_partitions(self, group_id: str) -> list[SharePartitionKey]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(*_KEY_COLUMNS)
                .where(share_snapshots.c.group_id == group_id)
                .order_by(share_snapshots.c.topic_id, share_snapshots.c.partition)
            )
            return [_key_of(r) for r in rows]

    # ----------------------------------------------------------------- membership (expiry rules)
    async def record_membership(
        self, group_id: str, subscribed_topics: Sequence[str], now: datetime
    ) -> None:
        """The live group's subscribed topics (empty: it has no members). Only a change moves
        ``subscription_changed_at``; ``empty_since`` is set when the group becomes empty."""
        topics = sorted(set(subscribed_topics))
        async with self.engine.begin() as conn:
            await self._insert_group(conn, group_id)
            row = (
                await conn.execute(
                    select(
                        share_groups.c.subscribed_topics,
                        share_groups.c.empty_since,
                    )
                    .where(share_groups.c.group_id == group_id)
                    .with_for_update()
                )
            ).one()
            values: dict[str, Any] = {}
            if row.subscribed_topics is None or sorted(row.subscribed_topics) != topics:
                values.update(subscribed_topics=topics, subscription_changed_at=now)
            if not topics and row.empty_since is None:
                values["empty_since"] = now
            elif topics and row.empty_since is not None:
                values["empty_since"] = None
            if values:
                await conn.execute(
                    update(share_groups).where(share_groups.c.group_id == group_id).values(**values)
                )

    async def memberships(self) -> list[GroupMembership]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(share_groups).order_by(share_groups.c.group_id))
            return [
                GroupMembership(
                    r.group_id,
                    dict(r.configs),
                    None if r.subscribed_topics is None else tuple(r.subscribed_topics),
                    aware_utc(r.subscription_changed_at),
                    aware_utc(r.empty_since),
                )
                for r in rows
            ]

    # ----------------------------------------------------------------- scans (batch jobs)
    async def scan(self, group_ids: Sequence[str]) -> list[StoredPartition]:
        """Every share-partition of these groups, state folded as a leader would load it."""
        async with self.engine.connect() as conn:
            snapshots = list(
                await conn.execute(
                    select(share_snapshots)
                    .where(share_snapshots.c.group_id.in_(list(group_ids)))
                    .order_by(*_KEY_COLUMNS)
                )
            )
            updates = await self._updates(conn, [_key_of(r) for r in snapshots])
        out = []
        for row in snapshots:
            key = _key_of(row)
            state = PersistedState(row.start_offset, _batches(row.state_batches))
            for d in updates.get(key, []):
                state.apply(d)
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
                    SharePartitionKey(r.group_id, r.topic_id, r.partition),
                    r.first_offset,
                    r.last_offset,
                    r.delivery_count,
                    aware_utc(r.archived_at),  # type: ignore[arg-type]
                )
                for r in rows
            ]

    # ----------------------------------------------------------------- the write path
    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        """All deltas in one transaction. One statement locks each share-partition's snapshot
        row, checks its state epoch and counts the new updates; a fenced or unknown one is
        skipped, the others commit."""
        if not writes:
            return {}
        by_key: dict[SharePartitionKey, list[PartitionWrite]] = defaultdict(list)
        for w in writes:
            by_key[w.key].append(w)
        if self._dialect == "postgresql":
            return await self._write_pg(by_key)
        results: dict[SharePartitionKey, ErrorCode] = {}
        async with self.engine.begin() as conn:
            counted = await self._count_updates(conn, by_key)
            missing = [k for k in by_key if k not in counted]
            known = await self._state_epochs(conn, missing) if missing else {}
            update_rows: list[dict[str, Any]] = []
            to_fold: dict[SharePartitionKey, list[StateDelta]] = {}
            for key, key_writes in by_key.items():
                results[key] = _verdict(key, counted, known)
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
                        "state_batches": _rows(d.state_batches),
                    }
                    for d in deltas
                )
            if update_rows:
                await conn.execute(insert(share_updates), update_rows)
            await self._log_archived(conn, _archived_rows(by_key, counted))
            if to_fold:
                snapshots = await self._locked_snapshots(conn, list(to_fold))
                await self._fold(conn, snapshots, to_fold)
        return results

    async def _write_pg(
        self, by_key: Mapping[SharePartitionKey, list[PartitionWrite]]
    ) -> dict[SharePartitionKey, ErrorCode]:
        """One statement, one round trip, atomic on its own: lock, fence and count the
        snapshot rows, and append the updates of those that passed. Folding is compaction and
        happens afterwards in its own transaction, off the acknowledgement's critical path."""
        keys = self._fenced_counts(by_key)
        updates = [
            (k.group_id, k.topic_id, k.partition, w.delta.start_offset, _json(w.delta))
            for k, key_writes in by_key.items()
            for w in key_writes
            if not w.delta.is_empty
        ]
        params = _columns("gtpen", keys) | _columns(("ug", "ut", "up", "us", "ub"), updates)
        if any(w.archived for ws in by_key.values() for w in ws):
            # rare (a rejection or the delivery limit): the log row commits with the state
            async with self.engine.begin() as conn:
                result = await conn.execute(_WRITE_PG, params)
                counted = {_key_of(r): r.update_count for r in result}
                await self._log_archived(conn, _archived_rows(by_key, counted))
                missing = [k for k in by_key if k not in counted]
                known = await self._state_epochs(conn, missing) if missing else {}
        else:
            async with self._autocommit.connect() as conn:
                result = await conn.execute(_WRITE_PG, params)
                counted = {_key_of(r): r.update_count for r in result}
                missing = [k for k in by_key if k not in counted]
                known = await self._state_epochs(conn, missing) if missing else {}
        results = {key: _verdict(key, counted, known) for key in by_key}
        due = [k for k, n in counted.items() if n >= self.fold_every]
        if due:
            async with self.engine.begin() as conn:
                snapshots = await self._locked_snapshots(conn, due)
                still_due = {k: [] for k in due if k in snapshots}
                await self._fold(conn, snapshots, still_due)
        return results

    async def _log_archived(self, conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
        """Upsert: a later delta may carry the same archived range again, or a longer one."""
        if not rows:
            return
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        greatest = func.greatest if self._dialect == "postgresql" else func.max
        stmt = dialect.insert(share_archived)
        stmt = stmt.on_conflict_do_update(
            index_elements=["group_id", "topic_id", "partition", "first_offset"],
            set_={
                "last_offset": greatest(share_archived.c.last_offset, stmt.excluded.last_offset),
                "delivery_count": greatest(
                    share_archived.c.delivery_count, stmt.excluded.delivery_count
                ),
            },
        )
        await conn.execute(stmt, rows)

    @staticmethod
    def _fenced_counts(
        by_key: Mapping[SharePartitionKey, list[PartitionWrite]],
    ) -> list[tuple[str, Any, int, int, int]]:
        """(group, topic, partition, state epoch, new updates) per key whose writers agree on
        the state epoch (if they disagree at most one can be current: all are refused)."""
        out = []
        for key, key_writes in by_key.items():
            epochs = {w.state_epoch for w in key_writes}
            if len(epochs) != 1:
                continue
            n = sum(1 for w in key_writes if not w.delta.is_empty)
            out.append((key.group_id, key.topic_id, key.partition, epochs.pop(), n))
        return out

    async def _count_updates(
        self, conn: AsyncConnection, by_key: Mapping[SharePartitionKey, list[PartitionWrite]]
    ) -> dict[SharePartitionKey, tuple[int, int]]:
        """SQLite: lock (the transaction holds the write lock), fence and count per key:
        key → (snapshot epoch, update count) for those whose state epoch matches every write's.
        No round trips there, so one statement per key costs little."""
        data = self._fenced_counts(by_key)
        if not data:
            return {}
        s = share_snapshots.c
        out = {}
        for g, t, p, e, n in data:
            row = (
                await conn.execute(
                    update(share_snapshots)
                    .where(s.group_id == g, s.topic_id == t, s.partition == p, s.state_epoch == e)
                    .values(update_count=s.update_count + n)
                    .returning(s.snapshot_epoch, s.update_count)
                )
            ).first()
            if row is not None:
                out[SharePartitionKey(g, t, p)] = (row.snapshot_epoch, row.update_count)
        return out

    async def _state_epochs(
        self, conn: AsyncConnection, keys: Sequence[SharePartitionKey]
    ) -> dict[SharePartitionKey, int]:
        tuples = [(k.group_id, k.topic_id, k.partition) for k in keys]
        rows = await conn.execute(
            select(*_KEY_COLUMNS, share_snapshots.c.state_epoch).where(
                tuple_(*_KEY_COLUMNS).in_(tuples)
            )
        )
        return {_key_of(r): r.state_epoch for r in rows}

    async def _fold(
        self,
        conn: AsyncConnection,
        snapshots: Mapping[SharePartitionKey, Any],
        to_fold: Mapping[SharePartitionKey, list[StateDelta]],
    ) -> None:
        """Replace snapshot + updates with a new snapshot (snapshot epoch + 1)."""
        keys = list(to_fold)
        stored = await self._updates(conn, keys)
        new_rows = []
        for key, deltas in to_fold.items():
            row = snapshots[key]
            state = PersistedState(row.start_offset, _batches(row.state_batches))
            for d in [*stored.get(key, []), *deltas]:
                state.apply(d)
            new_rows.append(
                {
                    "k_group": key.group_id,
                    "k_topic": key.topic_id,
                    "k_partition": key.partition,
                    "new_snapshot_epoch": row.snapshot_epoch + 1,
                    "new_start_offset": state.start_offset,
                    "new_batches": _rows(state.batches),
                }
            )
        tuples = [(k.group_id, k.topic_id, k.partition) for k in keys]
        await conn.execute(delete(share_updates).where(tuple_(*_UPDATE_KEY).in_(tuples)))
        await conn.execute(_FOLD_UPDATE, new_rows)

    async def _locked_snapshots(
        self, conn: AsyncConnection, keys: Sequence[SharePartitionKey]
    ) -> dict[SharePartitionKey, Any]:
        tuples = [(k.group_id, k.topic_id, k.partition) for k in keys]
        query = select(share_snapshots).where(tuple_(*_KEY_COLUMNS).in_(tuples)).with_for_update()
        return {_key_of(r): r for r in await conn.execute(query)}

    async def _updates(
        self, conn: AsyncConnection, keys: Sequence[SharePartitionKey]
    ) -> dict[SharePartitionKey, list[StateDelta]]:
        tuples = [(k.group_id, k.topic_id, k.partition) for k in keys]
        rows = await conn.execute(
            select(*_UPDATE_KEY, share_updates.c.start_offset, share_updates.c.state_batches)
            .where(tuple_(*_UPDATE_KEY).in_(tuples))
            .order_by(share_updates.c.id)
        )
        out: dict[SharePartitionKey, list[StateDelta]] = defaultdict(list)
        for r in rows:
            out[_key_of(r)].append(StateDelta(r.start_offset, tuple(_batches(r.state_batches))))
        return out

    def _update_key_is(self, key: SharePartitionKey) -> Any:
        return tuple_(*_UPDATE_KEY) == (key.group_id, key.topic_id, key.partition)

    async def _load(self, conn: AsyncConnection, key: SharePartitionKey) -> LoadedState | None:
        row = (
            await conn.execute(
                select(share_snapshots).where(
                    tuple_(*_KEY_COLUMNS) == (key.group_id, key.topic_id, key.partition)
                )
            )
        ).first()
        if row is None:
            return None
        state = PersistedState(row.start_offset, _batches(row.state_batches))
        for d in (await self._updates(conn, [key])).get(key, []):
            state.apply(d)
        return LoadedState(row.state_epoch, row.snapshot_epoch, state)


_BOUND_KEY = (
    (share_snapshots.c.group_id == bindparam("k_group"))
    & (share_snapshots.c.topic_id == bindparam("k_topic"))
    & (share_snapshots.c.partition == bindparam("k_partition"))
)
# The whole Postgres write in one statement, constant whatever the batch size (a VALUES list of N
# rows would be compiled anew for every batch: 170 ms for 1,000 rows), prepared once by asyncpg.
# Updates are appended in the order given (ORDINALITY), so each share-partition's deltas replay
# in the order they were made.
_WRITE_PG = (
    text(
        "WITH counted AS ("
        " UPDATE share_snapshots AS s SET update_count = s.update_count + w.n"
        " FROM unnest(:g, :t, :p, :e, :n) AS w(g, t, p, e, n)"
        " WHERE s.group_id = w.g AND s.topic_id = w.t AND s.partition = w.p"
        " AND s.state_epoch = w.e"
        " RETURNING s.group_id, s.topic_id, s.partition, s.state_epoch, s.snapshot_epoch,"
        " s.update_count"
        "), appended AS ("
        " INSERT INTO share_updates"
        " (group_id, topic_id, partition, state_epoch, snapshot_epoch, start_offset,"
        " state_batches)"
        " SELECT c.group_id, c.topic_id, c.partition, c.state_epoch, c.snapshot_epoch, u.s,"
        " u.b::jsonb"
        " FROM unnest(:ug, :ut, :up, :us, :ub) WITH ORDINALITY AS u(g, t, p, s, b, i)"
        " JOIN counted AS c ON c.group_id = u.g AND c.topic_id = u.t AND c.partition = u.p"
        " ORDER BY u.i"
        ") SELECT group_id, topic_id, partition, update_count FROM counted"
    )
    .bindparams(
        bindparam("g", type_=ARRAY(String())),
        bindparam("t", type_=ARRAY(Uuid())),
        bindparam("p", type_=ARRAY(Integer())),
        bindparam("e", type_=ARRAY(Integer())),
        bindparam("n", type_=ARRAY(Integer())),
        bindparam("ug", type_=ARRAY(String())),
        bindparam("ut", type_=ARRAY(Uuid())),
        bindparam("up", type_=ARRAY(Integer())),
        bindparam("us", type_=ARRAY(BigInteger())),
        bindparam("ub", type_=ARRAY(Text())),
    )
    .columns(
        column("group_id", String()),
        column("topic_id", Uuid()),
        column("partition", Integer()),
        column("update_count", Integer()),
    )
)
_FOLD_UPDATE = (
    update(share_snapshots)
    .where(_BOUND_KEY)
    .values(
        snapshot_epoch=bindparam("new_snapshot_epoch"),
        start_offset=bindparam("new_start_offset"),
        state_batches=bindparam("new_batches"),
        update_count=0,
    )
)
