"""The use cases of a share group's consumers, whichever front end they come through: ShareFetch
and ShareAcknowledge on the Kafka listener, fetch and acknowledge on the HTTP records API.

Each call takes ids (topic ids, group and member ids), the client that asks and what it asks, and
answers a plain outcome the front end translates. The rules live here, once: who may open or use a
share session, acknowledgements before acquisition (each durable before the answer, all of one
request in one group commit), the long poll, and what closing a session releases. The HTTP API
names topics; it resolves them to ids here (``named``) and then takes the same path, minus the
share session it does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import group_id_problem
from shareproxy.core.share_session import (
    CLOSE_EPOCH,
    INVALID_MEMBER_ID,
    OPEN_EPOCH,
    ClientKey,
    ShareSession,
    ShareSessionCache,
    TopicPartition,
    valid_member_id,
)
from shareproxy.core.states import AcquireMode
from shareproxy.core.store import ShareStateStore
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.runtime.consuming.consumption import Consumption
from shareproxy.runtime.consuming.leader import Acquisition, SharePartitionLeader
from shareproxy.runtime.consuming.partitions import SharePartitions
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.lookups import topic_named

__all__ = [
    "CLOSE_EPOCH",
    "OPEN_EPOCH",
    "Access",
    "Acknowledged",
    "Acquisition",
    "FetchLimits",
    "Fetched",
    "NamedTopic",
    "SessionRequest",
    "ShareConsumers",
    "TopicPartition",
]


class Access(Protocol):
    """What the client that asks may Read: the front end knows who it is and how to ask the
    ACLs; the use case knows which group and topics a request touches, and when."""

    def may_read_group(self, group_id: str) -> bool: ...

    def may_read_topic(self, topic_id: UUID) -> bool:
        """True for an id the cluster does not know: it gets its own error where it is used."""
        ...


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What a request says about its share session: the epoch, who sends it (sessions are
    charged to that client), and on which connection (a session ends with the one that opened
    it; 0: none)."""

    epoch: int
    client: ClientKey
    connection: int = 0

    @property
    def closes(self) -> bool:
        return self.epoch == CLOSE_EPOCH


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """How much one fetch may acquire, and how long it may wait for it (the long poll)."""

    max_wait_ms: int
    max_records: int  # zero or less acquires nothing, as Kafka
    max_bytes: int
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED
    min_bytes: int = 1


@dataclass(slots=True)
class Acknowledged:
    """A ShareAcknowledge's outcome: ``refusal`` refuses it whole; otherwise each acknowledged
    partition's error code (NONE once durable)."""

    refusal: ShareError | None = None
    codes: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(slots=True)
class Fetched:
    """A ShareFetch's outcome: ``refusal`` refuses it whole; otherwise what was acquired, each
    acknowledged partition's code, and an error code for each partition that gave nothing."""

    refusal: ShareError | None = None
    acquired: dict[TopicPartition, Acquisition] = field(default_factory=dict)
    acknowledged: dict[TopicPartition, int] = field(default_factory=dict)
    errors: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NamedTopic:
    """A topic the HTTP API names, as the runtime knows it."""

    name: str
    topic_id: UUID
    partitions: tuple[int, ...]


class ShareConsumers:
    """Fetch and acknowledge for the members of share groups, with their share sessions."""

    def __init__(
        self,
        consumption: Consumption,
        sessions: ShareSessionCache,
        cluster: ClusterNodes,
        clock_ms: Callable[[], int],
        *,
        partitions: SharePartitions,
        store: ShareStateStore,
        upstream: Upstream,
    ) -> None:
        self._consumption = consumption
        self._partitions = partitions  # HTTP consumers: whether this node leads, and loading
        self._store = store  # HTTP consumers send no heartbeat: their group is made here
        self._upstream = upstream  # topics named by HTTP consumers
        self._sessions = sessions
        self._cluster = cluster
        self._clock_ms = clock_ms

    # ------------------------------------------------------------------ Kafka: share sessions
    async def share_fetch(
        self,
        group_id: str,
        member_id: str,
        session: SessionRequest,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
        *,
        fetch: Iterable[TopicPartition],
        forget: Iterable[TopicPartition],
        limits: FetchLimits,
        access: Access,
    ) -> Fetched:
        """Acknowledge, then acquire from every partition of the share session, waiting up to
        ``limits.max_wait_ms`` while there is nothing to give; epoch -1 acknowledges and closes
        the session instead."""
        refused = _group_refusal(group_id)
        if refused is not None:
            return Fetched(refused)
        if session.epoch == OPEN_EPOCH and acks:
            return Fetched(
                ShareError(ErrorCode.INVALID_REQUEST, "acknowledgements cannot open a session")
            )
        try:
            opened = self._begin(group_id, member_id, session, access, acknowledging_only=False)
        except ShareError as refusal:
            return Fetched(refusal)
        fetch = list(fetch)
        touched = [*acks, *fetch, *opened.partitions]
        denied = _denied((tp[0] for tp in touched), access)
        acknowledged = await self._acknowledge(group_id, member_id, acks, denied)
        if session.closes:
            await self._close(group_id, member_id)
            return Fetched(acknowledged=acknowledged)
        opened.add(fetch)
        opened.forget(forget)
        errors: dict[TopicPartition, int] = {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in opened.partitions if tp[0] in denied
        }
        leaders, unled = await self._consumption.leaders(
            group_id, [tp for tp in opened.partitions if tp[0] not in denied]
        )
        errors.update(unled)
        # Like a Kafka broker, the partition leader does not check assignments: a member fetching
        # a partition that a rebalance moved away is served until its next heartbeat tells it.
        # (Serving only the member's target stalled clients that fetch from one node at a time,
        # librdkafka, for MaxWaitMs whenever their target and their fetches disagreed.)
        acquired = await self._acquire(leaders, member_id, limits)
        return Fetched(acquired=acquired, acknowledged=acknowledged, errors=errors)

    async def share_acknowledge(
        self,
        group_id: str,
        member_id: str,
        session: SessionRequest,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
        *,
        access: Access,
    ) -> Acknowledged:
        """Acknowledgements outside a fetch, each durable before the answer; epoch -1 also
        closes the share session and releases the member's remaining locks."""
        refused = _group_refusal(group_id)
        if refused is not None:
            return Acknowledged(refused)
        try:
            self._begin(group_id, member_id, session, access, acknowledging_only=True)
        except ShareError as refusal:
            return Acknowledged(refusal)
        codes = await self._acknowledge(
            group_id, member_id, acks, _denied((tp[0] for tp in acks), access)
        )
        if session.closes:
            await self._close(group_id, member_id)
        return Acknowledged(codes=codes)

    def _begin(
        self,
        group_id: str,
        member_id: str,
        session: SessionRequest,
        access: Access,
        *,
        acknowledging_only: bool,
    ) -> ShareSession:
        """The share session the request works in, for a client that may Read the group.

        As a Kafka broker (KafkaApis.handleShareFetchRequest / handleShareAcknowledgeRequest),
        the member id is checked for form only, never against the group: share groups fence
        no one, so a member the coordinator removed (its heartbeats stopped past the session
        timeout) goes on fetching and acknowledging in its session until it rejoins, and one
        that never joined is served too. Sessions stay bounded per client and in all."""
        if not access.may_read_group(group_id):
            raise ShareError(
                ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {group_id!r}"
            )
        if not valid_member_id(member_id):
            raise ShareError(ErrorCode.INVALID_REQUEST, INVALID_MEMBER_ID)
        key = (group_id, member_id, self._cluster.node_id)
        return self._sessions.begin(
            key,
            session.epoch,
            self._clock_ms(),
            session.client,
            acknowledging_only=acknowledging_only,
            connection=session.connection,
        )

    async def connection_closed(self, connection: int) -> None:
        """A client connection closed: the share sessions it opened end, and the locks their
        members hold on this node end with them (delivery counts kept), as an explicit close
        would end them, so a crashed consumer's records go to the others at once."""
        for session in self._sessions.close_connection(connection):
            group_id, member_id, _ = session.key
            await self._consumption.release(group_id, member_id)

    async def _close(self, group_id: str, member_id: str) -> None:
        """The member's share session on this node ends (epoch -1): its remaining locks end."""
        self._sessions.close((group_id, member_id, self._cluster.node_id))
        await self._consumption.release(group_id, member_id)

    async def _acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
        denied: set[UUID],
    ) -> dict[TopicPartition, int]:
        """Every partition's acknowledgements at once (group commit takes them in one
        transaction), those of topics the client may not Read refused."""
        allowed = {tp: batches for tp, batches in acks.items() if tp[0] not in denied}
        codes = await self._consumption.acknowledge(group_id, member_id, allowed)
        for tp in acks:
            codes.setdefault(tp, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return codes

    # ------------------------------------------------------------------ HTTP: no share session
    async def named(self, names: Iterable[str]) -> list[NamedTopic]:
        """The topics by name, asking the upstream cluster for any it does not know yet;
        UNKNOWN_TOPIC_OR_PARTITION for one it does not have."""
        found = []
        for name in dict.fromkeys(names):
            info = await topic_named(self._upstream, name)
            found.append(NamedTopic(name, info.topic_id, tuple(sorted(info.leaders))))
        return found

    def known(self, names: Iterable[str]) -> list[NamedTopic]:
        """The named topics the runtime knows now, without asking the cluster: an
        acknowledgement names a topic it fetched from, so an unknown one has nothing to settle."""
        found = []
        for name in dict.fromkeys(names):
            info = self._upstream.topics.get(name)
            if info is not None:
                found.append(NamedTopic(name, info.topic_id, tuple(sorted(info.leaders))))
        return found

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        partitions: Iterable[TopicPartition],
        limits: FetchLimits,
        *,
        group_stored: bool = False,
    ) -> dict[TopicPartition, Acquisition]:
        """Acquire from the partitions this node leads (the others: from the nodes leading
        them); the group is created if it is new, as HTTP consumers send no heartbeat, unless
        the caller knows it is stored (a push is stored with its group)."""
        leaders = [
            await self._partitions.leader(group_id, *tp)
            for tp in partitions
            if self._partitions.leads(*tp)
        ]
        if not group_stored:
            await self._store.ensure_group(group_id)
        return await self._acquire(leaders, member_id, limits)

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
    ) -> dict[TopicPartition, int]:
        """Acknowledgements without a share session, in one group commit, each partition with
        its own error code once durable."""
        return await self._consumption.acknowledge(group_id, member_id, acks)

    async def release(self, group_id: str, member_id: str) -> None:
        """The locks a consumer without a share session holds on this node end now, delivery
        counts kept (a pusher that stops)."""
        await self._consumption.release(group_id, member_id)

    async def _acquire(
        self, leaders: Sequence[SharePartitionLeader], member_id: str, limits: FetchLimits
    ) -> dict[TopicPartition, Acquisition]:
        return await self._consumption.acquire(
            leaders,
            member_id,
            max_wait_ms=limits.max_wait_ms,
            max_records=limits.max_records,
            max_bytes=limits.max_bytes,
            min_bytes=limits.min_bytes,
            mode=limits.mode,
        )

    def lock_expiry_ms(self, group_id: str) -> int:
        """When an acquisition lock taken now ends (the group's share.record.lock.duration.ms)."""
        return self._consumption.lock_expiry_ms(group_id)


def _group_refusal(group_id: str) -> ShareError | None:
    """An empty group id is INVALID_REQUEST, as Kafka answers it; one the store cannot hold
    is INVALID_GROUP_ID, as the proxy answers it everywhere (it never reaches the store)."""
    if not group_id:
        return ShareError(ErrorCode.INVALID_REQUEST, "GroupId must be set")
    problem = group_id_problem(group_id)
    return None if problem is None else ShareError(ErrorCode.INVALID_GROUP_ID, problem)


def _denied(topic_ids: Iterable[UUID], access: Access) -> set[UUID]:
    return {tid for tid in set(topic_ids) if not access.may_read_topic(tid)}
