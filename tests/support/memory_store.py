"""The runtime's store (``ShareStateStore`` and ``ArchiveLog``) in memory, for the middle tier.

It keeps the SQL store's rules, which tests/integration/test_store.py checks on all three:
writes fenced by the state epoch (writers of one share-partition that disagree on it are all
refused), a fold every ``fold_every`` updates under the next snapshot epoch, claims that take
the next state epoch, the archive log's upsert and its redrive claims, and a group's deletion
taking all it owns. Every call yields to the loop once, as a store round trip would; each is
atomic, as one transaction. ``outage`` makes every call fail as a store that cannot be reached,
``delay_s`` makes every call take that long (on the virtual clock: a busy database).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import DEFAULT_FOLD_EVERY, PersistedState
from shareproxy.core.redrive import (
    ArchivedEntry,
    Interval,
    Selection,
    SelectionPlan,
    claimed_pieces,
    plan,
)
from shareproxy.core.store import (
    GroupMembership,
    LoadedState,
    PartitionWrite,
    ShareGroupRecord,
    SharePartitionKey,
    StoreUnavailable,
)


@dataclass(slots=True)
class _Group:
    configs: dict[str, str] = field(default_factory=dict)
    subscribed_topics: tuple[str, ...] | None = None
    subscription_changed_at: datetime | None = None
    empty_since: datetime | None = None


@dataclass(slots=True)
class _Partition:
    state_epoch: int
    snapshot_epoch: int
    state: PersistedState  # the snapshot with every update replayed on it
    update_count: int = 0  # updates written since the last fold
    topic_name: str | None = None

    def loaded(self) -> LoadedState:
        copy = PersistedState(self.state.start_offset, list(self.state.batches))
        return LoadedState(self.state_epoch, self.snapshot_epoch, copy)


class MemoryStore:
    """A ``RuntimeStore`` whose tables are dicts."""

    def __init__(
        self,
        fold_every: int = DEFAULT_FOLD_EVERY,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.fold_every = fold_every
        self.clock = clock
        self.outage = False  # every call raises StoreUnavailable while set
        self.delay_s = 0.0  # every call takes this long first
        self.writes = 0  # write transactions committed
        self._groups: dict[str, _Group] = {}
        self._configs_version = 0
        self._pushes: dict[str, dict[str, Any]] = {}
        self._partitions: dict[SharePartitionKey, _Partition] = {}
        # the archive log: key -> first offset -> entry
        self._archived: dict[SharePartitionKey, dict[int, ArchivedEntry]] = defaultdict(dict)

    async def _round_trip(self) -> None:
        await asyncio.sleep(self.delay_s)
        if self.outage:
            raise StoreUnavailable("the state store cannot be reached (a scripted outage)")

    # groups
    async def ensure_group(self, group_id: str) -> ShareGroupRecord:
        await self._round_trip()
        return self._record(group_id, self._groups.setdefault(group_id, _Group()))

    @staticmethod
    def _record(group_id: str, group: _Group) -> ShareGroupRecord:
        return ShareGroupRecord(group_id, dict(group.configs))

    async def get_group(self, group_id: str) -> ShareGroupRecord | None:
        await self._round_trip()
        group = self._groups.get(group_id)
        return None if group is None else self._record(group_id, group)

    async def list_groups(self) -> list[ShareGroupRecord]:
        await self._round_trip()
        return [self._record(g, self._groups[g]) for g in sorted(self._groups)]

    async def set_group_configs(
        self, group_id: str, configs: Mapping[str, str | None]
    ) -> ShareGroupRecord:
        await self._round_trip()
        group = self._groups.setdefault(group_id, _Group())
        for name, value in configs.items():
            if value is None:
                group.configs.pop(name, None)
            else:
                group.configs[name] = value
        self._configs_version += 1
        return self._record(group_id, group)

    async def set_push(self, group_id: str, spec: Mapping[str, Any]) -> bool:
        await self._round_trip()
        self._groups.setdefault(group_id, _Group())
        created = group_id not in self._pushes
        self._pushes[group_id] = dict(spec)
        self._configs_version += 1
        return created

    async def remove_push(self, group_id: str) -> bool:
        await self._round_trip()
        if self._pushes.pop(group_id, None) is None:
            return False
        self._configs_version += 1
        return True

    async def pushes(self) -> dict[str, dict[str, Any]]:
        await self._round_trip()
        return {g: dict(spec) for g, spec in self._pushes.items()}

    async def configs_version(self) -> int:
        await self._round_trip()
        return self._configs_version

    async def delete_group(self, group_id: str, empty_since: datetime | None = None) -> bool:
        await self._round_trip()
        group = self._groups.get(group_id)
        if group is None or (empty_since is not None and group.empty_since != empty_since):
            return False
        for key in [k for k in self._partitions if k.group_id == group_id]:
            self._drop(key)
        del self._groups[group_id]
        self._pushes.pop(group_id, None)
        self._configs_version += 1
        return True

    # share-partitions
    def _create(self, key: SharePartitionKey, start_offset: int, topic_name: str | None) -> None:
        self._groups.setdefault(key.group_id, _Group())
        if key not in self._partitions:
            self._partitions[key] = _Partition(
                0, 0, PersistedState(start_offset, []), topic_name=topic_name
            )

    async def initialize(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        await self._round_trip()
        self._create(key, start_offset, topic_name)
        return self._partitions[key].loaded()

    async def read(self, key: SharePartitionKey) -> LoadedState | None:
        await self._round_trip()
        stored = self._partitions.get(key)
        return None if stored is None else stored.loaded()

    async def state_epochs(self, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, int]:
        await self._round_trip()
        return {k: self._partitions[k].state_epoch for k in keys if k in self._partitions}

    def _claim(self, key: SharePartitionKey) -> LoadedState | None:
        stored = self._partitions.get(key)
        if stored is None:
            return None
        stored.state_epoch += 1
        return stored.loaded()

    async def claim(self, key: SharePartitionKey) -> LoadedState | None:
        await self._round_trip()
        return self._claim(key)

    async def claim_new(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        await self._round_trip()
        self._create(key, start_offset, topic_name)
        return self._claim(key)

    async def reset(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        await self._round_trip()
        self._groups.setdefault(key.group_id, _Group())
        stored = self._partitions.get(key)
        if stored is None:
            stored = self._partitions[key] = _Partition(
                0, 0, PersistedState(start_offset, []), topic_name=topic_name
            )
        else:
            stored.state_epoch += 1
            stored.snapshot_epoch += 1
            stored.state = PersistedState(start_offset, [])
            stored.update_count = 0
        return stored.loaded()

    def _drop(self, key: SharePartitionKey) -> bool:
        self._archived.pop(key, None)
        return self._partitions.pop(key, None) is not None

    async def delete(self, keys: Sequence[SharePartitionKey]) -> int:
        await self._round_trip()
        return sum(self._drop(k) for k in set(keys))

    async def delete_at_epoch(self, key: SharePartitionKey, state_epoch: int) -> bool:
        await self._round_trip()
        stored = self._partitions.get(key)
        if stored is None or stored.state_epoch != state_epoch:
            return False
        return self._drop(key)

    async def list_partitions(self, group_id: str) -> list[SharePartitionKey]:
        await self._round_trip()
        keys = [k for k in self._partitions if k.group_id == group_id]
        return sorted(keys, key=lambda k: (k.topic_id, k.partition))

    async def count_partitions(self) -> dict[str, int]:
        await self._round_trip()
        counts: dict[str, int] = defaultdict(int)
        for key in self._partitions:
            counts[key.group_id] += 1
        return dict(counts)

    # the write path
    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        await self._round_trip()
        by_key: dict[SharePartitionKey, list[PartitionWrite]] = defaultdict(list)
        for w in writes:
            by_key[w.key].append(w)
        verdicts: dict[SharePartitionKey, ErrorCode] = {}
        for key, key_writes in by_key.items():
            stored = self._partitions.get(key)
            if stored is None:
                verdicts[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if {w.state_epoch for w in key_writes} != {stored.state_epoch}:
                verdicts[key] = ErrorCode.FENCED_STATE_EPOCH
                continue
            verdicts[key] = ErrorCode.NONE
            deltas = [w.delta for w in key_writes if not w.delta.is_empty]
            for delta in deltas:
                stored.state.apply(delta)
            stored.update_count += len(deltas)
            if deltas and stored.update_count >= self.fold_every:
                stored.snapshot_epoch += 1
                stored.update_count = 0
            for w in key_writes:
                for run in w.archived:
                    self._log_archived(key, run.first, run.last, run.delivery_count, run.reason)
        if writes:
            self.writes += 1
        return verdicts

    def _log_archived(
        self, key: SharePartitionKey, first: int, last: int, delivery_count: int, reason: object
    ) -> None:
        """The SQL store's upsert: a later delta may carry the same range again, or longer."""
        log = self._archived[key]
        known = log.get(first)
        if known is None:
            text = getattr(reason, "value", reason)
            log[first] = ArchivedEntry(
                key, first, last, delivery_count, str(text), self.clock(), None
            )
        else:
            log[first] = replace(
                known,
                last_offset=max(known.last_offset, last),
                delivery_count=max(known.delivery_count, delivery_count),
            )

    # membership (expiry rules)
    async def record_membership(
        self, group_id: str, subscribed_topics: Sequence[str], now: datetime
    ) -> None:
        await self._round_trip()
        group = self._groups.get(group_id)
        if group is None:  # deleted: not brought back
            return
        topics = tuple(sorted(set(subscribed_topics)))
        if group.subscribed_topics is None or tuple(sorted(group.subscribed_topics)) != topics:
            group.subscribed_topics, group.subscription_changed_at = topics, now
        if not topics and group.empty_since is None:
            group.empty_since = now
        elif topics and group.empty_since is not None:
            group.empty_since = None

    async def memberships(self) -> list[GroupMembership]:
        await self._round_trip()
        return [
            GroupMembership(
                g,
                dict(group.configs),
                group.subscribed_topics,
                group.subscription_changed_at,
                group.empty_since,
            )
            for g, group in sorted(self._groups.items())
        ]

    # the archive log
    def _entries(self, key: SharePartitionKey) -> list[ArchivedEntry]:
        return [e for _, e in sorted(self._archived.get(key, {}).items())]

    async def archived_page(
        self,
        group_id: str,
        keys: Sequence[SharePartitionKey] | None,
        from_offset: int,
        limit: int,
    ) -> list[ArchivedEntry]:
        await self._round_trip()
        chosen = [k for k in self._archived if k.group_id == group_id]
        if keys is not None:
            chosen = [k for k in chosen if k in set(keys)]
        page = [
            e
            for k in sorted(chosen, key=lambda k: (k.topic_id, k.partition))
            for e in self._entries(k)
            if e.last_offset >= from_offset
        ]
        return page[:limit]

    async def claim_redrive(
        self, selections: Sequence[Selection], dry_run: bool, max_records: int
    ) -> list[SelectionPlan]:
        await self._round_trip()
        now = self.clock()
        plans = []
        planned: dict[SharePartitionKey, list[ArchivedEntry]] = defaultdict(list)
        for s in selections:
            p = plan(s, self._entries(s.key) + planned[s.key])
            plans.append(p)
            planned[s.key].extend(
                ArchivedEntry(s.key, first, last, 0, None, now, now) for first, last in p.redrive
            )
        refused = sum(p.records for p in plans) > max_records
        if dry_run or refused or any(p.missing or p.empty for p in plans):
            return plans
        for p in plans:
            for claim in p.redrive:
                self._mark(p.selection.key, claim, now)
        return plans

    def _mark(self, key: SharePartitionKey, claim: Interval, now: datetime) -> None:
        log = self._archived[key]
        for e in self._entries(key):
            if e.redriven_at is not None or e.last_offset < claim[0] or e.first_offset > claim[1]:
                continue
            within = (max(e.first_offset, claim[0]), min(e.last_offset, claim[1]))
            del log[e.first_offset]
            for (first, last), redriven in claimed_pieces(e, within):
                log[first] = replace(
                    e, first_offset=first, last_offset=last, redriven_at=now if redriven else None
                )

    async def explain_rejection(self, key: SharePartitionKey, offset: int, reason: str) -> bool:
        await self._round_trip()
        entry = self._archived.get(key, {}).get(offset)
        if entry is None or entry.last_offset != offset or entry.reason != "rejected":
            return False
        self._archived[key][offset] = replace(entry, reason=reason)
        return True

    async def release_redrive(self, key: SharePartitionKey, intervals: Sequence[Interval]) -> None:
        await self._round_trip()
        log = self._archived.get(key, {})
        for first, last in intervals:
            for e in list(log.values()):
                if e.first_offset >= first and e.last_offset <= last:
                    log[e.first_offset] = replace(e, redriven_at=None)
