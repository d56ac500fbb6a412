"""``SqlShareStateStore``: the core's ``ShareStateStore`` on SQLAlchemy (snapshot + update rows,
epoch-fenced, group-committed), with the group, membership and batch-scan reads beside it.

A facade: each concept lives in a module of its own and this class only hands calls on, so
callers see one store.

- ``groups``: share-group rows and configs
- ``pushes``: share groups' pushes
- ``membership``: membership recorded for the expiry rules
- ``share_partitions``: a share-partition's state from initialize to delete
- ``scans``: whole-group reads for the batch jobs
- ``redrives``: the archive log as the admin API lists it and redrives mark it
- ``writes`` (+ ``write_postgres``, ``write_sqlite``, ``archive_log``, ``folding``): the write path
- ``stored_state``, ``sql``: reading state back, and the SQL helpers all of them share
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.core.errors import ErrorCode
from shareproxy.core.redrive import ArchivedEntry, Interval, Selection, SelectionPlan
from shareproxy.core.store import (
    GroupMembership,
    LoadedState,
    PartitionWrite,
    ShareGroupRecord,
    SharePartitionKey,
)
from shareproxy.persistence.boundary import store_boundary
from shareproxy.persistence.groups import GroupRecords
from shareproxy.persistence.membership import MembershipRecords
from shareproxy.persistence.pushes import PushRecords
from shareproxy.persistence.redrives import ArchiveLogRecords
from shareproxy.persistence.scans import ArchivedRange, BatchScans, StoredPartition
from shareproxy.persistence.share_partitions import SharePartitionStates
from shareproxy.persistence.write_postgres import PostgresWriter
from shareproxy.persistence.write_sqlite import SqliteWriter
from shareproxy.persistence.writes import DEFAULT_FOLD_EVERY, StateWriter

__all__ = [
    "DEFAULT_FOLD_EVERY",
    "ArchivedRange",
    "GroupMembership",
    "SqlShareStateStore",
    "StoredPartition",
]


def state_writer(
    engine: AsyncEngine, fold_every: int = DEFAULT_FOLD_EVERY, *, keep_connection: bool = False
) -> StateWriter:
    """The write path for the engine's dialect (``keep_connection``: see PostgresWriter)."""
    if engine.dialect.name == "postgresql":
        return PostgresWriter(engine, fold_every, keep_connection=keep_connection)
    return SqliteWriter(engine, fold_every)


@store_boundary
class SqlShareStateStore:
    """The durable share-partition state, behind the core's ``ShareStateStore`` Protocol."""

    def __init__(
        self,
        engine: AsyncEngine,
        fold_every: int = DEFAULT_FOLD_EVERY,
        *,
        keep_connection: bool = False,
    ) -> None:
        """``keep_connection``: the write path keeps a connection between writes, for a server
        whose writes come one batch at a time; ``close`` it before disposing of the engine."""
        self._writer = state_writer(engine, fold_every, keep_connection=keep_connection)
        self.engine = engine
        self.fold_every = fold_every
        self._groups = GroupRecords(engine)
        self._membership = MembershipRecords(engine)
        self._pushes = PushRecords(engine)
        self._partitions = SharePartitionStates(engine)
        self._scans = BatchScans(engine)
        self._archive_log = ArchiveLogRecords(engine)

    async def close(self) -> None:
        await self._writer.close()

    # groups
    async def ensure_group(self, group_id: str) -> ShareGroupRecord:
        return await self._groups.ensure_group(group_id)

    async def get_group(self, group_id: str) -> ShareGroupRecord | None:
        return await self._groups.get_group(group_id)

    async def list_groups(self) -> list[ShareGroupRecord]:
        return await self._groups.list_groups()

    async def set_group_configs(
        self, group_id: str, configs: Mapping[str, str | None]
    ) -> ShareGroupRecord:
        return await self._groups.set_group_configs(group_id, configs)

    # pushes
    async def set_push(self, group_id: str, spec: Mapping[str, Any]) -> bool:
        return await self._pushes.set_push(group_id, spec)

    async def remove_push(self, group_id: str) -> bool:
        return await self._pushes.remove_push(group_id)

    async def pushes(self) -> dict[str, dict[str, Any]]:
        return await self._pushes.pushes()

    async def configs_version(self) -> int:
        return await self._groups.configs_version()

    async def delete_group(self, group_id: str, empty_since: datetime | None = None) -> bool:
        return await self._groups.delete_group(group_id, empty_since)

    # share-partitions
    async def initialize(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        return await self._partitions.initialize(key, start_offset, topic_name)

    async def read(self, key: SharePartitionKey) -> LoadedState | None:
        return await self._partitions.read(key)

    async def state_epochs(self, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, int]:
        return await self._partitions.state_epochs(keys)

    async def claim(self, key: SharePartitionKey) -> LoadedState | None:
        return await self._partitions.claim(key)

    async def claim_new(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        return await self._partitions.claim_new(key, start_offset, topic_name)

    async def reset(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        return await self._partitions.reset(key, start_offset, topic_name)

    async def delete(self, keys: Sequence[SharePartitionKey]) -> int:
        return await self._partitions.delete(keys)

    async def delete_at_epoch(self, key: SharePartitionKey, state_epoch: int) -> bool:
        return await self._partitions.delete_at_epoch(key, state_epoch)

    async def list_partitions(self, group_id: str) -> list[SharePartitionKey]:
        return await self._partitions.list_partitions(group_id)

    async def count_partitions(self) -> dict[str, int]:
        return await self._partitions.count_partitions()

    # membership (expiry rules)
    async def record_membership(
        self, group_id: str, subscribed_topics: Sequence[str], now: datetime
    ) -> None:
        await self._membership.record_membership(group_id, subscribed_topics, now)

    async def memberships(self) -> list[GroupMembership]:
        return await self._membership.memberships()

    # scans (batch jobs)
    async def scan(self, group_ids: Sequence[str]) -> list[StoredPartition]:
        return await self._scans.scan(group_ids)

    async def archived(self, group_ids: Sequence[str]) -> list[ArchivedRange]:
        return await self._scans.archived(group_ids)

    # the write path
    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        return await self._writer.write(writes)

    # the archive log: listed, and marked by redrives
    async def archived_page(
        self,
        group_id: str,
        keys: Sequence[SharePartitionKey] | None,
        from_offset: int,
        limit: int,
    ) -> list[ArchivedEntry]:
        return await self._archive_log.archived_page(group_id, keys, from_offset, limit)

    async def claim_redrive(
        self, selections: Sequence[Selection], dry_run: bool, max_records: int
    ) -> list[SelectionPlan]:
        return await self._archive_log.claim_redrive(selections, dry_run, max_records)

    async def release_redrive(self, key: SharePartitionKey, intervals: Sequence[Interval]) -> None:
        await self._archive_log.release_redrive(key, intervals)

    async def explain_rejection(self, key: SharePartitionKey, offset: int, reason: str) -> bool:
        return await self._archive_log.explain_rejection(key, offset, reason)
