"""The durable-state store as the core sees it (KIP-932's share coordinator, as a Protocol).

``persistence.repository`` implements it on SQLAlchemy; the leader and admin code depend only on
this. Writes are conditional on the state epoch: a writer holding an older epoch than the store's
gets FENCED_STATE_EPOCH and nothing of its delta is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from uuid import UUID

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import ArchivedRun, PersistedState, StateDelta


@dataclass(frozen=True, slots=True, order=True)
class SharePartitionKey:
    """A share-partition: share group, topic id and partition (the ShareSnapshot key)."""

    group_id: str
    topic_id: UUID
    partition: int

    def __str__(self) -> str:
        """How a log line names it where no topic name is at hand."""
        return f"{self.group_id}/{self.topic_id}-{self.partition}"


@dataclass(frozen=True, slots=True)
class PartitionWrite:
    """One share-partition's part of a WriteShareGroupState."""

    key: SharePartitionKey
    state_epoch: int
    delta: StateDelta
    # delivered records this change archived, and why: the archive log
    archived: tuple[ArchivedRun, ...] = ()


@dataclass(frozen=True, slots=True)
class LoadedState:
    """ReadShareGroupState: the state and the epoch a writer must hold to change it."""

    state_epoch: int
    snapshot_epoch: int
    state: PersistedState


@dataclass(frozen=True, slots=True)
class ShareGroupRecord:
    group_id: str
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupMembership:
    """A share group as the expiry rules see it: what its members subscribe to and since when,
    and since when it has had none (the coordinator records it)."""

    group_id: str
    configs: Mapping[str, str]
    subscribed_topics: tuple[str, ...] | None  # None: no member ever joined
    subscription_changed_at: datetime | None
    empty_since: datetime | None


class StoreUnavailable(Exception):
    """The store could not be reached or used (down, refusing us, a session ended). The one
    error the runtime catches from any store: each implementation converts its drivers'
    failures into it at its boundary, so no caller names a driver."""


# What a client is answered while the store cannot be reached, one code per situation.
# A share-partition whose state cannot be loaded is not led yet: NOT_LEADER_OR_FOLLOWER is what
# clients retry quietly, refreshing metadata (librdkafka surfaces COORDINATOR_NOT_AVAILABLE on
# a fetch to the application).
PARTITION_STATE_UNAVAILABLE = ErrorCode.NOT_LEADER_OR_FOLLOWER
# Anything else (a write, a group, a whole request): as Kafka answers while its share
# coordinator cannot be reached; nothing was done, the client sends it again.
COORDINATOR_UNAVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


class ShareStateStore(Protocol):
    async def ensure_group(self, group_id: str) -> ShareGroupRecord:
        """Record the share group as existing (idempotent)."""
        ...

    async def get_group(self, group_id: str) -> ShareGroupRecord | None: ...

    async def list_groups(self) -> list[ShareGroupRecord]: ...

    async def set_group_configs(
        self, group_id: str, configs: Mapping[str, str | None]
    ) -> ShareGroupRecord:
        """Set (or, with None, remove) dynamic group configs."""
        ...

    async def configs_version(self) -> int:
        """Raised with every change of any group's configs (set, or the group deleted): a node
        whose copy is of another version reads them again."""
        ...

    async def initialize(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        """Create the share-partition's state at ``start_offset`` unless it already exists;
        return what is stored either way, or None when the group was deleted meanwhile (start
        over). The topic's name is kept to tell a recreated topic (same name, new id) from a
        deleted one."""
        ...

    async def read(self, key: SharePartitionKey) -> LoadedState | None: ...

    async def state_epochs(self, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, int]:
        """The stored state epoch of each key that still has state: a leader holding another
        epoch, or missing here, was replaced by another writer (a batch repair)."""
        ...

    async def claim(self, key: SharePartitionKey) -> LoadedState | None:
        """Read the state for a new leader and bump the state epoch, fencing any older one."""
        ...

    async def claim_new(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState | None:
        """``initialize`` then ``claim``, in one transaction: a leader's first load of a new
        share-partition. None when the group or the state was deleted meanwhile (start over)."""
        ...

    async def write(self, writes: Sequence[PartitionWrite]) -> dict[SharePartitionKey, ErrorCode]:
        """Commit many share-partitions' deltas in one transaction; per-partition outcome."""
        ...

    async def reset(
        self, key: SharePartitionKey, start_offset: int, topic_name: str | None = None
    ) -> LoadedState:
        """Replace the state with an empty one at ``start_offset`` under a new state epoch."""
        ...

    async def delete(self, keys: Sequence[SharePartitionKey]) -> int: ...

    async def delete_at_epoch(self, key: SharePartitionKey, state_epoch: int) -> bool:
        """Delete the state only if its epoch is still ``state_epoch`` (no one claimed it)."""
        ...

    async def delete_group(self, group_id: str, empty_since: datetime | None = None) -> bool:
        """Remove the group, its configs and every share-partition state it has; False if it
        is unknown or, given ``empty_since``, no longer empty since that moment."""
        ...

    async def list_partitions(self, group_id: str) -> list[SharePartitionKey]: ...

    async def count_partitions(self) -> dict[str, int]:
        """Stored share-partitions per group id."""
        ...

    async def record_membership(
        self, group_id: str, subscribed_topics: Sequence[str], now: datetime
    ) -> None:
        """The live group's subscribed topics (empty: no members), for the expiry rules."""
        ...

    async def memberships(self) -> list[GroupMembership]: ...
