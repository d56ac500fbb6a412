"""What ShareFetch and ShareAcknowledge share in translation: acknowledgements read from the
request, the connection's Read permissions in the form the use cases ask for, and the response
envelope with each partition's leader."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from shareproxy.broker.consumers import SessionRequest, TopicPartition
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.kafka.context import BrokerContext, Connection, by_topic, share_response


def acks_of(topics: Iterable[Any]) -> dict[TopicPartition, list[AckBatch]]:
    """The request's acknowledgement batches by share-partition (those that carry some)."""
    return {
        (topic.topic_id, p.partition_index): [
            AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
            for b in p.acknowledgement_batches
        ]
        for topic in topics
        for p in topic.partitions
        if p.acknowledgement_batches
    }


def session_of(conn: Connection, epoch: int) -> SessionRequest:
    """The request's share-session epoch, charged to the connection's principal and host."""
    return SessionRequest(epoch, (conn.principal, conn.client_host))


@dataclass(frozen=True, slots=True)
class ConnectionAccess:
    """What the connection's principal may Read, asked of the ACLs when the use case needs it."""

    ctx: BrokerContext
    conn: Connection

    def may_read_group(self, group_id: str) -> bool:
        return self.ctx.allowed(self.conn, Operation.READ, ResourceType.GROUP, group_id)

    def may_read_topic(self, topic_id: UUID) -> bool:
        if not self.ctx.security.enabled:
            return True
        info = self.ctx.upstream.topics_by_id.get(topic_id)
        return info is None or self.ctx.allowed(
            self.conn, Operation.READ, ResourceType.TOPIC, info.name
        )


def share_answer(
    ctx: BrokerContext,
    conn: Connection,
    cls: type,
    m: Any,
    topic_cls: type,
    group_id: str,
    partitions: Iterable[TopicPartition],
    entry: Callable[[TopicPartition, Any], Any],
    codes: Iterable[tuple[TopicPartition, int]] = (),
    refusal: ShareError | None = None,
) -> Any:
    """The response of either request: its partitions by topic, each entry made by ``entry``
    with the partition's current leader, and the endpoints of the leaders a client must turn
    to (NOT_LEADER_OR_FOLLOWER) so it need not wait for a metadata refresh."""
    lock_timeout = timedelta(milliseconds=ctx.settings_for(group_id).record_lock_duration_ms)
    if refusal is not None:
        return share_response(cls, topic_cls, {}, lock_timeout, refusal.code, refusal.message)

    def with_leader(tp: TopicPartition) -> Any:
        leader = m.LeaderIdAndEpoch(leader_id=ctx.leader_of(*tp), leader_epoch=ctx.leader_epoch)
        return entry(tp, leader)

    moved = [ctx.leader_of(*tp) for tp, code in codes if code == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    return share_response(
        cls,
        topic_cls,
        by_topic(partitions, with_leader),
        lock_timeout,
        node_endpoints=ctx.node_endpoints(m.NodeEndpoint, conn, moved),
    )
