"""Drift between stored share-partition state and the source topics, classified.

The state lives in the store, the records in the cluster; retention, DeleteRecords, deleted or
recreated topics, added partitions and abandoned groups make them disagree. Each rule here
decides from plain facts (offsets, ids, times as milliseconds) and names the repair; the batch
jobs gather the facts and carry the repairs out through the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID

from shareproxy.core.states import RecordState

TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class Drift(StrEnum):
    HEALTHY = "healthy"
    GROUP_EXPIRED = "group_expired"  # empty for longer than the retention
    TOPIC_RECREATED = "topic_recreated"  # the stored id is gone; the name has a new id
    TOPIC_DELETED = "topic_deleted"
    PARTITION_DELETED = "partition_deleted"
    UNSUBSCRIBED_TOPIC = "unsubscribed_topic"  # a live group dropped the topic long enough ago
    BEYOND_HIGH_WATERMARK = "beyond_high_watermark"  # SPSO past the log end: truncated
    RECORDS_LOST = "records_lost"  # SPSO below the log start: retention or DeleteRecords
    NEW_PARTITION = "new_partition"  # a partition of a consumed topic with no state


class Repair(StrEnum):
    NONE = "none"
    DELETE_GROUP = "delete_group"
    DELETE_STATE = "delete_state"
    RESET_TO_HIGH_WATERMARK = "reset_to_high_watermark"
    ADVANCE_TO_LOG_START = "advance_to_log_start"
    INITIALIZE_AT_LOG_START = "initialize_at_log_start"


REPAIR = {
    Drift.HEALTHY: Repair.NONE,
    Drift.GROUP_EXPIRED: Repair.DELETE_GROUP,
    Drift.TOPIC_RECREATED: Repair.DELETE_STATE,  # the new id's partitions are NEW_PARTITION
    Drift.TOPIC_DELETED: Repair.DELETE_STATE,
    Drift.PARTITION_DELETED: Repair.DELETE_STATE,
    Drift.UNSUBSCRIBED_TOPIC: Repair.DELETE_STATE,
    Drift.BEYOND_HIGH_WATERMARK: Repair.RESET_TO_HIGH_WATERMARK,
    Drift.RECORDS_LOST: Repair.ADVANCE_TO_LOG_START,
    Drift.NEW_PARTITION: Repair.INITIALIZE_AT_LOG_START,
}


@dataclass(frozen=True, slots=True)
class SourcePartition:
    """A source partition's offsets as the cluster reports them."""

    topic: str
    topic_id: UUID
    partition: int
    log_start: int
    high_watermark: int
    last_stable: int


@dataclass(frozen=True, slots=True)
class GroupFacts:
    group_id: str
    subscribed: tuple[str, ...] | None  # None: no member ever joined (unknown)
    subscription_changed_ms: int | None
    empty_since_ms: int | None


@dataclass(frozen=True, slots=True)
class StoredFacts:
    """A stored share-partition: its key, the topic name it was created under, its state."""

    group_id: str
    topic_id: UUID
    topic_name: str | None
    partition: int
    state_epoch: int
    start_offset: int
    batches: tuple[tuple[int, int, RecordState, int], ...]  # first, last, state, count


@dataclass(frozen=True, slots=True)
class Finding:
    drift: Drift
    group_id: str
    topic: str | None
    topic_id: UUID | None  # None: the group as a whole (an expired group without state)
    partition: int | None
    state_epoch: int | None  # None for a partition without state
    spso: int | None
    log_start: int | None
    high_watermark: int | None
    records: int  # records lost (RECORDS_LOST); otherwise 0
    detail: str

    @property
    def repair(self) -> Repair:
        return REPAIR[self.drift]


def expired(group: GroupFacts, now_ms: int, retention_ms: int | None) -> bool:
    """Empty for longer than the retention (offsets.retention.minutes semantics). A retention of
    None is Kafka's own since 4.1: share groups are kept until deleted (KAFKA-19016)."""
    if retention_ms is None or group.empty_since_ms is None:
        return False
    return now_ms - group.empty_since_ms > retention_ms


def unsubscribed(
    group: GroupFacts, topic: str | None, now_ms: int, retention_ms: int | None
) -> bool:
    """A live group whose members have not subscribed to the topic for longer than the
    retention; a group never seen with members, or an unknown topic name, is left alone."""
    if retention_ms is None or topic is None:
        return False
    if group.subscribed is None or not group.subscribed:
        return False
    if topic in group.subscribed:
        return False
    changed = group.subscription_changed_ms
    return changed is not None and now_ms - changed > retention_ms


def records_lost(
    start_offset: int, batches: Iterable[tuple[int, int, RecordState, int]], log_start: int
) -> int:
    """Offsets in [SPSO, log start) that were neither acknowledged nor archived: gone unread."""
    if log_start <= start_offset:
        return 0
    lost = log_start - start_offset
    for first, last, state, _ in batches:
        if state in TERMINAL:
            lo, hi = max(first, start_offset), min(last, log_start - 1)
            if lo <= hi:
                lost -= hi - lo + 1
    return lost


def classify_state(
    stored: StoredFacts,
    group: GroupFacts,
    source: Mapping[tuple[UUID, int], SourcePartition],
    topic_ids: Mapping[str, UUID],
    partition_counts: Mapping[UUID, int],
    now_ms: int,
    retention_ms: int | None,
) -> Finding:
    """One stored share-partition against the cluster. The first rule that holds wins, from
    the widest (the whole group) to the narrowest (an offset range)."""
    here = source.get((stored.topic_id, stored.partition))
    name = stored.topic_name
    if here is not None:
        name = here.topic

    def finding(drift: Drift, detail: str, records: int = 0) -> Finding:
        return Finding(
            drift,
            stored.group_id,
            name,
            stored.topic_id,
            stored.partition,
            stored.state_epoch,
            stored.start_offset,
            None if here is None else here.log_start,
            None if here is None else here.high_watermark,
            records,
            detail,
        )

    if expired(group, now_ms, retention_ms):
        return finding(Drift.GROUP_EXPIRED, "the group has been empty longer than the retention")
    if stored.topic_id not in partition_counts:
        new_id = topic_ids.get(name) if name is not None else None
        if new_id is not None and new_id != stored.topic_id:
            return finding(Drift.TOPIC_RECREATED, f"{name} now has topic id {new_id}")
        return finding(Drift.TOPIC_DELETED, "no topic has this id")
    if here is None:
        count = partition_counts[stored.topic_id]
        return finding(Drift.PARTITION_DELETED, f"the topic has {count} partitions")
    if unsubscribed(group, name, now_ms, retention_ms):
        return finding(Drift.UNSUBSCRIBED_TOPIC, "no member has subscribed to it since")
    if stored.start_offset > here.high_watermark:
        return finding(
            Drift.BEYOND_HIGH_WATERMARK,
            f"SPSO {stored.start_offset} > high watermark {here.high_watermark}",
        )
    if stored.start_offset < here.log_start:
        lost = records_lost(stored.start_offset, stored.batches, here.log_start)
        return finding(
            Drift.RECORDS_LOST,
            f"SPSO {stored.start_offset} < log start {here.log_start}",
            lost,
        )
    return finding(Drift.HEALTHY, "")


def new_partitions(
    group: GroupFacts,
    stored: Sequence[StoredFacts],
    source: Iterable[SourcePartition],
    now_ms: int,
    retention_ms: int | None,
) -> list[Finding]:
    """Partitions of topics the group consumes (state on another partition of the same topic
    id, or state under the same name with an old id: recreated) that have no state. A topic the
    group never consumed is not drift: the proxy initializes it by share.auto.offset.reset."""
    if expired(group, now_ms, retention_ms):
        return []
    have = {(s.topic_id, s.partition) for s in stored}
    ids = {s.topic_id for s in stored}
    names = {s.topic_name for s in stored if s.topic_name is not None}
    out = []
    for p in source:
        if (p.topic_id, p.partition) in have:
            continue
        if p.topic_id not in ids and p.topic not in names:
            continue
        if unsubscribed(group, p.topic, now_ms, retention_ms):
            continue
        out.append(
            Finding(
                Drift.NEW_PARTITION,
                group.group_id,
                p.topic,
                p.topic_id,
                p.partition,
                None,
                None,
                p.log_start,
                p.high_watermark,
                0,
                "no state: records from the log start are new to the group",
            )
        )
    return out


class Cluster:
    """The source partitions, indexed the ways the rules look them up."""

    def __init__(self, source: Iterable[SourcePartition]) -> None:
        self.partitions = list(source)
        self.by_key = {(p.topic_id, p.partition): p for p in self.partitions}
        self.topic_ids = {p.topic: p.topic_id for p in self.partitions}
        self.counts: dict[UUID, int] = {}
        for p in self.partitions:
            self.counts[p.topic_id] = self.counts.get(p.topic_id, 0) + 1


def classify_group(
    group: GroupFacts,
    stored: Sequence[StoredFacts],
    cluster: Cluster,
    now_ms: int,
    retention_ms: int | None,
) -> list[Finding]:
    """Every stored share-partition of one group, and its new partitions."""
    out = [
        classify_state(
            s, group, cluster.by_key, cluster.topic_ids, cluster.counts, now_ms, retention_ms
        )
        for s in stored
    ]
    if not stored and expired(group, now_ms, retention_ms):
        detail = "the group has been empty longer than the retention"
        return [
            Finding(
                Drift.GROUP_EXPIRED,
                group.group_id,
                None,  # topic
                None,  # topic id
                None,  # partition
                None,  # state epoch
                None,  # SPSO
                None,  # log start
                None,  # high watermark
                0,
                detail,
            )
        ]
    out.extend(new_partitions(group, stored, cluster.partitions, now_ms, retention_ms))
    return out


def classify(
    groups: Sequence[GroupFacts],
    stored: Sequence[StoredFacts],
    source: Sequence[SourcePartition],
    now_ms: int,
    retention_ms: int | None,
) -> list[Finding]:
    """Every stored share-partition, and every new partition, of every group."""
    cluster = Cluster(source)
    out: list[Finding] = []
    for group in groups:
        mine = [s for s in stored if s.group_id == group.group_id]
        out.extend(classify_group(group, mine, cluster, now_ms, retention_ms))
    return out
