"""What GroupAdmin answers with: plain values the REST API, the Kafka admin RPCs and the CLI
each render in their own form, so none of them reads the runtime's state directly."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from shareproxy.core.assignor import DEFAULT as DEFAULT_ASSIGNOR
from shareproxy.core.errors import ErrorCode
from shareproxy.core.lag import PartitionLag
from shareproxy.runtime.archive.dead_letters import Problem


@dataclass(frozen=True, slots=True)
class AssignedTopic:
    topic_id: UUID
    name: str  # "" for a topic the cluster no longer has
    partitions: list[int]


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: list[str]
    assignment: list[AssignedTopic]
    last_heartbeat_ms: int = 0  # the coordinator's wall clock at its last heartbeat


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: list[MemberView] = field(default_factory=list)
    assignor: str = DEFAULT_ASSIGNOR


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    topic: str
    topic_id: UUID
    partition: int
    offsets: PartitionLag | None  # None: the share-partition has no state yet
    error: ErrorCode = ErrorCode.NONE
    # the upstream partition's leader epoch as last read: what Kafka's share-partition state
    # records, the epoch of the partition leader that wrote it
    leader_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ResetPlan:
    topic: str
    partition: int
    current_spso: int | None
    new_spso: int


@dataclass(frozen=True, slots=True)
class PendingDeadLetters:
    topic: str
    partition: int
    records: int  # Archiving: not yet in the dead-letter topic
    problem: Problem | None
